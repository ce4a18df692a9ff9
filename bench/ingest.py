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
[--dimensions] [--one-period] [--ratio ROUNDS] [--versus ROUNDS]``; ``--ratio 3`` alternates
runs without and with dimensions three times per backend and prints the median ratio.

``--versus 3`` (issue 42) stores the same 100,000 reports of 90 periods through a fresh
collector and with the engine alone (the rows the product prepares, built before the timer:
SQLite's executemany, PostgreSQL's COPY into the period's partition, counts upserted by
executemany, one transaction per body), alternately three times, and prints every pair's
CPU per report (the collector's processes, or this process, plus the PostgreSQL backends),
the median ratio and the load average. Partitions are made before either timer starts. Each
pair also posts the same bodies to :mod:`bench.bare_http` decoding them (HTTP and orjson,
nothing checked or stored): the engine alone plus that CPU, over the engine alone, is the
lowest ratio any collector reading these bodies over HTTP could reach (the floor).

``--text 3`` (issue 42) ingests a 16-byte text metric at eps 1 and at eps 4 and an oue k=100
metric (reports over 90 periods), each through a fresh collector for ``--seconds``, the
three alternated three times per backend, and prints every run's reports/s and CPU per report
(the collector's processes and the PostgreSQL backends; a text run's time and CPU include
folding every report the collector left pending at the end, :mod:`deniable.collector.storage.
textbacklog`), then each text metric's median rate over oue's and the load average.
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg

from bench.bare_http import serving
from deniable.client import MetricSpec
from deniable.client.kinds import TextSpec
from deniable.client.wire import payload_text
from deniable.collector.storage import open_database, pgupserts, sqliteupserts
from deniable.collector.storage.engine import is_sqlite
from deniable.collector.storage.increments import (
    CellRow,
    CountRow,
    SupportRow,
    cell_increments,
    count_rows,
)
from deniable.collector.storage.migrator import migrate
from deniable.collector.storage.partitions import ensure_partitions, partition_name
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.tables import id_bytes, period_counts, reports, support_counts
from deniable.collector.storage.textbacklog import fold_all
from deniable.collector.validation import ValidReport
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
from testkit.cpu import cpu_seconds
from testkit.ports import LOOPBACK
from testkit.postgres import PG_ADMIN_URL

BATCH = 500
K = 100
DAYS = 90
DIMENSIONS = {"platform": ["ios", "android", "web"], "app_version": [f"1.{i}" for i in range(9)]}
"""The two dimensions ``--dimensions`` declares (40 cells with ``other``)."""


def periods(today: dt.date) -> list[str]:
    """The last DAYS daily labels, oldest first."""
    return [(today - dt.timedelta(days=d)).isoformat() for d in range(DAYS - 1, -1, -1)]


TEXT_LENGTH = 16
"""The ``max_length`` (bytes) of the text metrics ``--text`` stores."""


def payload_pool(spec: MetricSpec, size: int, seed: int) -> list[object]:
    """Randomized payloads of uniformly drawn true values (reused to build many reports fast);
    a text metric's: strings from a few hundred, each report at a level drawn uniformly."""
    source = FastRandomness(seed)
    if isinstance(spec, TextSpec):
        sketch = spec.text_randomizer
        return [
            sketch.randomize(
                sketch.encode(f"value{source.randbelow(300)}"),
                1 + source.randbelow(sketch.levels),
                source,
            )
            for _ in range(size)
        ]
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


def collector_workers(backend: str, args: argparse.Namespace) -> int:
    """The bench collector's workers: ``--workers``, else 1 on SQLite and 2 on PostgreSQL."""
    return args.workers or (1 if backend == "sqlite" else 2)


@contextmanager
def fresh_collector(
    backend: str, args: argparse.Namespace
) -> Iterator[tuple[str, CollectorProcess]]:
    """A fresh scratch database on ``backend`` and a collector serving it
    (:func:`collector_workers`): its URL and the running collector."""
    with tempfile.TemporaryDirectory(prefix="deniable-bench-") as tmp:
        directory = Path(tmp)
        with (
            scratch_database(backend, directory, "deniable_bench") as url,
            CollectorProcess(
                collector_settings(url, ingest_key=None),
                directory,
                workers=collector_workers(backend, args),
            ) as collector,
        ):
            yield url, collector


def run_backend(backend: str, args: argparse.Namespace, rows: list[list[str]]) -> float:
    """Benchmark one backend and append its table rows; the first timed ingestion's
    reports/s."""
    workers = collector_workers(backend, args)
    with fresh_collector(backend, args) as (url, collector):
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
    parser.add_argument(
        "--versus",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="store the same 100,000 reports through the collector and with the engine alone"
        " (SQLite executemany, PostgreSQL COPY), alternately ROUNDS times per backend, and"
        " print every pair, the median ratio of CPU per report and the load",
    )
    parser.add_argument(
        "--text",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="ingest a text metric at eps 1 and at eps 4 and an oue k=100 metric (eps"
        " --epsilon) through a fresh collector each, alternately ROUNDS times per backend, and"
        " print every run, the median ratios of reports/s and the CPU per report",
    )
    args = parser.parse_args()
    rows: list[list[str]] = []
    backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    if args.text:
        print_table([row for backend in backends for row in compare_text(backend, args)])
        return
    if args.versus:
        print_table([compare_engine(backend, args) for backend in backends])
        return
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


VERSUS_BODIES = 200
"""Request bodies (of BATCH reports) each side of ``--versus`` stores per run: 100,000 reports."""


def backend_cpu(url: str) -> float:
    """CPU seconds used so far by every PostgreSQL backend connected to ``url``'s database (0 on
    SQLite, whose engine runs inside the process that calls it)."""
    if is_sqlite(url):
        return 0.0
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as connection:
        pids = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchall()
    return sum(cpu_seconds(pid) for (pid,) in pids)


def versus_spec(backend: str, args: argparse.Namespace) -> MetricSpec:
    """The k=100 metric both sides of ``--versus`` store (with 2 dimensions if asked)."""
    return MetricSpec.categorical(
        f"bench_{backend}",
        [f"c{i}" for i in range(K)],
        epsilon=args.epsilon,
        mechanism=args.mechanism,
        dimensions=DIMENSIONS if args.dimensions else None,
    )


def product_run(backend: str, args: argparse.Namespace, bodies: list[bytes]) -> tuple[int, float]:
    """Store ``bodies`` through a fresh collector (partitions made before the timer): the
    reports stored and the CPU seconds of the collector's processes and database backends."""
    with fresh_collector(backend, args) as (url, collector):
        spec = versus_spec(backend, args)
        register_all(collector.url, [spec])
        _make_partitions(url)
        load(collector.url, bodies[:1], 1, 3600)
        started = process_tree_cpu(collector.process.pid) + backend_cpu(url)
        accepted, _, _, _ = load(collector.url, bodies[1:], args.threads, 3600)
        used = process_tree_cpu(collector.process.pid) + backend_cpu(url) - started
        return accepted, used


def _make_partitions(url: str) -> None:
    """Create the partitions of the DAYS periods (PostgreSQL), so no timed run makes any."""
    if is_sqlite(url):
        return
    database = open_database(url)
    try:
        ensure_partitions(database, periods(dt.datetime.now(dt.UTC).date()))
    finally:
        database.dispose()


EngineRows = tuple[list[tuple[Any, ...]], list[CountRow], list[SupportRow], list[CellRow]]
"""One body's rows as the engine alone writes them: reports, period counts, support counts,
cells (the rows the product's own preparation makes, built before the timer)."""


def engine_rows(spec: MetricSpec, bodies: list[bytes], backend: str) -> list[EngineRows]:
    """Each body's rows, prepared outside any timer (ids as bytes on SQLite)."""
    day = dt.datetime.now(dt.UTC).date()
    prepared = []
    for body in bodies:
        valid = [
            ValidReport(
                r["id"],
                r["metric"],
                r["period"],
                r["payload"],
                spec.cell_of(r["dims"]) if spec.dimensions else "",
            )
            for r in json.loads(body)["reports"]
        ]
        batch = prepare_batch(valid, {spec.name: spec}, day)
        n_rows, support_rows, _ = count_rows([batch], None)
        cells = cell_increments([batch], None) if batch.cells else []
        rows = [
            (id_bytes(row[0]) if backend == "sqlite" else row[0], *row[1:]) for row in batch.rows
        ]
        prepared.append((rows, n_rows, support_rows, cells))
    return prepared


_SQLITE_REPORTS = (
    "INSERT INTO reports (id, metric, period, payload, received, cell) VALUES (?, ?, ?, ?, ?, ?)"
)
_N_UPSERT = (
    "INSERT INTO period_counts (metric, period, n) VALUES ({}, {}, {})"
    " ON CONFLICT (metric, period) DO UPDATE SET n = period_counts.n + excluded.n"
)
_SUPPORT_UPSERT = (
    "INSERT INTO support_counts (metric, period, category, support) VALUES ({}, {}, {}, {})"
    " ON CONFLICT (metric, period, category)"
    " DO UPDATE SET support = support_counts.support + excluded.support"
)


def engine_run(backend: str, args: argparse.Namespace, bodies: list[bytes]) -> tuple[int, float]:
    """Store the same reports with the engine alone, one transaction per body: SQLite's
    executemany of the prepared rows, PostgreSQL's COPY into the period's partition, and the
    counts upserted by executemany; the reports stored and the CPU seconds of this process
    and the database backends while writing."""
    with (
        tempfile.TemporaryDirectory(prefix="deniable-bench-") as tmp,
        scratch_database(backend, Path(tmp), "deniable_engine") as url,
    ):
        migrate(url)
        spec = versus_spec(backend, args)
        database = open_database(url)
        try:
            _make_partitions(url)
            prepared = engine_rows(spec, bodies[1:], backend)
            started = time.process_time() + backend_cpu(url)
            for rows, n_rows, support_rows, cells in prepared:
                with database.writer.begin() as connection:
                    _engine_write(backend, connection, rows, n_rows, support_rows, cells)
            used = time.process_time() + backend_cpu(url) - started
        finally:
            database.dispose()
        return sum(len(p[0]) for p in prepared), used


def _engine_write(
    backend: str,
    connection: Any,
    rows: list[tuple[Any, ...]],
    n_rows: list[CountRow],
    support_rows: list[SupportRow],
    cells: list[CellRow],
) -> None:
    """One body's rows in the transaction ``connection`` holds, as the engine alone writes
    them (through the driver's own connection; the cells by the product's one statement)."""
    raw = connection.connection.driver_connection
    if backend == "sqlite":
        cursor = raw.cursor()
        cursor.executemany(_SQLITE_REPORTS, rows)
        cursor.executemany(_N_UPSERT.format("?", "?", "?"), n_rows)
        cursor.executemany(_SUPPORT_UPSERT.format("?", "?", "?", "?"), support_rows)
        if cells:
            sqliteupserts.upsert_cells(connection, cells)
        return
    with raw.cursor() as cursor:
        partition = partition_name(rows[0][2])
        with cursor.copy(
            f"COPY {partition} (id, metric, period, payload, received, cell) FROM STDIN"
        ) as copy:
            for row in rows:
                copy.write_row(row)
        cursor.executemany(_N_UPSERT.format("%s", "%s", "%s"), n_rows)
        cursor.executemany(_SUPPORT_UPSERT.format("%s", "%s", "%s", "%s"), support_rows)
    if cells:
        pgupserts.upsert_cells(connection, cells)


def floor_run(args: argparse.Namespace, bodies: list[bytes]) -> tuple[int, float]:
    """Post ``bodies`` to :mod:`bench.bare_http` decoding uploads (HTTP and orjson, nothing
    checked or stored), as :func:`product_run` posts them: the reports it answered for and its
    CPU seconds."""
    with serving("--decode") as server:
        url = f"http://{LOOPBACK}:{server.port}"
        load(url, bodies[:1], 1, 3600)
        started = cpu_seconds(server.pid)
        accepted, _, _, _ = load(url, bodies[1:], args.threads, 3600)
        return accepted, cpu_seconds(server.pid) - started


def compare_engine(backend: str, args: argparse.Namespace) -> list[str]:
    """The product and the engine alone on the same reports, alternately ``args.versus``
    times, each pair beside the HTTP floor (:func:`floor_run`): every pair's CPU per report,
    then the row of the median ratio and of the lowest ratio any collector reading these
    bodies over HTTP could reach (the engine alone plus the floor, over the engine alone)."""
    spec = versus_spec(backend, args)
    labels = periods(dt.datetime.now(dt.UTC).date())
    bodies = build_bodies(spec, labels, VERSUS_BODIES + 1, seed=1)
    product: list[float] = []
    engine: list[float] = []
    floor: list[float] = []
    for round_ in range(args.versus):
        for side, run in ((product, product_run), (engine, engine_run)):
            stored, cpu = run(backend, args, bodies)
            side.append(cpu / stored * 1e6)
        stored, cpu = floor_run(args, bodies)
        floor.append(cpu / stored * 1e6)
        print(
            f"[{backend}{', 2 dimensions' if args.dimensions else ''}] pair {round_ + 1}:"
            f" product {product[-1]:.1f} us/report, engine alone {engine[-1]:.1f} us/report,"
            f" ratio {product[-1] / engine[-1]:.2f}x; HTTP and JSON alone {floor[-1]:.1f}"
            f" us/report; load {_load()}"
        )
    ours, theirs, least = (statistics.median(side) for side in (product, engine, floor))
    return [
        backend,
        "ingest CPU per report / engine alone" + (", 2 dimensions" if args.dimensions else ""),
        f"{ours / theirs:.2f}x",
        f"median of {args.versus}: {ours:.1f} / {theirs:.1f} us/report; floor"
        f" {(theirs + least) / theirs:.2f}x (HTTP and JSON alone {least:.1f} us/report)",
        f"load {_load()}",
    ]


def text_specs(backend: str, args: argparse.Namespace) -> dict[str, MetricSpec]:
    """The metrics ``--text`` compares: an oue k=100 metric and text metrics at eps 1 and 4."""
    return {
        "oue k=100": MetricSpec.categorical(
            f"bench_{backend}", [f"c{i}" for i in range(K)], epsilon=args.epsilon, mechanism="oue"
        ),
        **{
            f"text eps {eps:g}": MetricSpec.text(
                f"bench_text_{backend}", max_length=TEXT_LENGTH, epsilon=eps
            )
            for eps in (1.0, 4.0)
        },
    }


def rate_run(
    backend: str, args: argparse.Namespace, spec: MetricSpec, bodies: list[bytes]
) -> tuple[float, float, float]:
    """:func:`_rate_run`, started again (up to twice) when the collector does not start: on a
    loaded machine its workers can miss their start-up deadline."""
    for attempt in range(3):
        try:
            return _rate_run(backend, args, spec, bodies)
        except RuntimeError as error:
            if "did not start" not in str(error) or attempt == 2:
                raise
            print(f"[{backend}] the collector did not start; trying again")
    raise AssertionError("unreachable")


def _rate_run(
    backend: str, args: argparse.Namespace, spec: MetricSpec, bodies: list[bytes]
) -> tuple[float, float, float]:
    """Post ``bodies`` (the first one untimed) to a fresh collector for at most
    ``args.seconds``, then fold what text reports are still pending (:mod:`.textbacklog`, in
    this process: the work a collector defers is counted): reports/s over both, the CPU per
    report (us) of the collector's processes, the fold and the database backends, and the
    seconds the fold took."""
    with fresh_collector(backend, args) as (url, collector):
        register_all(collector.url, [spec])
        _make_partitions(url)
        load(collector.url, bodies[:1], 1, 3600)
        started = process_tree_cpu(collector.process.pid) + backend_cpu(url)
        accepted, wall, _, _ = load(collector.url, bodies[1:], args.threads, args.seconds)
        fold_started, fold_cpu = time.perf_counter(), time.process_time()
        database = open_database(url)
        try:
            fold_all(database)
            folding = time.perf_counter() - fold_started
            # the fold's backends are counted while they are still connected
            used = time.process_time() - fold_cpu + backend_cpu(url)
        finally:
            database.dispose()
        used += process_tree_cpu(collector.process.pid) - started
        return accepted / (wall + folding), used / accepted * 1e6, folding


TEXT_BODIES = 100
"""Request bodies built per second of ``--seconds`` for each side of ``--text`` (a run ends
early, its rate still fair, if a side stores them all sooner)."""


def compare_text(backend: str, args: argparse.Namespace) -> list[list[str]]:
    """Text at eps 1 and 4 against oue k=100, alternately ``args.text`` times on ``backend``:
    every run printed, then a row per text metric with its median rate over oue's."""
    specs = text_specs(backend, args)
    labels = periods(dt.datetime.now(dt.UTC).date())
    bodies = {
        side: build_bodies(spec, labels, int(args.seconds * TEXT_BODIES) + 1, seed=1)
        for side, spec in specs.items()
    }
    rates: dict[str, list[float]] = {side: [] for side in specs}
    cpu: dict[str, list[float]] = {side: [] for side in specs}
    for round_ in range(args.text):
        for side, spec in specs.items():
            rate, per_report, folding = rate_run(backend, args, spec, bodies[side])
            rates[side].append(rate)
            cpu[side].append(per_report)
            print(
                f"[{backend}] round {round_ + 1}: {side} {rate:,.0f} reports/s,"
                f" {per_report:.1f} us CPU/report (the last fold {folding:.1f} s);"
                f" load {_load()}"
            )
    base = statistics.median(rates["oue k=100"])
    base_cpu = statistics.median(cpu["oue k=100"])
    return [
        [
            backend,
            f"{side} / oue k=100 ingest rate, {DAYS} periods",
            f"{statistics.median(rates[side]) / base:.2f}x",
            f"median of {args.text}: {statistics.median(rates[side]):,.0f} / {base:,.0f}"
            f" reports/s; CPU {statistics.median(cpu[side]):.1f} / {base_cpu:.1f} us/report",
            f"load {_load()}",
        ]
        for side in specs
        if side != "oue k=100"
    ]


def _load() -> str:
    """The machine's load averages over 1, 5 and 15 minutes."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
