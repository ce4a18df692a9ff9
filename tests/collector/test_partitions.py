"""Raw reports partitioned by period on PostgreSQL: partitions made before inserts, exactly-once
unchanged, retention dropping whole partitions, and no retention or export statement reading
every partition (asserted on the statements' own EXPLAIN plans)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text

from deniable.client import MetricSpec
from deniable.collector import migrate
from deniable.collector.storage import count_reports, open_database, report_pages
from deniable.collector.storage.engine import Database
from deniable.collector.storage.partitions import create_ahead, list_partitions, partition_name
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import read_counts, register_spec
from deniable.collector.storage.retention import purge_before
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from testkit import DatabaseFactory

SPEC = MetricSpec.categorical("parts", ["a", "b", "c"], epsilon=1.0, mechanism="krr")
WEEKLY = MetricSpec.boolean("parts_weekly", epsilon=1.0, period="week")
DAYS = ["2026-08-01", "2026-08-02", "2026-08-03", "2026-11-20", "2026-11-21"]
PER_DAY = 40


def _batch(spec: MetricSpec, period: str, n: int, seed: int) -> list[ValidReport]:
    return [ValidReport(str(uuid.uuid4()), spec.name, period, (i + seed) % 2) for i in range(n)]


def _store(database: Database, batch: list[ValidReport]) -> tuple[int, int]:
    prepared = prepare_batch(batch, {SPEC.name: SPEC, WEEKLY.name: WEEKLY}, dt.date(2026, 11, 21))
    [result] = store_batches(database, [prepared])
    return result.accepted, result.duplicates


@pytest.fixture
def filled(databases: DatabaseFactory, backend: str) -> Iterator[Database]:
    """A migrated database of ``backend`` with ``PER_DAY`` reports of SPEC in each of DAYS
    and of WEEKLY in two weeks."""
    url = databases.new(backend)
    migrate(url)
    database = open_database(url)
    for spec in (SPEC, WEEKLY):
        register_spec(database, spec, dt.datetime.now(dt.UTC))
    for i, day in enumerate(DAYS):
        assert _store(database, _batch(SPEC, day, PER_DAY, i)) == (PER_DAY, 0)
    for i, week in enumerate(["2026-W31", "2026-W47"]):
        assert _store(database, _batch(WEEKLY, week, PER_DAY, i)) == (PER_DAY, 0)
    yield database
    database.dispose()


def _partitions(database: Database) -> dict[str, str]:
    with database.writer.connect() as connection:
        return list_partitions(connection)


def test_each_period_gets_its_partition_and_resends_stay_duplicates(
    filled: Database, backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite has no partitions")
    assert sorted(_partitions(filled)) == sorted([*DAYS, "2026-W31", "2026-W47"])
    resent = _batch(SPEC, DAYS[0], 3, 0)
    assert _store(filled, resent) == (3, 0)
    assert _store(filled, resent + _batch(SPEC, "2026-11-22", 2, 0)) == (2, 3)
    assert "2026-11-22" in _partitions(filled)


def test_a_partition_dropped_underneath_is_made_again_without_losing_the_batch(
    filled: Database, backend: str
) -> None:
    """The process remembers the partitions it made; one dropped behind its back (the database
    replaced) fails the insert once, and the batch is stored after making it again."""
    if backend != "postgresql":
        pytest.skip("SQLite has no partitions")
    with filled.writer.begin() as connection:
        connection.exec_driver_sql(f'DROP TABLE "{partition_name(DAYS[-1])}"')
    assert _store(filled, _batch(SPEC, DAYS[-1], 5, 1)) == (5, 0)
    assert DAYS[-1] in _partitions(filled)
    with filled.writer.begin() as connection:
        connection.exec_driver_sql(f'DROP TABLE "{partition_name(DAYS[-2])}"')
    two_periods = _batch(SPEC, DAYS[-2], 3, 2) + _batch(SPEC, DAYS[-1], 4, 3)
    assert _store(filled, two_periods) == (7, 0)
    assert DAYS[-2] in _partitions(filled)


def test_retention_drops_old_periods_and_keeps_their_counts(filled: Database, backend: str) -> None:
    before = dt.date(2026, 9, 1)
    counts_before = read_counts(filled, SPEC, DAYS)
    deleted = purge_before(filled, [SPEC, WEEKLY], before)
    assert deleted == 3 * PER_DAY + PER_DAY  # three old days and week 31
    kept = {period for _, period, *_ in _all_reports(filled, SPEC.name)}
    assert kept == {"2026-11-20", "2026-11-21"}
    assert count_reports(filled, WEEKLY.name, start=None, end=None) == PER_DAY
    n, counts = read_counts(filled, SPEC, DAYS)
    assert n.tolist() == counts_before[0].tolist() and (counts == counts_before[1]).all()
    if backend == "postgresql":
        assert sorted(_partitions(filled)) == ["2026-11-20", "2026-11-21", "2026-W47"]
    assert purge_before(filled, [SPEC, WEEKLY], before) == 0


def test_create_ahead_makes_the_current_and_next_periods(filled: Database, backend: str) -> None:
    made = create_ahead(filled, dt.date(2026, 11, 25))
    if backend != "postgresql":
        assert made == []
        return
    assert made == ["2026-11", "2026-11-25", "2026-11-26", "2026-12", "2026-W48", "2026-W49"]
    assert set(made) <= set(_partitions(filled))


def _all_reports(database: Database, metric: str) -> list[tuple[str, str, Any]]:
    return [
        row for page in report_pages(database, metric, start=None, end=None, size=7) for row in page
    ]


def _relations(plan: Any) -> set[str]:
    """The relations an EXPLAIN (FORMAT JSON) plan reads."""
    found: set[str] = set()
    if isinstance(plan, dict):
        if "Relation Name" in plan:
            found.add(plan["Relation Name"])
        for value in plan.values():
            found |= _relations(value)
    elif isinstance(plan, list):
        for value in plan:
            found |= _relations(value)
    return found


def test_no_retention_or_export_statement_reads_every_partition(
    filled: Database, backend: str, tmp_path: Any
) -> None:
    """Every statement an export of two days, its count, and an archiving retention run
    execute is explained: each reads only the partitions of the periods it is about."""
    if backend != "postgresql":
        pytest.skip("SQLite has no partitions")
    from deniable.collector.storage.archive import Archive
    from deniable.collector.storage.retention import retain

    every = set(_partitions(filled).values())
    seen: list[tuple[str, set[str]]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM reports" in statement:
            explain = conn.connection.dbapi_connection.cursor()
            explain.execute("EXPLAIN (FORMAT JSON) " + statement, parameters)
            seen.append((statement, _relations(explain.fetchone()[0])))

    event.listen(filled.writer, "before_cursor_execute", record)
    try:
        exported = _all_reports_range(filled, "2026-11-20", "2026-11-21")
        assert len(exported) == 2 * PER_DAY
        assert count_reports(filled, SPEC.name, start="2026-11-20", end="2026-11-21") == 80
        run = retain(filled, [SPEC, WEEKLY], dt.date(2026, 8, 3), archive=Archive(str(tmp_path)))
        assert run.deleted == 3 * PER_DAY  # two days and week 31
    finally:
        event.remove(filled.writer, "before_cursor_execute", record)
    assert len(seen) >= 4
    assert len(every) == 7
    touched: set[str] = set()
    for statement, relations in seen:
        scanned = relations & every
        assert len(scanned) <= 2, (statement, scanned)
        touched |= scanned
    days = [partition_name(day) for day in ("2026-08-01", "2026-08-02", "2026-11-20", "2026-11-21")]
    assert touched == {*days, partition_name("2026-W31")}


def _all_reports_range(database: Database, start: str, end: str) -> list[Any]:
    return [
        row
        for page in report_pages(database, SPEC.name, start=start, end=end, size=7)
        for row in page
    ]


def test_schema_is_partitioned_only_on_postgresql(filled: Database, backend: str) -> None:
    with filled.writer.connect() as connection:
        if backend == "postgresql":
            kind = connection.execute(
                text("SELECT relkind FROM pg_class WHERE relname = 'reports'")
            ).scalar_one()
            assert kind == "p"
        else:
            ddl = connection.execute(
                text("SELECT sql FROM sqlite_master WHERE name = 'reports'")
            ).scalar_one()
            assert "WITHOUT ROWID" in ddl and "PARTITION" not in ddl.upper()
