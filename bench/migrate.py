"""How long the schema upgrades that rewrite the reports table take, per million stored reports.

For each backend it makes a database at revision 0001 (report ids as text), fills it with
``--reports`` raw reports through bulk SQL, and times ``deniable.collector.migrate`` to the
newest revision (0002 rewrites ``reports`` with binary ids and a (metric, period, id) index). Ingestion
into that database waits while it runs, so this is the maintenance window an upgrade needs.
Run: ``.venv/bin/python -m bench.migrate [--backend sqlite|postgresql|both] [--reports N]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import text

from bench.ingest import print_table
from deniable.collector import migrate
from deniable.collector.storage import open_database
from testkit import scratch_database

CHUNK = 100_000


def fill(url: str, count: int) -> None:
    """Insert ``count`` reports of one krr metric over 90 daily periods (revision 0001 columns)."""
    database = open_database(url)
    today = dt.date.today()
    labels = [(today - dt.timedelta(days=d)).isoformat() for d in range(90)]
    insert = text(
        "INSERT INTO reports (id, metric, period, payload, received)"
        " VALUES (:id, 'bench', :period, :payload, :received)"
    )
    try:
        for start in range(0, count, CHUNK):
            rows = [
                {
                    "id": str(uuid.uuid4()),
                    "period": labels[i % 90],
                    "payload": str(i % 5),
                    "received": today,
                }
                for i in range(start, min(count, start + CHUNK))
            ]
            with database.writing() as connection:
                connection.execute(insert, rows)
    finally:
        database.dispose()


def main() -> None:
    """Parse options, time the upgrade on each backend, print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--reports", type=int, default=1_000_000)
    args = parser.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    rows: list[list[str]] = []
    for backend in backends:
        with (
            tempfile.TemporaryDirectory(prefix="deniable-bench-") as tmp,
            scratch_database(backend, Path(tmp), "deniable_bench") as url,
        ):
            migrate(url, "0001")
            print(f"[{backend}] filling {args.reports:,} reports at revision 0001 ...")
            fill(url, args.reports)
            started = time.perf_counter()
            migrate(url)
            wall = time.perf_counter() - started
        rows.append(
            [
                backend,
                "upgrade 0001 -> head",
                f"{wall:.1f} s",
                f"{wall / args.reports * 1e6:.1f} s per million reports",
                f"{args.reports:,} stored",
            ]
        )
    print_table(rows)


if __name__ == "__main__":
    main()
