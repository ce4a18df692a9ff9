"""Collector benchmark: sustained ingestion throughput and estimate latency, printed as tables.

For each backend (SQLite file, PostgreSQL database) it starts a real collector process
(``deniable serve``), then:

1. posts pre-built batches of 500 randomized reports of a k = 100 metric from several client
   threads for a fixed time (reports spread over the last 90 daily periods) and prints
   reports/s with request latency p50/p99;
2. tops the metric up to 1 million stored reports through the API and times
   ``GET /v1/metrics/{name}/estimate`` over 1 period and over 90 periods (issue 8), then
   walks the whole admin export in pages of 10,000 (first, median and last page latency);
3. with ``--big``, seeds the database directly (bulk SQL, not through the API) to 3 and then
   10 million raw reports with their counts, times ingestion again at each size (the curve from
   a fresh database to 10 million), then the estimates and the export: an estimate
   reads at most k counts per period, and an export page seeks by key, so neither latency
   grows with n.

With ``--dimensions`` the metric declares two dimensions (platform: 3 values, app_version: 9;
40 cells with ``other``) and every report carries random values of both: compare its
ingestion rows with a run without it (issue 27's target: within 20%).

It also prints the CPU share of the collector processes and of this client process while
ingesting (both share the machine's cores). Run:
``.venv/bin/python -m bench.ingest [--backend sqlite|postgresql|both] [--ingest-only] [--big]
[--dimensions] [--one-period] [--ratio ROUNDS]``; ``--ratio 3`` alternates runs without and
with dimensions three times per backend and prints the median ratio.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import random
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import httpx
import numpy as np

from deniable.client import MetricSpec
from deniable.client.wire import payload_text
from deniable.collector.storage import open_database
from deniable.collector.storage.tables import period_counts, reports, support_counts
from deniable.estimators import support_matrix
from testkit import (
    ADMIN_TOKEN,
    CollectorProcess,
    FastRandomness,
    collector_settings,
    process_tree_cpu,
    register_all,
    scratch_database,
)

BATCH = 500
K = 100
DAYS = 90
DIMENSIONS = {"platform": ["ios", "android", "web"], "app_version": [f"1.{i}" for i in range(9)]}
"""The two dimensions ``--dimensions`` declares (40 cells with ``other``)."""


def periods(today: dt.date) -> list[str]:
    """The last DAYS daily labels, oldest first."""
    return [(today - dt.timedelta(days=d)).isoformat() for d in range(DAYS - 1, -1, -1)]


def payload_pool(spec: MetricSpec, size: int, seed: int) -> list[object]:
    """Randomized payloads of uniformly drawn true values (reused to build many reports fast)."""
    source = FastRandomness(seed)
    return [spec.randomizer.randomize(source.randbelow(spec.k), source) for _ in range(size)]


def build_bodies(spec: MetricSpec, labels: Sequence[str], count: int, seed: int) -> list[bytes]:
    """``count`` request bodies of BATCH reports each, with fresh ids.

    Each batch holds one period, as a device batch mostly does; batch i is in period
    ``labels[i % len(labels)]``, so a prefix of the bodies covers every period evenly.
    """
    pool = payload_pool(spec, 4000, seed)
    rng = random.Random(seed)
    fingerprint = spec.fingerprint
    bodies = []
    for i in range(count):
        period = labels[i % len(labels)]
        batch = [
            {
                "id": str(uuid.uuid4()),
                "metric": spec.name,
                "fingerprint": fingerprint,
                "period": period,
                "payload": pool[rng.randrange(len(pool))],
            }
            for _ in range(BATCH)
        ]
        for report in batch if spec.dimensions else ():
            report["dims"] = {
                name: rng.choice([*values, "other"]) for name, values in spec.dimensions
            }
        bodies.append(json.dumps({"reports": batch}, separators=(",", ":")).encode())
    return bodies


def _post(connection: http.client.HTTPConnection, body: bytes) -> tuple[int, bytes]:
    """POST one pre-encoded body on a kept-alive connection; (status, response body)."""
    connection.request("POST", "/v1/reports", body=body, headers=_HEADERS)
    response = connection.getresponse()
    return response.status, response.read()


_HEADERS = {"Content-Type": "application/json"}


def load(
    url: str, bodies: list[bytes], threads: int, seconds: float
) -> tuple[int, float, list[float], float]:
    """Post bodies from ``threads`` threads for at most ``seconds``.

    Returns reports stored, wall time, request latencies, and the CPU seconds this (client)
    process spent meanwhile. Each thread keeps one raw ``http.client`` connection and sends
    the pre-encoded bodies as they are, so the client costs the shared cores little.
    """
    lock = threading.Lock()
    latencies: list[float] = []
    accepted = [0]
    failures: list[str] = []
    stop_at = time.perf_counter() + seconds
    queue = list(reversed(bodies))
    host, port = url.removeprefix("http://").rsplit(":", 1)

    def worker() -> None:
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            while time.perf_counter() < stop_at:
                with lock:
                    if not queue:
                        return
                    body = queue.pop()
                started = time.perf_counter()
                status, answer = _post(connection, body)
                elapsed = time.perf_counter() - started
                with lock:
                    if status != 202:
                        failures.append(answer[:200].decode(errors="replace"))
                        return
                    latencies.append(elapsed)
                    accepted[0] += json.loads(answer)["accepted"]
        finally:
            connection.close()

    cpu = time.process_time()
    begin = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    wall = time.perf_counter() - begin
    cpu = time.process_time() - cpu
    if failures:
        raise RuntimeError(f"ingestion failed: {failures[0]}")
    return accepted[0], wall, latencies, cpu


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of ``values``."""
    return float(np.quantile(np.asarray(values), q))


def estimate_latency(
    url: str, metric: str, start: str, end: str, repeats: int
) -> tuple[float, float, int]:
    """p50 and p99 (seconds) of GET .../estimate over start..end, and the n it reported."""
    timings = []
    n = 0
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60
    ) as client:
        for i in range(repeats + 5):
            started = time.perf_counter()
            response = client.get(
                f"/v1/metrics/{metric}/estimate", params={"start": start, "end": end}
            )
            elapsed = time.perf_counter() - started
            response.raise_for_status()
            n = response.json()["n"]
            if i >= 5:
                timings.append(elapsed)
    return statistics.median(timings), percentile(timings, 0.99), n


def seed_directly(database_url: str, spec: MetricSpec, labels: Sequence[str], extra: int) -> None:
    """Add ``extra`` raw reports and their counts with bulk SQL (bypassing the API), in chunks."""
    database = open_database(database_url)
    pool = payload_pool(spec, 4000, seed=99)
    support = support_matrix(spec.randomizer, pool).astype(np.int64)
    texts = [payload_text(p) for p in pool]
    rng = np.random.default_rng(7)
    received = dt.date.today()
    chunk = 200_000
    done = 0
    try:
        while done < extra:
            size = min(chunk, extra - done)
            which = rng.integers(0, len(pool), size)
            day = rng.integers(0, len(labels), size)
            rows = [
                {
                    "id": str(uuid.uuid4()),
                    "metric": spec.name,
                    "period": labels[d],
                    "payload": texts[w],
                    "received": received,
                }
                for w, d in zip(which.tolist(), day.tolist(), strict=True)
            ]
            n_rows, s_rows = [], []
            for d, label in enumerate(labels):
                mask = day == d
                if not mask.any():
                    continue
                n_rows.append({"metric": spec.name, "period": label, "n": int(mask.sum())})
                sums = support[which[mask]].sum(axis=0)
                s_rows += [
                    {"metric": spec.name, "period": label, "category": v, "support": int(sums[v])}
                    for v in range(spec.k)
                    if sums[v]
                ]
            with database.writer.begin() as conn:
                conn.execute(reports.insert(), rows)
                stmt = database.insert(period_counts)
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["metric", "period"],
                        set_={"n": period_counts.c.n + stmt.excluded.n},
                    ),
                    n_rows,
                )
                stmt = database.insert(support_counts)
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["metric", "period", "category"],
                        set_={"support": support_counts.c.support + stmt.excluded.support},
                    ),
                    s_rows,
                )
            done += size
            print(f"  seeded {done:,}/{extra:,} reports directly", end="\r", flush=True)
        print()
    finally:
        database.dispose()


def run_backend(backend: str, args: argparse.Namespace, rows: list[list[str]]) -> float:
    """Benchmark one backend and append its table rows; the first timed ingestion's
    reports/s."""
    with tempfile.TemporaryDirectory(prefix="deniable-bench-") as tmp:
        directory = Path(tmp)
        workers = args.workers or (1 if backend == "sqlite" else 2)
        with (
            scratch_database(backend, directory, "deniable_bench") as url,
            CollectorProcess(
                collector_settings(url, ingest_key=None), directory, workers=workers
            ) as collector,
        ):
            spec = MetricSpec.categorical(
                f"bench_{backend}",
                [f"c{i}" for i in range(K)],
                epsilon=args.epsilon,
                mechanism=args.mechanism,
                dimensions=DIMENSIONS if args.dimensions else None,
            )
            register_all(collector.url, [spec])
            labels = periods(dt.datetime.now(dt.UTC).date())
            total = int(args.seconds * 400) if args.ingest_only else 1_000_000 // BATCH
            print(
                f"[{backend}] building {total:,} request bodies of {BATCH} {spec.mechanism} reports ..."
            )
            sent_to = labels[-1:] if args.one_period else labels
            bodies = build_bodies(spec, sent_to, total, seed=1)
            stored, rate = timed_ingest(collector, bodies, args, rows, backend, workers, stored=0)
            if args.ingest_only:
                return rate
            rest = bodies[stored // BATCH :]
            print(f"[{backend}] topping up to 1,000,000 stored reports through the API ...")
            more, _, _, _ = load(collector.url, rest, args.threads, 3600)
            stored += more
            estimates(collector.url, spec, labels, rows, backend, stored)
            export(collector.url, spec, rows, backend, stored)
            if not args.big:
                return rate
            for target in BIG_CURVE:
                extra = max(0, target - stored)
                print(f"[{backend}] seeding {extra:,} more reports directly in the database ...")
                seed_directly(url, spec, labels, extra)
                stored += extra
                for sent_to in (labels[-1:], labels):
                    fresh = build_bodies(spec, sent_to, int(args.seconds * 400), seed=len(rows))
                    stored, _ = timed_ingest(collector, fresh, args, rows, backend, workers, stored)
            estimates(collector.url, spec, labels, rows, backend, stored, seeded=True)
            export(collector.url, spec, rows, backend, stored)
            return rate


BIG_CURVE = (1_000_000, 3_000_000, 10_000_000)
"""The stored sizes (seeded in SQL) at which ``--big`` times ingestion again, twice: reports of
the current period (what devices send) and reports spread over all 90 periods (a backlog of
devices that were offline for weeks: the worst case for the (metric, period, id) key)."""


def _periods_of(bodies: Sequence[bytes]) -> str:
    """ "current period" or "N periods": how many periods the first bodies' reports span."""
    spread = {json.loads(body)["reports"][0]["period"] for body in bodies[:DAYS]}
    return "current period" if len(spread) == 1 else f"{len(spread)} periods"


def timed_ingest(
    collector: CollectorProcess,
    bodies: list[bytes],
    args: argparse.Namespace,
    rows: list[list[str]],
    backend: str,
    workers: int,
    stored: int,
) -> tuple[int, float]:
    """Post ``bodies`` for ``args.seconds`` with ``stored`` reports already in the database,
    append the throughput and CPU rows, and return the number stored afterwards and the
    reports/s."""
    print(
        f"[{backend}] sustained ingestion for up to {args.seconds:g} s, {args.threads} client"
        f" threads, {stored:,} reports stored ..."
    )
    server_cpu = process_tree_cpu(collector.process.pid)
    accepted, wall, latencies, client_cpu = load(
        collector.url, bodies[: int(args.seconds * 400)], args.threads, args.seconds
    )
    server_cpu = process_tree_cpu(collector.process.pid) - server_cpu
    cores = os.cpu_count() or 1
    rows.append(
        [
            backend,
            f"ingest, batches of {BATCH}, {_periods_of(bodies)}"
            + (", 2 dimensions" if args.dimensions else ""),
            f"{accepted / wall:,.0f} reports/s",
            f"p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p99 {percentile(latencies, 0.99) * 1000:.1f} ms",
            f"{accepted:,} reports in {wall:.1f} s, {workers} worker(s), {stored:,} stored before",
        ]
    )
    rows.append(
        [
            backend,
            "CPU share while ingesting",
            f"server {server_cpu / wall / cores:.0%}",
            f"client {client_cpu / wall / cores:.0%}",
            f"of {cores} cores; server {server_cpu / accepted * 1e6:.1f} us/report",
        ]
    )
    return stored + accepted, accepted / wall


def estimates(
    url: str,
    spec: MetricSpec,
    labels: Sequence[str],
    rows: list[list[str]],
    backend: str,
    stored: int,
    seeded: bool = False,
) -> None:
    """Time estimates over 1 and over 90 periods and append the rows."""
    for first in (labels[-1], labels[0]):
        p50, p99, n = estimate_latency(url, spec.name, first, labels[-1], repeats=200)
        span = 1 if first == labels[-1] else len(labels)
        rows.append(
            [
                backend,
                f"estimate k={K}, {span} period{'s' if span > 1 else ''}",
                f"p50 {p50 * 1000:.1f} ms",
                f"p99 {p99 * 1000:.1f} ms",
                f"{stored:,} stored{' (seeded in SQL)' if seeded else ''}; n in range {n:,}",
            ]
        )


def export(url: str, spec: MetricSpec, rows: list[list[str]], backend: str, stored: int) -> None:
    """Walk the metric's whole admin export in pages of 10,000 and append the row.

    The first and the last pages cost the same: pages seek by (period, id), never sort or skip.
    """
    print(f"[{backend}] exporting all {stored:,} reports in pages of 10,000 ...")
    timings: list[float] = []
    exported = 0
    params: dict[str, str | int] = {"limit": 10_000}
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120
    ) as client:
        started = time.perf_counter()
        while True:
            began = time.perf_counter()
            response = client.get(f"/v1/admin/metrics/{spec.name}/reports", params=params)
            timings.append(time.perf_counter() - began)
            response.raise_for_status()
            page = response.json()
            exported += len(page["reports"])
            if page["next"] is None:
                break
            params["after"] = page["next"]
        wall = time.perf_counter() - started
    if exported != stored:
        raise RuntimeError(f"the export held {exported:,} reports, not {stored:,}")
    rows.append(
        [
            backend,
            "export, pages of 10,000",
            f"{exported / wall:,.0f} reports/s",
            f"first {timings[0] * 1000:.0f} ms, p50 {percentile(timings, 0.5) * 1000:.0f} ms,"
            f" last {timings[-1] * 1000:.0f} ms",
            f"{len(timings):,} pages, {stored:,} stored",
        ]
    )


def print_table(rows: list[list[str]]) -> None:
    """Print rows as an aligned text table."""
    header = ["backend", "what", "figure", "latency", "notes"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    print(line)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print(line)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(line)


def main() -> None:
    """Parse options, run the chosen backends, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of the timed ingestion")
    parser.add_argument("--threads", type=int, default=24, help="client threads posting batches")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="collector worker processes (default: 1 for SQLite, whose writes are serial"
        " anyway, so one process groups them best; 2 for PostgreSQL)",
    )
    parser.add_argument("--mechanism", default="oue", help="mechanism of the k=100 metric")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument(
        "--ingest-only", action="store_true", help="time ingestion only (no top-up, no estimates)"
    )
    parser.add_argument("--big", action="store_true", help="also seed to 10 million reports in SQL")
    parser.add_argument(
        "--one-period",
        action="store_true",
        help="the timed ingestion sends reports of the current period only (what devices send)",
    )
    parser.add_argument(
        "--dimensions",
        action="store_true",
        help="the metric declares 2 dimensions (40 cells) and every report carries them",
    )
    parser.add_argument(
        "--ratio",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="time ingestion (only) without and with --dimensions alternately, ROUNDS times"
        " per backend, and print the median ratio (alternating keeps the ratio fair on a"
        " machine whose load changes)",
    )
    args = parser.parse_args()
    rows: list[list[str]] = []
    backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    if args.ratio:
        ratio_rows = [compare_dimensions(backend, args, rows) for backend in backends]
        print_table(rows)
        print_table(ratio_rows)
        return
    for backend in backends:
        run_backend(backend, args, rows)
    print_table(rows)


def compare_dimensions(backend: str, args: argparse.Namespace, rows: list[list[str]]) -> list[str]:
    """Ingestion without and with 2 dimensions, alternately ``args.ratio`` times on
    ``backend``: the table row of the median reports/s of each and their ratio."""
    args.ingest_only = True
    rates: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.ratio):
        for dimensions in (False, True):
            args.dimensions = dimensions
            rates[dimensions].append(run_backend(backend, args, rows))
    without, with_ = (statistics.median(rates[d]) for d in (False, True))
    spread = "current period" if args.one_period else f"{DAYS} periods"
    return [
        backend,
        f"ingest with 2 dimensions / without, {spread}",
        f"{with_ / without:.2f}x",
        f"median of {args.ratio}: {with_:,.0f} / {without:,.0f} reports/s",
        "each pair run back to back",
    ]


if __name__ == "__main__":
    main()
