"""Export page cost deep into one big period, at schema 0001 and after upgrading to head.

Seeds ``--reports`` reports of one metric and one period (random ids, inserted straight into
``reports``) into an empty database migrated to 0001, times the page of ``--limit`` reports
that starts ``--limit`` before the end of the period, upgrades to head (timing the index
build) and times the same page again.

    .venv/bin/python bench/export.py [--reports 1000000] [--limit 10000] [--url EMPTY_DB_URL]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.queries import read_reports
from deniable.collector.storage.tables import reports

METRIC, PERIOD = "bench_export", "2026-11-21"
SEED_BATCH = 50_000


def seed(url: str, count: int) -> list[str]:
    """Insert ``count`` reports of one period in random id order; return their ids, sorted."""
    ids = [str(uuid.uuid4()) for _ in range(count)]
    day = dt.date(2026, 11, 21)
    database = open_database(url)
    try:
        for start in range(0, count, SEED_BATCH):
            rows = [
                {"id": i, "metric": METRIC, "period": PERIOD, "payload": "1", "received": day}
                for i in ids[start : start + SEED_BATCH]
            ]
            with database.writing() as connection:
                connection.execute(reports.insert(), rows)
    finally:
        database.dispose()
    return sorted(ids)


def page_seconds(url: str, ids: list[str], limit: int, repeats: int = 3) -> float:
    """Median time of the page of ``limit`` reports after the ``limit + 1``-th id from the end."""
    after = (PERIOD, ids[-limit - 1])
    database = open_database(url)
    try:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            rows = read_reports(database, METRIC, start=None, end=None, after=after, limit=limit)
            times.append(time.perf_counter() - start)
    finally:
        database.dispose()
    if [row[0] for row in rows] != ids[-limit:]:
        raise AssertionError("the page is not the last reports in (period, id) order")
    return statistics.median(times)


def main() -> None:
    """Seed, time a deep page at 0001, upgrade, time it again."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--limit", type=int, default=10_000)
    parser.add_argument("--url", help="an empty database (default: a temporary SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        url = args.url or f"sqlite:///{Path(directory) / 'export.db'}"
        migrate(url, "0001")
        start = time.perf_counter()
        ids = seed(url, args.reports)
        print(f"seeded {args.reports:,} reports in one period: {time.perf_counter() - start:.1f} s")
        before = page_seconds(url, ids, args.limit)
        start = time.perf_counter()
        migrate(url)
        print(f"upgrade to head (index build): {time.perf_counter() - start:.1f} s")
        after = page_seconds(url, ids, args.limit)
        pages = args.reports / args.limit
        for label, seconds in (("0001", before), ("head", after)):
            print(
                f"{label}: {seconds * 1000:.1f} ms per page of {args.limit:,};"
                f" whole period ~{seconds * pages:.1f} s"
            )


if __name__ == "__main__":
    main()
