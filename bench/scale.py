"""Aggregate ingestion throughput of 1, 2 and 3 collector processes on one PostgreSQL.

For each collector count the bench makes a fresh database, starts the collectors
(``deniable serve``, one uvicorn worker each) on loopback, and sends the same pre-encoded
batches of 500 reports from a fixed number of concurrent senders spread over the
collectors. It reads from /proc the CPU time of the collector processes, of the PostgreSQL
backends serving the bench's database (plus the WAL writer, checkpointer and background
writer) and of itself, which says where the time goes: reports per collector-core-second and
per database-core-second are the capacity-planning figures of docs/operations.md. A second
table measures bytes per stored report in PostgreSQL for each mechanism.

    .venv/bin/python -m bench.scale                 # 1, 2, 3 collectors; storage table
    .venv/bin/python -m bench.scale --batches 40 --replicas 1,3 --storage-reports 0
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

from deniable.client import MetricSpec, SeededRandomness, period_label
from testkit import (
    ADMIN_TOKEN,
    Cluster,
    cluster,
    cpu_seconds,
    fresh_database,
    register_all,
    total_cpu,
)

THROUGHPUT_SPEC = MetricSpec.categorical(
    "browser", ["chrome", "firefox", "safari", "edge", "other"], epsilon=1.0, mechanism="krr"
)
STORAGE_SPECS = (
    MetricSpec.boolean("dark_mode", epsilon=1.0, mechanism="brr"),
    THROUGHPUT_SPEC,
    MetricSpec.categorical("screen", [f"s{i}" for i in range(32)], epsilon=1.0, mechanism="oue"),
    MetricSpec.categorical("country", [f"c{i}" for i in range(200)], epsilon=1.0, mechanism="olh"),
)


def make_batches(spec: MetricSpec, batches: int, size: int, seed: int) -> list[bytes]:
    """``batches`` request bodies of ``size`` fresh randomized reports for ``spec``."""
    rng = SeededRandomness(seed)
    period = period_label(spec.period, dt.datetime.now(dt.UTC))
    bodies = []
    for _ in range(batches):
        reports = [
            {
                "id": str(uuid.UUID(bytes=rng.token_bytes(16), version=4)),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": period,
                "payload": spec.randomizer.randomize(rng.randbelow(spec.k), rng),
            }
            for _ in range(size)
        ]
        bodies.append(json.dumps({"reports": reports}, separators=(",", ":")).encode())
    return bodies


def send_all(urls: list[str], bodies: list[bytes], senders: int) -> list[float]:
    """POST every body with ``senders`` threads (sender i uses collector i mod n); latencies."""
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    queue = list(reversed(bodies))

    def sender(index: int) -> None:
        url = urls[index % len(urls)] + "/v1/reports"
        headers = {"Content-Type": "application/json"}
        with httpx.Client(timeout=60) as client:
            while True:
                with lock:
                    if not queue:
                        return
                    body = queue.pop()
                started = time.perf_counter()
                response = client.post(url, content=body, headers=headers)
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    if response.status_code != 202:
                        failures.append(f"{response.status_code} {response.text[:200]}")

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} batches refused, first: {failures[0]}")
    return latencies


@dataclass
class SystemCpu:
    """Machine-wide CPU seconds from /proc/stat: busy (user+system+...), iowait and idle."""

    busy: float
    iowait: float
    idle: float

    @classmethod
    def now(cls) -> SystemCpu:
        """The counters since boot."""
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        ticks = os.sysconf("SC_CLK_TCK")
        user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
        return cls(
            (user + nice + system + irq + softirq + steal) / ticks, iowait / ticks, idle / ticks
        )


@dataclass
class Run:
    """One throughput measurement."""

    collectors: int
    reports: int
    wall: float
    latencies: list[float]
    collector_cpu: float
    postgres_cpu: float
    loader_cpu: float
    machine_busy: float
    machine_iowait: float


def postgres_pids(url: str) -> list[int]:
    """The PostgreSQL backends serving the bench's database, plus the WAL writer, checkpointer
    and background writer that every commit relies on (other databases' work is left out)."""
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE (datname = current_database()"
            " AND pid <> pg_backend_pid())"
            " OR backend_type IN ('walwriter', 'checkpointer', 'background writer')"
        ).fetchall()
    return [pid for (pid,) in rows]


def measure(running: Cluster, bodies: list[bytes], batch: int, senders: int) -> Run:
    """Send ``bodies`` through ``running`` and account the CPU each party used meanwhile."""
    collector_pids = [c.pid for c in running.collectors]
    postgres_before = total_cpu(postgres_pids(running.database_url))
    collectors_before = sum(cpu_seconds(pid) for pid in collector_pids)
    loader_before = time.process_time()
    system_before = SystemCpu.now()
    started = time.perf_counter()
    latencies = send_all(running.urls, bodies, senders)
    wall = time.perf_counter() - started
    system_after = SystemCpu.now()
    loader_cpu = time.process_time() - loader_before
    collector_cpu = sum(cpu_seconds(pid) for pid in collector_pids) - collectors_before
    postgres_after = total_cpu(postgres_pids(running.database_url))
    postgres_cpu = sum(
        after - postgres_before.get(pid, 0.0) for pid, after in postgres_after.items()
    )
    return Run(
        collectors=len(collector_pids),
        reports=len(bodies) * batch,
        wall=wall,
        latencies=latencies,
        collector_cpu=collector_cpu,
        postgres_cpu=postgres_cpu,
        loader_cpu=loader_cpu,
        machine_busy=system_after.busy - system_before.busy,
        machine_iowait=system_after.iowait - system_before.iowait,
    )


def throughput(replicas: list[int], batches: int, batch: int, senders: int) -> list[Run]:
    """One run per collector count, each on its own fresh database."""
    from deniable.collector import migrate

    runs = []
    for seed, count in enumerate(replicas):
        warmup = make_batches(THROUGHPUT_SPEC, 2 * count, batch, seed=1000 + seed)
        bodies = make_batches(THROUGHPUT_SPEC, batches, batch, seed=seed)
        with fresh_database("deniable_bench") as url:
            migrate(url)
            with cluster(url, count, ADMIN_TOKEN) as running:
                register_all(running.urls[0], [THROUGHPUT_SPEC])
                send_all(running.urls, warmup, senders)
                runs.append(measure(running, bodies, batch, senders))
    return runs


def print_throughput(runs: list[Run], senders: int) -> None:
    """The throughput table and the CPU split that locates the bottleneck."""
    cores = os.cpu_count() or 1
    print(
        f"\nIngestion throughput, batches of {runs[0].reports // len(runs[0].latencies)} "
        f"reports, {senders} concurrent senders, {cores} cores"
    )
    header = (
        f"{'collectors':>10} {'reports/s':>10} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'coll. cores':>11} {'pg cores':>8} {'loader':>7} {'machine':>7} {'iowait':>6} "
        f"{'rep/s per coll. core':>20} {'rep/s per pg core':>17}"
    )
    print(header)
    print("-" * len(header))
    for run in runs:
        ordered = sorted(run.latencies)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        print(
            f"{run.collectors:>10} {run.reports / run.wall:>10,.0f} "
            f"{statistics.median(ordered) * 1000:>7.0f} {p95 * 1000:>7.0f} "
            f"{run.collector_cpu / run.wall:>11.2f} {run.postgres_cpu / run.wall:>8.2f} "
            f"{run.loader_cpu / run.wall:>7.2f} {run.machine_busy / run.wall:>7.2f} "
            f"{run.machine_iowait / run.wall:>6.2f} "
            f"{run.reports / run.collector_cpu:>20,.0f} {run.reports / run.postgres_cpu:>17,.0f}"
        )
    last = runs[-1]
    share = last.collector_cpu / (last.collector_cpu + last.postgres_cpu)
    saturated = last.machine_busy / last.wall >= 0.9 * cores
    print(
        f"\nWith {last.collectors} collectors the collectors use {share:.0%} of the CPU spent on "
        f"ingestion and PostgreSQL {1 - share:.0%}; the machine is "
        f"{'saturated' if saturated else 'not saturated'} "
        f"({last.machine_busy / last.wall:.2f} of {cores} cores busy, "
        f"{(last.collector_cpu + last.postgres_cpu + last.loader_cpu) / last.wall:.2f} of them "
        "by this bench's processes)."
    )
    bottleneck = (
        "the collectors (Python: validation, JSON, support counting)"
        if share > 0.5
        else ("the database")
    )
    print(f"Bottleneck: {bottleneck}.")


def storage(reports: int, batch: int) -> list[tuple[str, int, float, float, float]]:
    """Bytes per stored report for each mechanism: (mechanism, k, reports table, counts, database)."""
    from deniable.collector import migrate

    rows = []
    for seed, spec in enumerate(STORAGE_SPECS):
        bodies = make_batches(spec, max(1, reports // batch), batch, seed=500 + seed)
        with fresh_database("deniable_bench_storage") as url:
            migrate(url)
            with psycopg.connect(url) as connection:
                empty = connection.execute(
                    "SELECT pg_database_size(current_database())"
                ).fetchone()[0]
            with cluster(url, 1, ADMIN_TOKEN) as running:
                register_all(running.urls[0], [spec])
                send_all(running.urls, bodies, 2)
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute("VACUUM ANALYZE")
                count = connection.execute("SELECT count(*) FROM reports").fetchone()[0]
                table = connection.execute("SELECT pg_total_relation_size('reports')").fetchone()[0]
                counts = connection.execute(
                    "SELECT pg_total_relation_size('period_counts')"
                    " + pg_total_relation_size('support_counts')"
                ).fetchone()[0]
                size = connection.execute("SELECT pg_database_size(current_database())").fetchone()[
                    0
                ]
        rows.append((spec.mechanism, spec.k, table / count, counts, (size - empty) / count))
    return rows


def print_storage(rows: list[tuple[str, int, float, float, float]], reports: int) -> None:
    """The bytes-per-report table and the size of a billion reports."""
    print(f"\nStorage in PostgreSQL after {reports:,} reports of one metric (VACUUM ANALYZE)")
    header = (
        f"{'mechanism':>9} {'k':>4} {'reports table B/report':>22} {'count tables B':>14} "
        f"{'database growth B/report':>24} {'GB per billion':>14}"
    )
    print(header)
    print("-" * len(header))
    for mechanism, k, table, counts, growth in rows:
        print(
            f"{mechanism:>9} {k:>4} {table:>22.0f} {counts:>14,.0f} {growth:>24.0f} "
            f"{growth:>14.0f}"  # B bytes per report is B GB per billion reports
        )


def main() -> None:
    """Parse the options, run the throughput and storage measurements, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="1,2,3", help="collector counts to measure")
    parser.add_argument("--batches", type=int, default=60, help="batches sent per run")
    parser.add_argument("--batch", type=int, default=500, help="reports per batch")
    parser.add_argument("--senders", type=int, default=6, help="concurrent senders in total")
    parser.add_argument(
        "--storage-reports", type=int, default=50_000, help="reports per storage run (0: skip)"
    )
    args = parser.parse_args()
    replicas = [int(x) for x in args.replicas.split(",")]
    runs = throughput(replicas, args.batches, args.batch, args.senders)
    print_throughput(runs, args.senders)
    if args.storage_reports:
        print_storage(storage(args.storage_reports, args.batch), args.storage_reports)


if __name__ == "__main__":
    main()
