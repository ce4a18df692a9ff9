"""Heavy hitters of a text metric: detection floor, false discoveries, interval coverage, speed.

Runs the issue's simulations (n = 1e6, 8-byte strings, eps 4 and 1, 400 runs each by default):
a string planted at T95 and one at tau among ~92% unique noise, decoded by the real decoder
(`deniable.estimators.heavyhitters.discover`) from counts drawn exactly. Prints the formula's T95
and tau (C = 0; the strings are planted there), the mean floor the runs stated (with their
collision variance, STATS.md section 11), hits at T95 (pass
>= 367/400), hits at tau (<= 200), runs returning a never-sent string (<= 33), the coverage of
the returned strings' intervals (>= 0.94), and the decode time.

Why drawing the counts is the same distribution as running every device's ``record()``: a
report's bits are independent given its (level, row, cell), the true cell's bit is 1 with
probability p and every other with q; so the count of cell c of (level, row) is
Bin(#reports there whose prefix hashes to c, p) + Bin(#other reports there, q), independently
over cells. Devices are pinned to a uniform level (the SDK's HMAC of its secret) and draw a
uniform row per report: a multinomial split of the devices, drawn here device by device.

Strings planted at 0.9 T95 and 1.1 T95 bracket the simulated floor: the formula's T95 is within
10% of the simulated one when the first is found in at most 95% of runs and the second in at
least 95% (up to the binomial noise of 400 runs, +-2.2 points).

    python -m bench.heavy_hitters --runs 400 --n 1000000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from deniable.client.mechanisms import OLH_PRIME, PrefixSketch
from deniable.client.mechanisms import _text_hash_coefficients as hash_coefficients
from deniable.estimators.heavyhitters import discover, floor


def simulate_counts(
    sketch: PrefixSketch, strings: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The counts a batch of devices holding ``strings`` ((n, L) uint8, padded) would produce."""
    n, length = strings.shape
    a, b = (np.asarray(x, dtype=np.int64) for x in hash_coefficients())
    levels = rng.integers(1, sketch.levels + 1, size=n)
    rows = rng.integers(0, sketch.rows, size=n)
    keep = np.arange(length)[None, :] < np.minimum(levels * 1, length)[:, None]
    total = (strings.astype(np.int64) * a[rows, :length] * keep).sum(axis=1) + b[rows]
    cells = (total % OLH_PRIME) % sketch.cells
    flat = ((levels - 1) * sketch.rows + rows) * sketch.cells + cells
    size = sketch.levels * sketch.rows * sketch.cells
    true = np.bincount(flat, minlength=size)
    tallies = np.bincount((levels - 1) * sketch.rows + rows, minlength=sketch.levels * sketch.rows)
    per_cell = np.repeat(tallies, sketch.cells)
    counts = rng.binomial(true, sketch.p) + rng.binomial(per_cell - true, sketch.q)
    return np.concatenate([counts, tallies]).astype(np.int64)


def population(
    n: int, length: int, planted: dict[bytes, float], rng: np.random.Generator
) -> np.ndarray:
    """n padded strings: each planted string at its share, the rest random full-length noise
    (8 random bytes in 1..255: practically unique, and the planted ones are shorter)."""
    out = rng.integers(1, 256, size=(n, length), dtype=np.uint8)
    start = 0
    for value, share in planted.items():
        count = round(n * share)
        out[start : start + count] = np.frombuffer(value.ljust(length, b"\0"), dtype=np.uint8)
        start += count
    return out


def run(epsilon: float, n: int, runs: int, seed: int) -> dict[str, float]:
    """The issue's floor simulation at one eps."""
    sketch = PrefixSketch(8, epsilon)
    stated = floor(sketch, n)
    # distinct first bytes: planted strings sharing a prefix would add up at the early levels
    at_floor, at_tau, below, above = b"F-floor", b"T-tau", b"L-low", b"H-high"
    planted = {
        at_floor: stated.t95,
        at_tau: stated.tau,
        below: 0.9 * stated.t95,
        above: 1.1 * stated.t95,
        b"common": 0.05,
    }
    rng = np.random.default_rng(seed)
    hits = tau_hits = invented = covered = returned = bound = low_hits = high_hits = 0
    seconds = stated_sum = 0.0
    for _ in range(runs):
        strings = population(n, 8, planted, rng)
        counts = simulate_counts(sketch, strings, rng)
        began = time.perf_counter()
        found = discover(sketch, counts)
        seconds += time.perf_counter() - began
        values = {h.value.encode(): h for h in found.hitters}
        hits += at_floor in values
        tau_hits += at_tau in values
        low_hits += below in values
        high_hits += above in values
        invented += any(v not in planted for v in values)
        bound += found.cap_bound
        stated_sum += found.floor.t95
        for value, hitter in values.items():
            if value in planted:
                returned += 1
                true = round(n * planted[value]) / n
                covered += hitter.ci_low <= true <= hitter.ci_high
    return {
        "eps": epsilon,
        "T95 %": 100 * stated.t95,
        "tau %": 100 * stated.tau,
        "run T95 %": 100 * stated_sum / max(1, runs),
        "found at T95": hits,
        "found at tau": tau_hits,
        "at 0.9 T95": low_hits,
        "at 1.1 T95": high_hits,
        "runs inventing": invented,
        "coverage": covered / max(1, returned),
        "cap bound": bound,
        "decode s": seconds / runs,
    }


def ingestion(reports: int, seed: int, epsilon: float = 4.0) -> list[dict[str, object]]:
    """Reports/s through the collector's storage path (prepare, then one transaction per batch
    of 500) into a fresh SQLite file, and the bytes per report stored (payload text, and the
    count rows it adds on average), for a text metric beside a categorical oue metric (k =
    100) at the same eps."""
    import datetime as dt
    import tempfile
    import uuid
    from pathlib import Path

    from sqlalchemy import text

    from deniable.client import MetricSpec, SeededRandomness
    from deniable.client.wire import payload_text
    from deniable.collector.storage.engine import open_database
    from deniable.collector.storage.migrator import migrate
    from deniable.collector.storage.prepare import prepare_batch
    from deniable.collector.storage.queries import register_spec
    from deniable.collector.storage.transaction import store_batches
    from deniable.collector.validation import ValidReport

    rng = SeededRandomness(seed)
    today = dt.date.today()
    specs = [
        MetricSpec.text("search", max_length=8, epsilon=epsilon),
        MetricSpec.categorical(
            "browser", [f"c{i}" for i in range(100)], epsilon=epsilon, mechanism="oue"
        ),
    ]
    rows = []
    for spec in specs:
        folder = Path(tempfile.mkdtemp())
        url = f"sqlite:///{folder / 'bench.sqlite3'}"
        migrate(url)
        database = open_database(url)
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        if spec.type == "text":
            sketch = spec.text_randomizer
            payloads = [
                sketch.randomize(sketch.encode(f"s{i % 300}"), 1 + i % 8, rng)
                for i in range(reports)
            ]
        else:
            payloads = [spec.randomizer.randomize(i % 100, rng) for i in range(reports)]
        batches = [
            [
                ValidReport(str(uuid.uuid4()), spec.name, today.isoformat(), p)
                for p in payloads[start : start + 500]
            ]
            for start in range(0, reports, 500)
        ]
        began = time.perf_counter()
        for batch in batches:
            store_batches(database, [prepare_batch(batch, {spec.name: spec}, today)])
        seconds = time.perf_counter() - began
        with database.reader.connect() as connection:
            counts = connection.execute(
                text(
                    "SELECT (SELECT count(*) FROM support_counts)"
                    " + (SELECT count(*) FROM text_cell_counts)"
                )
            ).scalar()
        database.dispose()
        rows.append(
            {
                "metric": f"{spec.type} ({spec.mechanism}, eps {epsilon:g})",
                "reports/s": reports / seconds,
                "payload bytes": sum(len(payload_text(p)) for p in payloads) / reports,
                "count rows": counts,
            }
        )
    return rows


def end_to_end(
    devices: int, seed: int, per_client: int = 250, backend: str = "sqlite"
) -> dict[str, object]:
    """``devices`` SDK devices with a Zipf set of strings through a real collector (the demo's,
    on SQLite or a scratch PostgreSQL database, ``backend``): one Client per ``per_client``
    devices (its own pinned level, as ``simulate``), then the estimate endpoint. Returns the
    strings above the floor, those returned, and any returned string no device holds."""
    import random

    from deniable.client import MetricSpec

    rng = random.Random(seed)
    words = [f"term{i}" for i in range(200)]
    weights = [1 / (i + 1) ** 1.1 for i in range(len(words))]
    values = rng.choices(words, weights=weights, k=round(devices * 0.7))
    values += [f"u{i:07d}" for i in range(devices - len(values))]
    rng.shuffle(values)
    spec = MetricSpec.text("search_term", max_length=8, epsilon=4.0)
    scratch = None
    url = None
    if backend == "postgresql":
        from testkit.postgres import create_database, database_url

        scratch = create_database("bench_text")
        url = database_url(scratch)
    try:
        document, seconds = _deliver_and_estimate(spec, values, seed, per_client, url)
    finally:
        if scratch:
            from testkit.postgres import drop_databases

            drop_databases([scratch])
    truth = {v: values.count(v) / devices for v in set(values)}
    returned = [row["value"] for row in document["strings"]]
    above = sorted((v for v, f in truth.items() if f >= document["floor"]["t95"]), key=truth.get)
    return {
        "backend": backend,
        "devices": document["n"],
        "floor T95": document["floor"]["t95"],
        "strings above the floor": len(above),
        "of them returned": sum(v in returned for v in above),
        "returned": len(returned),
        "returned, no device holds it": sum(v not in truth for v in returned),
        "record + deliver s": round(seconds, 1),
    }


def _deliver_and_estimate(
    spec: object, values: list[str], seed: int, per_client: int, url: str | None
) -> tuple[dict, float]:
    """Record ``values`` through SDK clients into a local collector on ``url`` (None: a
    temporary SQLite file); the estimate document and the seconds recording took."""
    import tempfile
    from pathlib import Path

    import httpx

    from deniable.cli.localcollector import LocalCollector
    from deniable.client import Client, SeededRandomness

    devices = len(values)
    with LocalCollector(database_url=url) as collector:
        headers = {"Authorization": f"Bearer {collector.token}"}
        with httpx.Client(base_url=collector.url, headers=headers, timeout=60) as admin:
            admin.post("/v1/metrics", json=spec.fingerprint_fields()).raise_for_status()
            began = time.perf_counter()
            root = Path(tempfile.mkdtemp())
            for start in range(0, devices, per_client):
                client = Client(
                    collector.url,
                    state_dir=root / str(start),
                    metrics=[spec],
                    ingest_key=collector.token,
                    max_reports_per_period=per_client,
                    randomness=SeededRandomness(seed + start),
                )
                for value in values[start : start + per_client]:
                    client.record(spec.name, value)
                client.flush(timeout=120)
                client.close()
            seconds = time.perf_counter() - began
            document = admin.get(f"/v1/metrics/{spec.name}/estimate").json()
    return document, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument(
        "--ingest", type=int, default=0, metavar="N", help="also time storing N reports"
    )
    parser.add_argument(
        "--devices", type=int, default=0, metavar="N", help="also run N SDK devices end to end"
    )
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="the --devices run's database (postgresql: a scratch database on the test server)",
    )
    args = parser.parse_args()
    if args.devices:
        print(end_to_end(args.devices, args.seed, backend=args.backend))
    if args.ingest:
        for row in ingestion(args.ingest, args.seed, 4.0) + ingestion(args.ingest, args.seed, 1.0):
            print(
                " | ".join(
                    f"{k}: {v:,.0f}" if isinstance(v, float) else f"{k}: {v}"
                    for k, v in row.items()
                )
            )
    if not args.runs:
        return
    print(f"n = {args.n:,}, 8-byte strings, {args.runs} runs per eps")
    header = None
    for epsilon in (4.0, 1.0):
        row = run(epsilon, args.n, args.runs, args.seed)
        if header is None:
            header = list(row)
            print(" | ".join(f"{h:>14}" for h in header))
        print(
            " | ".join(f"{v:>14.4g}" if isinstance(v, float) else f"{v:>14}" for v in row.values()),
            flush=True,
        )


if __name__ == "__main__":
    main()
