"""Breakdown latency at 1 million stored reports with 2 dimensions (issue 27: p50 < 50 ms).

For each backend (SQLite file, PostgreSQL database) it starts a real collector process
(``deniable serve`` on uvicorn), registers a k = 100 oue metric with two dimensions
(platform: 3 values, app_version: 9; 40 cells with ``other``), posts 1 million randomized
reports through ``POST /v1/reports`` (each carrying random values of both dimensions, spread
over the last 7 daily periods), then times over HTTP, each ``--repeats`` times after 5 warm-up
requests:

- ``GET .../estimate?by=app_version``: 10 slices (9 versions and ``other``), 7 periods;
- ``GET .../estimate?by=platform&by=app_version``: all 40 cells as slices;
- ``GET .../estimate?by=app_version&where=platform:ios``: 10 slices of one platform;
- ``GET .../estimate`` (no breakdown) for comparison.

and prints p50 and p95 per query; on PostgreSQL once as loaded and once more after a
``VACUUM ANALYZE`` (the dead row versions the load's upserts left cleaned, as autovacuum
keeps them under a steady stream). A breakdown reads one ``cell_counts`` row per cell and
period (its k support counts packed in it), so its cost is cells × periods, not reports.

    .venv/bin/python -m bench.breakdown_speed [--backend sqlite|postgresql|both]
        [--reports 1000000] [--repeats 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from bench.ingest import BATCH, DIMENSIONS, K, build_bodies, load, percentile, print_table
from deniable.client import MetricSpec
from testkit import (
    ADMIN_TOKEN,
    CollectorProcess,
    collector_settings,
    register_all,
    scratch_database,
)

PERIODS = 7
"""The periods the reports spread over: the estimate's default range."""

QUERIES = {
    "breakdown by app_version (10 slices)": {"by": "app_version"},
    "breakdown by platform, app_version (40 slices)": {"by": ["platform", "app_version"]},
    "by app_version where platform:ios (10 slices)": {
        "by": "app_version",
        "where": "platform:ios",
    },
    "estimate, no breakdown": {},
}


def latency(
    url: str, name: str, params: dict[str, object], repeats: int
) -> tuple[float, float, int]:
    """p50 and p95 (seconds) of the estimate with ``params``, and the slices it answered."""
    timings = []
    slices = 0
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60
    ) as client:
        for i in range(repeats + 5):
            started = time.perf_counter()
            response = client.get(f"/v1/metrics/{name}/estimate", params=params)  # type: ignore[arg-type]
            elapsed = time.perf_counter() - started
            response.raise_for_status()
            slices = len(response.json().get("slices", [None]))
            if i >= 5:
                timings.append(elapsed)
    return percentile(timings, 0.5), percentile(timings, 0.95), slices


def vacuum(url: str) -> None:
    """VACUUM ANALYZE the PostgreSQL database at ``url``: right after the load, every cell row
    has been rewritten by thousands of upserts, and a read walks their dead versions until
    autovacuum (which a steady stream of reports keeps up with) has cleaned them."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(text("VACUUM ANALYZE"))
    finally:
        engine.dispose()


def run_backend(backend: str, args: argparse.Namespace, rows: list[list[str]]) -> None:
    """Fill one backend with the reports, time the queries, append the table rows."""
    with tempfile.TemporaryDirectory(prefix="deniable-bench-") as tmp:
        directory = Path(tmp)
        workers = 1 if backend == "sqlite" else 2
        with (
            scratch_database(backend, directory, "deniable_bench") as url,
            CollectorProcess(
                collector_settings(url, ingest_key=None), directory, workers=workers
            ) as collector,
        ):
            spec = MetricSpec.categorical(
                f"breakdown_{backend}",
                [f"c{i}" for i in range(K)],
                epsilon=1.0,
                mechanism="oue",
                dimensions=DIMENSIONS,
            )
            register_all(collector.url, [spec])
            today = dt.datetime.now(dt.UTC).date()
            labels = [(today - dt.timedelta(days=d)).isoformat() for d in range(PERIODS)]
            count = args.reports // BATCH
            print(f"[{backend}] building {count:,} request bodies of {BATCH} reports ...")
            bodies = build_bodies(spec, labels, count, seed=3)
            print(f"[{backend}] posting {count * BATCH:,} reports through the API ...")
            stored, wall, _, _ = load(collector.url, bodies, 24, 3600)
            if stored != count * BATCH:
                raise RuntimeError(f"stored {stored:,} reports, not {count * BATCH:,}")
            states = ["as loaded"]
            if backend == "postgresql":
                states.append("after VACUUM")
            for state in states:
                if state == "after VACUUM":
                    vacuum(url)
                for what, params in QUERIES.items():
                    p50, p95, slices = latency(collector.url, spec.name, params, args.repeats)
                    rows.append(
                        [
                            backend,
                            f"{what}, {state}",
                            f"p50 {p50 * 1000:.1f} ms",
                            f"p95 {p95 * 1000:.1f} ms",
                            f"{stored:,} stored over {PERIODS} periods ({stored / wall:,.0f}"
                            f" reports/s); {slices} slice(s)",
                        ]
                    )


def main() -> None:
    """Parse options, run the chosen backends, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    rows: list[list[str]] = []
    for backend in ("sqlite", "postgresql") if args.backend == "both" else (args.backend,):
        run_backend(backend, args, rows)
    print_table(rows)


if __name__ == "__main__":
    main()
