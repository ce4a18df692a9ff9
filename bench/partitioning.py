"""Raw reports partitioned by period against one unpartitioned table, on PostgreSQL.

Three figures, each on two scratch databases (migration head: partitioned; 0009: not):

- ingestion through the product's write path (``store_batches``, 1,000-report batches of
  one period, an oue metric with k = 20), on fresh databases and on databases already holding
  ``--rows`` reports over 90 days: alternating pairs, the median ratio partitioned/plain;
- retention of one period (``--rows`` / 90 reports): detaching and dropping its partition
  against the batched DELETE the unpartitioned table needs, with the WAL each writes;
- ``--migrate``: the downtime of migration 0010 on a database holding ``--rows`` reports.

Run: ``.venv/bin/python -m bench.partitioning [--rows 1000000] [--pairs 6] [--migrate]``
(``--retention-only --interleaved``: the DELETE of one day spread over the whole table).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time
import uuid
from typing import Any

from testkit import fresh_database, postgres_problem

SPEC_K = 20
BATCH = 1000
DAYS = 90
FIRST_DAY = dt.date(2026, 6, 1)


def _spec() -> Any:
    from deniable.client import MetricSpec

    return MetricSpec.categorical(
        "bench_parts", [f"c{i}" for i in range(SPEC_K)], epsilon=1.0, mechanism="oue"
    )


def _prepare(url: str, revision: str, rows: int, interleaved: bool = False) -> Any:
    """Migrate ``url`` to ``revision``, register the metric, bulk-load ``rows`` reports over
    DAYS days (SQL, not the write path: only their presence matters); the open Database.

    The rows are generated day after day, as reports arrive: each day's random ids go into a
    small part of the key's B-tree that stays cached, so 10 million load in about a minute
    or two rather than thrashing one index (twice as fast as interleaving the days at 1M).
    ``interleaved`` spreads every day over the whole table instead (the 1 million figures
    in docs/operations.md), the worst case for a DELETE of one day."""
    from deniable.collector import migrate
    from deniable.collector.storage import open_database
    from deniable.collector.storage.partitions import create_partitions
    from deniable.collector.storage.queries import register_spec

    migrate(url, revision)
    database = open_database(url)
    register_spec(database, _spec(), dt.datetime.now(dt.UTC))
    day = f"(i %% {DAYS})" if interleaved else f"((i - 1)::bigint * {DAYS} / %(rows)s)::int"
    labels = [(FIRST_DAY + dt.timedelta(days=d)).isoformat() for d in range(DAYS)]
    with database.writer.begin() as connection:
        create_partitions(connection, labels)
        if rows:
            connection.exec_driver_sql(
                "INSERT INTO reports (id, metric, period, payload, received)"
                " SELECT gen_random_uuid(), 'bench_parts',"
                f" to_char(date '{FIRST_DAY.isoformat()}' + {day},"
                " 'YYYY-MM-DD'),"
                " '\"AAAA\"', current_date FROM generate_series(1, %(rows)s) i",
                {"rows": rows},
            )
    with database.writer.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            "VACUUM ANALYZE reports"
        )
    return database


def _batches(count: int, period: str) -> list[Any]:
    from deniable.client import SeededRandomness
    from deniable.collector.storage.prepare import prepare_batch
    from deniable.collector.validation import ValidReport

    spec = _spec()
    rng = SeededRandomness(5)
    out = []
    for _ in range(count):
        batch = [
            ValidReport(
                str(uuid.uuid4()), spec.name, period, spec.randomizer.randomize(i % 20, rng)
            )
            for i in range(BATCH)
        ]
        out.append(prepare_batch(batch, {spec.name: spec}, dt.date.today()))
    return out


def _ingest_rate(database: Any, batches: list[Any]) -> float:
    from deniable.collector.storage.transaction import store_batches

    began = time.perf_counter()
    for batch in batches:
        store_batches(database, [batch])
    return len(batches) * BATCH / (time.perf_counter() - began)


def ingestion(rows: int, pairs: int, batches_per_run: int) -> dict[str, Any]:
    """Reports/s into the partitioned and the plain table, ``pairs`` alternating runs."""
    period = (FIRST_DAY + dt.timedelta(days=DAYS - 1)).isoformat()
    with fresh_database("bench_part") as parted_url, fresh_database("bench_plain") as plain_url:
        parted = _prepare(parted_url, "head", rows)
        plain = _prepare(plain_url, "0009", rows)
        try:
            ratios, rates = [], {"partitioned": [], "plain": []}
            for pair in range(pairs):
                order = [("partitioned", parted), ("plain", plain)]
                if pair % 2:
                    order.reverse()
                got = {}
                for name, database in order:
                    got[name] = _ingest_rate(database, _batches(batches_per_run, period))
                    rates[name].append(got[name])
                ratios.append(got["partitioned"] / got["plain"])
        finally:
            parted.dispose()
            plain.dispose()
    return {
        "rows before": rows,
        "partitioned reports/s": statistics.median(rates["partitioned"]),
        "plain reports/s": statistics.median(rates["plain"]),
        "median ratio": statistics.median(ratios),
        "pairs": pairs,
    }


def _wal(connection: Any) -> int:
    return int(connection.exec_driver_sql("SELECT pg_current_wal_insert_lsn() - '0/0'").scalar())


def retention(rows: int, interleaved: bool = False) -> list[dict[str, Any]]:
    """One period's retention at ``rows`` stored: drop its partition against DELETE."""
    from sqlalchemy import delete, select, tuple_

    from deniable.collector.storage.partitions import drop_partition
    from deniable.collector.storage.retention import DELETE_BATCH
    from deniable.collector.storage.tables import reports

    label = FIRST_DAY.isoformat()
    results = []
    with fresh_database("bench_part") as parted_url, fresh_database("bench_plain") as plain_url:
        for name, url, revision in (
            ("drop partition", parted_url, "head"),
            ("batched DELETE", plain_url, "0009"),
        ):
            database = _prepare(url, revision, rows, interleaved)
            try:
                with database.writer.connect() as connection:
                    wal0 = _wal(connection)
                    size0 = int(
                        connection.exec_driver_sql(
                            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                            " WHERE c.relname LIKE 'reports%%'"
                        ).scalar()
                    )
                    stored = int(
                        connection.exec_driver_sql(
                            "SELECT count(*) FROM reports WHERE period = %(label)s",
                            {"label": label},
                        ).scalar()
                    )
                began = time.perf_counter()
                deleted = 0
                if name == "drop partition":
                    with database.writing() as connection:
                        drop_partition(connection, label)
                    deleted = stored
                else:
                    key = (reports.c.metric, reports.c.period, reports.c.id)
                    victims = select(*key).where(reports.c.period == label)
                    stmt = delete(reports).where(tuple_(*key).in_(victims.limit(DELETE_BATCH)))
                    while True:
                        with database.writing() as connection:
                            removed = connection.execute(stmt).rowcount
                        deleted += removed
                        if removed < DELETE_BATCH:
                            break
                seconds = time.perf_counter() - began
                with database.writer.connect() as connection:
                    wal = _wal(connection) - wal0
                    size = int(
                        connection.exec_driver_sql(
                            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                            " WHERE c.relname LIKE 'reports%%'"
                        ).scalar()
                    )
                results.append(
                    {
                        "how": name,
                        "reports of the period": deleted,
                        "seconds": seconds,
                        "WAL bytes": wal,
                        "space returned": size0 - size,
                    }
                )
            finally:
                database.dispose()
    return results


def migration(rows: int) -> dict[str, Any]:
    """Seconds migration 0010 takes (the collectors' wait) at ``rows`` stored reports."""
    from deniable.collector import migrate

    with fresh_database("bench_migrate") as url:
        database = _prepare(url, "0009", rows)
        database.dispose()
        began = time.perf_counter()
        migrate(url)
        return {"rows": rows, "downtime seconds": time.perf_counter() - began}


def _print(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    header = list(rows[0])
    cells = [header] + [
        [
            f"{v:,.3f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)
            for v in row.values()
        ]
        for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for j, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        if j == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="reports already stored")
    parser.add_argument("--pairs", type=int, default=6, help="alternating ingestion pairs")
    parser.add_argument("--batches", type=int, default=20, help="1,000-report batches per run")
    parser.add_argument("--migrate", action="store_true", help="also time migration 0010")
    parser.add_argument("--retention-only", action="store_true", help="only the retention figures")
    parser.add_argument(
        "--interleaved", action="store_true", help="spread each day over the whole table"
    )
    args = parser.parse_args()
    problem = postgres_problem()
    if problem:
        raise SystemExit(f"PostgreSQL is needed: {problem}")
    if not args.retention_only:
        _print(
            "ingestion (store_batches, 1,000-report batches of one period, oue k=20)",
            [
                ingestion(0, args.pairs, args.batches),
                ingestion(args.rows, args.pairs, args.batches),
            ],
        )
    _print(
        f"retention of one period of {DAYS} at {args.rows:,} stored",
        retention(args.rows, args.interleaved),
    )
    if args.migrate and not args.retention_only:
        _print("migration 0010 (partitioning an existing table)", [migration(args.rows)])


if __name__ == "__main__":
    main()
