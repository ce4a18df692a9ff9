"""Time estimates straight from a 10-million-report Parquet file (issue 2: under 2 s for krr).

It first prints the latency of ``estimate()`` from stored counts, k = 100 categories over 1 and
90 periods (the collector's estimate endpoint, issue 8), per mechanism and method.

Writes one Parquet file per mechanism to a temporary directory, in the schema ``deniable export``
writes (id, metric, fingerprint, period, payload columns), then times
``estimate_reports(mechanism, categories, path)``: reading, per-period aggregation with polars and
numpy, and the estimate. Reports are drawn with numpy from the mechanisms' own p*, q* (the same
distribution as ``randomize``, which would take minutes at this size in pure Python).

Then it times the exact maximum-likelihood estimate (``method="mle"`` on raw reports) of olh,
oue and krr (closed form) at k = 256, eps 1, from 100,000 reports (issue 14's target: under 2 s).

    .venv/bin/python -m bench.estimate_speed [--reports 10000000] [--mechanisms krr,oue,olh]
    .venv/bin/python -m bench.estimate_speed --counts-only
    .venv/bin/python -m bench.estimate_speed --mle-only
    .venv/bin/python -m bench.estimate_speed --route sqlite --route postgresql [--stored 1000000]

``--route`` times only ``GET /v1/metrics/{name}/estimate`` (a k = 100 oue metric, 1 and 90
periods, ``--stored`` raw reports beside its counts) against the engine alone reading the same
rows (the range's n and support rows in one plain statement on the driver's own connection),
alternated ``--pairs`` times with two ``deniable serve`` processes (the read cache off, and on
with the same query each time): every pair, the median ratios, each side's CPU per call and
the load. Beside them, ``bench.bare_http`` answers the collector's own one-period bytes from a
bare ASGI app on the same hardened uvicorn launch: the time and CPU of an HTTP GET with no
work at all, the floor under any answer over HTTP (``bare/read``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import polars as pl

from bench.bare_http import BareServer, serving
from deniable.client.mechanisms import KRR, OLH, OUE, Mechanism
from deniable.collector.storage.tables import period_counts, support_counts
from deniable.estimators import PeriodCounts, estimate, estimate_reports
from testkit.configuration import ADMIN_TOKEN
from testkit.ports import LOOPBACK

B64 = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8
)


def base64_rows(raw: np.ndarray) -> pl.Series:
    """Standard base64 of each row of a (n, bytes) uint8 array, vectorized."""
    n, width = raw.shape
    padded = np.zeros((n, -(-width // 3) * 3), dtype=np.uint8)
    padded[:, :width] = raw
    g = padded.reshape(n, -1, 3).astype(np.uint32)
    word = (g[..., 0] << 16) | (g[..., 1] << 8) | g[..., 2]
    chars = np.stack([(word >> s) & 63 for s in (18, 12, 6, 0)], axis=-1).reshape(n, -1)
    text = B64[chars]
    pad = (3 - width % 3) % 3
    if pad:
        text[:, -pad:] = ord("=")
    return pl.Series("payload", text.view(f"S{text.shape[1]}").ravel()).cast(pl.String)


def payload_columns(mechanism: Mechanism, values: np.ndarray, rng: np.random.Generator) -> dict:
    """Randomized payload columns for true values, drawn with numpy from p*, q* (and g)."""
    n, k = len(values), mechanism.k
    if isinstance(mechanism, KRR):
        keep = rng.random(n) < mechanism.p_star
        other = rng.integers(0, k - 1, n)
        return {"payload": np.where(keep, values, other + (other >= values))}
    if isinstance(mechanism, OUE):
        bits = rng.random((n, k)) < mechanism.q_star
        bits[np.arange(n), values] = rng.random(n) < mechanism.p_star
        return {"payload": base64_rows(np.packbits(bits, axis=1, bitorder="little"))}
    assert isinstance(mechanism, OLH)
    prime, g = 2**31 - 1, mechanism.g
    a = rng.integers(1, prime, n)
    b = rng.integers(0, prime, n)
    h = ((a * values + b) % prime) % g
    keep = rng.random(n) < mechanism.p_star
    other = rng.integers(0, g - 1, n)
    return {"a": a, "b": b, "y": np.where(keep, h, other + (other >= h))}


def write_reports(mechanism: Mechanism, n: int, periods: int, path: Path) -> None:
    rng = np.random.default_rng(2026)
    f = 1 / np.arange(1, mechanism.k + 1)
    f /= f.sum()
    if not 1 <= periods <= 31:
        raise ValueError("periods must be 1..31 (days of October 2026)")
    labels = np.array([f"2026-10-{d + 1:02d}" for d in range(periods)])
    chunk = 2_000_000
    frames = []
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        values = rng.choice(mechanism.k, size=m, p=f)
        day = rng.integers(0, periods, m)
        frames.append(
            pl.DataFrame(
                {
                    "id": pl.int_range(start, start + m, eager=True).cast(pl.String),
                    "metric": pl.repeat("bench", m, eager=True),
                    "fingerprint": pl.repeat("0123456789abcdef", m, eager=True),
                    "period": labels[day],
                    **payload_columns(mechanism, values, rng),
                }
            )
        )
    pl.concat(frames).write_parquet(path)


def counts_latency() -> None:
    """p50 and p99 of estimate() from counts for k = 100 over 1 and 90 periods."""
    rng = np.random.default_rng(7)
    k = 100
    categories = [f"c{v}" for v in range(k)]
    f = 1 / np.arange(1, k + 1)
    f /= f.sum()
    print(
        f"{'estimate() from counts, k=100':<34}{'periods':>8}{'method':>12}{'p50 ms':>9}{'p99 ms':>9}"
    )
    for mechanism in (KRR(k, 5.0), OUE(k, 1.0), OLH(k, 1.0)):
        lam = mechanism.q_star + (mechanism.p_star - mechanism.q_star) * f
        for periods in (1, 90):
            sizes = rng.integers(5_000, 15_000, periods)  # ~1 million reports over 90 periods
            stored = [
                PeriodCounts(
                    f"p{t}",
                    int(m),
                    rng.multinomial(m, lam / lam.sum())
                    if isinstance(mechanism, KRR)
                    else rng.binomial(m, lam),
                )
                for t, m in enumerate(sizes)
            ]
            for method in ("unbiased", "consistent", "mle"):
                times = []
                for _ in range(200):
                    started = time.perf_counter()
                    estimate(mechanism, categories, stored, method=method)
                    times.append(1e3 * (time.perf_counter() - started))
                p50, p99 = np.percentile(times, [50, 99])
                print(f"{mechanism!r:<34}{periods:>8}{method:>12}{p50:>9.2f}{p99:>9.2f}")


def exact_mle_time(n: int = 100_000, k: int = 256) -> None:
    """Seconds for the exact mle (eps 1) from n raw reports in a frame, k categories.

    A small run first imports what the estimate needs (scipy), so the table times the work.
    """
    print(f"{'exact mle from raw reports':<34}{'reports':>10}{'seconds':>9}{'iterations':>12}")
    for index, mechanism in enumerate((OLH(k, 1.0), OUE(k, 1.0), KRR(k, 1.0))):
        rng = np.random.default_rng(14)
        f = 1 / np.arange(1, k + 1)
        values = rng.choice(k, size=n, p=f / f.sum())
        frame = pl.DataFrame(
            {"period": ["2026-10-01"] * n, **payload_columns(mechanism, values, rng)}
        )
        categories = [f"c{v}" for v in range(k)]
        if index == 0:
            estimate_reports(mechanism, categories, frame.head(1000), method="mle")
        iterations = [0]
        started = time.perf_counter()
        estimate_reports(
            mechanism,
            categories,
            frame,
            method="mle",
            progress=lambda i, _, seen=iterations: seen.__setitem__(0, i),
        )
        elapsed = time.perf_counter() - started
        print(f"{mechanism!r:<34}{n:>10,}{elapsed:>9.2f}{iterations[0]:>12,}")


ROUTE_K = 100
ROUTE_END = dt.date(2026, 11, 29)
ROUTE_LABELS = [(ROUTE_END - dt.timedelta(days=d)).isoformat() for d in range(89, -1, -1)]
"""The route section's 90 daily periods, oldest first (the 1-period estimate reads the last)."""


def fill_counts(url: str, stored: int) -> None:
    """A k = 100 oue metric with ``stored`` raw reports over :data:`ROUTE_LABELS` (bulk SQL:
    random ids, two-byte payloads) and its counts: every period's n and 100 support counts."""
    from deniable.client import MetricSpec
    from deniable.collector import migrate
    from deniable.collector.storage import open_database
    from deniable.collector.storage.partitions import create_partitions
    from deniable.collector.storage.queries import register_spec

    spec = MetricSpec.categorical(
        "bench_route", [f"c{v}" for v in range(ROUTE_K)], epsilon=1.0, mechanism="oue"
    )
    migrate(url)
    database = open_database(url)
    rng = np.random.default_rng(42)
    per = stored // len(ROUTE_LABELS)
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        postgres = database.dialect == "postgresql"
        with database.writer.begin() as connection:
            if postgres:
                create_partitions(connection, ROUTE_LABELS)
            for label in ROUTE_LABELS:
                if postgres:
                    connection.exec_driver_sql(
                        "INSERT INTO reports (id, metric, period, payload, received)"
                        " SELECT gen_random_uuid(), 'bench_route', %(p)s, '\"AAA=\"',"
                        " date '2026-11-30' FROM generate_series(1, %(n)s)",
                        {"p": label, "n": per},
                    )
                else:
                    connection.exec_driver_sql(
                        "WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i"
                        " WHERE x < ?) INSERT INTO reports (id, metric, period, payload,"
                        " received, cell) SELECT randomblob(16), 'bench_route', ?, '\"AAA=\"',"
                        " '2026-11-30', '' FROM i",
                        (per, label),
                    )
            n_rows = [{"metric": "bench_route", "period": p, "n": per} for p in ROUTE_LABELS]
            support = [
                {"metric": "bench_route", "period": p, "category": v, "support": int(s)}
                for p in ROUTE_LABELS
                for v, s in enumerate(rng.binomial(per, 0.3, ROUTE_K))
            ]
            connection.execute(period_counts.insert(), n_rows)
            connection.execute(support_counts.insert(), support)
        if postgres:
            with database.writer.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM ANALYZE"
                )
    finally:
        database.dispose()


PLAIN_READ = (
    "SELECT p.period, p.n, s.category, s.support FROM period_counts p"
    " LEFT JOIN support_counts s ON s.metric = p.metric AND s.period = p.period"
    " WHERE p.metric = {name} AND p.period >= {first} AND p.period <= {last}"
)
"""The database read alone: the range's n and support rows, one statement, as the driver
returns them (what an estimate needs, with nothing made of it)."""


def engine_read(url: str) -> Callable[[str, str], int]:
    """A function reading :data:`PLAIN_READ` for (first, last) on one open driver connection
    (psycopg or sqlite3, no SQLAlchemy): the rows it fetched."""
    from deniable.collector.storage.engine import normalize_url

    normalized = str(normalize_url(url))
    if normalized.startswith("sqlite"):
        import sqlite3

        connection: Any = sqlite3.connect(normalized.split("///", 1)[1])
        sql = PLAIN_READ.format(name="?", first="?", last="?")

        def read(first: str, last: str) -> int:
            return len(connection.execute(sql, ("bench_route", first, last)).fetchall())

        return read
    import psycopg

    connection = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
    connection.autocommit = True
    sql = PLAIN_READ.format(name="%s", first="%s", last="%s")

    def read_pg(first: str, last: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(sql, ("bench_route", first, last))
            return len(cursor.fetchall())

    return read_pg


def get_estimate(port: int, cached: bool) -> Callable[[str, str], int]:
    """A function asking the collector on ``port`` for the estimate of (first, last) over one
    kept-alive connection: the answer's bytes (``cached``: the same query each time, so the
    read cache answers; else a distinct confidence each time, so it never does)."""
    import http.client

    connection = http.client.HTTPConnection(LOOPBACK, port)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    calls = [0]

    def get(first: str, last: str) -> int:
        calls[0] += 1
        confidence = "0.95" if cached else f"0.9{calls[0] % 1000:03d}"
        path = f"/v1/metrics/bench_route/estimate?start={first}&end={last}&confidence={confidence}"
        try:
            connection.request("GET", path, headers=headers)
            answer = connection.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            connection.close()  # the server closed the idle kept-alive connection: reconnect
            connection.request("GET", path, headers=headers)
            answer = connection.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"estimate answered {answer.status}: {body[:200]!r}")
        return len(body)

    return get


@dataclass
class Side:
    """One side's timings over a run: wall seconds per call and CPU seconds per call."""

    wall: float
    cpu: float


def timed(
    call: Callable[[str, str], int], first: str, last: str, calls: int, pid: int | None
) -> Side:
    """Median wall seconds of ``calls`` calls and the CPU per call of process ``pid`` (this
    process if None)."""
    from testkit.cpu import cpu_seconds

    for _ in range(5):
        call(first, last)
    cpu = cpu_seconds(pid) if pid is not None else time.process_time()
    walls = []
    for _ in range(calls):
        started = time.perf_counter()
        call(first, last)
        walls.append(time.perf_counter() - started)
    used = (cpu_seconds(pid) if pid is not None else time.process_time()) - cpu
    return Side(float(np.median(walls)), used / calls)


@contextlib.contextmanager
def bare_server(collector_port: int, folder: Path) -> Iterator[BareServer]:
    """:mod:`bench.bare_http` serving the collector's own one-period answer's bytes."""
    body = folder / "answer.json"
    label = ROUTE_LABELS[-1]
    body.write_bytes(
        httpx.get(
            f"http://{LOOPBACK}:{collector_port}/v1/metrics/bench_route/estimate",
            params={"start": label, "end": label},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ).content
    )
    with serving(str(body)) as server:
        yield server


def route_ratio(backend: str, stored: int, pairs: int, calls: int) -> None:
    """GET estimate against the database read alone, 1 and 90 periods, alternated ``pairs``
    times: every pair, the median ratio (wall), each side's CPU per call, the load; beside
    them the bare HTTP floor (:mod:`bench.bare_http` answering the same bytes)."""
    from testkit import fresh_database
    from testkit.collector_process import CollectorProcess
    from testkit.configuration import collector_settings

    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if backend == "postgresql":
            url = stack.enter_context(fresh_database("bench_route"))
        else:
            url = f"sqlite:///{folder}/route.db"
        began = time.perf_counter()
        fill_counts(url, stored)
        print(
            f"\nGET estimate vs the database read alone: {backend}, {stored:,} stored reports,"
            f" oue k={ROUTE_K}; filled in {time.perf_counter() - began:,.0f} s"
        )
        uncached = stack.enter_context(
            CollectorProcess(collector_settings(url, read_cache_bytes=0), folder)
        )
        cached = stack.enter_context(CollectorProcess(collector_settings(url), folder))
        bare = stack.enter_context(bare_server(uncached.port, folder))
        sides = {
            "read": (engine_read(url), None),
            "GET": (get_estimate(uncached.port, False), uncached.pid),
            "GET cached": (get_estimate(cached.port, True), cached.pid),
            "bare": (get_estimate(bare.port, True), bare.pid),
        }
        print(
            f"{'periods':>7} {'pair':>4} {'read ms':>8} {'GET ms':>8} {'cached ms':>9}"
            f" {'bare ms':>8} {'GET/read':>8} {'cached/read':>11} {'bare/read':>9}"
            f" {'CPU ms read/GET/cached/bare':>29} {'load':>6}"
        )
        for periods in (1, 90):
            first, last = ROUTE_LABELS[-periods], ROUTE_LABELS[-1]
            ratios: list[tuple[float, float, float]] = []
            cpu_ratios: list[float] = []
            floor_ratios: list[float] = []
            for pair in range(pairs):
                found = {
                    name: timed(call, first, last, calls, pid)
                    for name, (call, pid) in sides.items()
                }
                read, get, hit, bare = (found[n] for n in ("read", "GET", "GET cached", "bare"))
                ratios.append((get.wall / read.wall, hit.wall / read.wall, bare.wall / read.wall))
                cpu_ratios.append(get.cpu / read.cpu)
                floor_ratios.append(bare.cpu / read.cpu)
                cpu = "/".join(f"{1e3 * side.cpu:.2f}" for side in found.values())
                print(
                    f"{periods:>7} {pair + 1:>4} {1e3 * read.wall:>8.3f} {1e3 * get.wall:>8.3f}"
                    f" {1e3 * hit.wall:>9.3f} {1e3 * bare.wall:>8.3f} {ratios[-1][0]:>8.2f}"
                    f" {ratios[-1][1]:>11.2f} {ratios[-1][2]:>9.2f} {cpu:>29}"
                    f" {os.getloadavg()[0]:>6.2f}"
                )
            median = [float(np.median([r[i] for r in ratios])) for i in range(3)]
            print(
                f"{periods:>7} median GET/read {median[0]:.2f}x, cached/read {median[1]:.2f}x,"
                f" bare HTTP/read {median[2]:.2f}x (the floor of any answer over HTTP); CPU"
                f" GET/read {np.median(cpu_ratios):.2f}x, bare HTTP/read"
                f" {np.median(floor_ratios):.2f}x (SQLite reads in the reading process; on"
                " PostgreSQL the server's CPU is in neither side)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000_000)
    parser.add_argument("--mechanisms", default="krr,oue,olh")
    parser.add_argument("--periods", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--counts-only", action="store_true", help="only time estimate() from counts"
    )
    parser.add_argument("--mle-only", action="store_true", help="only time the exact mle")
    parser.add_argument(
        "--route",
        choices=["sqlite", "postgresql"],
        action="append",
        help="only GET estimate against the database read alone on this engine (repeatable)",
    )
    parser.add_argument("--stored", type=int, default=1_000_000, help="stored reports (--route)")
    parser.add_argument("--pairs", type=int, default=3, help="alternated runs (--route)")
    parser.add_argument("--calls", type=int, default=300, help="calls per side and run (--route)")
    args = parser.parse_args()
    if args.route:
        for backend in args.route:
            route_ratio(backend, args.stored, args.pairs, args.calls)
        return
    exact_mle_time()
    if args.mle_only:
        return
    counts_latency()
    if args.counts_only:
        return
    setups = {"krr": KRR(16, 2.0), "oue": OUE(64, 1.0), "olh": OLH(64, 1.0)}
    print(
        f"{'mechanism':<22}{'reports':>12}{'file MB':>9}{'write s':>9}{'estimate s (best of ' + str(args.repeat) + ')':>28}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.mechanisms.split(","):
            mechanism = setups[name]
            path = Path(tmp) / f"{name}.parquet"
            started = time.perf_counter()
            write_reports(mechanism, args.reports, args.periods, path)
            written = time.perf_counter() - started
            categories = [f"c{v}" for v in range(mechanism.k)]
            timings = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                result = estimate_reports(mechanism, categories, path)
                timings.append(time.perf_counter() - started)
            assert result.n == args.reports
            size = path.stat().st_size / 1e6
            print(
                f"{mechanism!r:<22}{args.reports:>12,}{size:>9.0f}{written:>9.1f}{min(timings):>28.2f}"
            )
            path.unlink()


if __name__ == "__main__":
    main()
