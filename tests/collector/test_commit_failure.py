"""A batch whose COMMIT fails is never acknowledged, and nothing of it is stored.

The fault is in the database, at commit time, after every statement of the write succeeded:
on PostgreSQL a deferred constraint trigger on ``reports`` that raises when the transaction
commits; on SQLite a deferred foreign key that a trigger on ``reports`` violates (SQLite
checks deferred foreign keys at COMMIT; the collector's writer connections get
``PRAGMA foreign_keys=ON``, which the collector does not set itself). The upload must get a
5xx (never 202), the stored reports, counts and export must be unchanged, and once the fault
is removed the same batch is accepted, once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import create_engine, event, func, select, text

from deniable.client import MetricSpec
from deniable.collector.storage import read_sums
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.tables import period_counts, reports, support_counts
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_numeric_reports,
    make_reports,
    register,
)

PG_FAULT = [
    """
    CREATE FUNCTION deniable_test_fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'injected commit failure';
    END $$
    """,
    """
    CREATE CONSTRAINT TRIGGER deniable_test_fail_commit AFTER INSERT ON reports
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION deniable_test_fail_commit()
    """,
]
PG_CLEAR = [
    "DROP TRIGGER deniable_test_fail_commit ON reports",
    "DROP FUNCTION deniable_test_fail_commit()",
]
SQLITE_FAULT = [
    "CREATE TABLE deniable_test_parent (id INTEGER PRIMARY KEY)",
    """
    CREATE TABLE deniable_test_child (
        parent INTEGER REFERENCES deniable_test_parent (id) DEFERRABLE INITIALLY DEFERRED
    )
    """,
    """
    CREATE TRIGGER deniable_test_fail_commit AFTER INSERT ON reports
    BEGIN
        INSERT INTO deniable_test_child (parent) VALUES (-1);
    END
    """,
]
SQLITE_CLEAR = [
    "DROP TRIGGER deniable_test_fail_commit",
    "DROP TABLE deniable_test_child",
    "DROP TABLE deniable_test_parent",
]


def _run(url: str, statements: list[str]) -> None:
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


def _stored(url: str) -> tuple[list[tuple[str, str]], int, list[tuple[Any, ...]]]:
    """Every stored report (id, payload), the total period count, and the support counts."""
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(reports.c.id, reports.c.payload).order_by(reports.c.id)
            ).all()
            n = connection.execute(select(func.coalesce(func.sum(period_counts.c.n), 0))).scalar()
            support = connection.execute(
                select(support_counts).order_by(*support_counts.primary_key.columns)
            ).all()
    finally:
        engine.dispose()
    return [tuple(row) for row in rows], int(n or 0), [tuple(row) for row in support]


def _foreign_keys_on(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """At checkout, outside any transaction (the pragma is a no-op inside one)."""
    dbapi_connection.execute("PRAGMA foreign_keys=ON")


@contextmanager
def commit_fault(backend: str, url: str, server: RunningCollector) -> Iterator[None]:
    """Make every commit that inserts a report fail, until the block ends."""
    if backend == "postgresql":
        _run(url, PG_FAULT)
        try:
            yield
        finally:
            _run(url, PG_CLEAR)
        return
    _run(url, SQLITE_FAULT)
    writer = server.app_state().database.writer
    event.listen(writer, "checkout", _foreign_keys_on)
    try:
        yield
    finally:
        event.remove(writer, "checkout", _foreign_keys_on)
        writer.dispose()  # the pooled connections with the pragma on are closed
        _run(url, SQLITE_CLEAR)


@pytest.mark.parametrize("size", [1, 300])
def test_a_batch_whose_commit_fails_is_never_acknowledged(
    databases: DatabaseFactory, backend: str, size: int
) -> None:
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin, server.client(INGEST_KEY) as uploader:
            spec = register(admin, MetricSpec.categorical("commits", list("abcdefgh"), epsilon=1.0))
            period = TEST_NOW.date().isoformat()
            stored_before = make_reports(spec, [1, 2, 3], period, seed=1)
            assert uploader.post("/v1/reports", json={"reports": stored_before}).status_code == 202
            before = _stored(url)
            export_before = admin.get(f"/v1/admin/metrics/{spec.name}/reports").json()
            estimate_before = admin.get(f"/v1/metrics/{spec.name}/estimate").json()
            assert before[1] == 3

            batch = make_reports(spec, [i % 8 for i in range(size)], period, seed=2)
            with commit_fault(backend, url, server):
                for _ in range(2):
                    response = uploader.post("/v1/reports", json={"reports": batch})
                    assert 500 <= response.status_code < 600, (response.status_code, response.text)
                assert _stored(url) == before
                assert admin.get(f"/v1/admin/metrics/{spec.name}/reports").json() == export_before
                assert admin.get(f"/v1/metrics/{spec.name}/estimate").json() == estimate_before

            response = uploader.post("/v1/reports", json={"reports": batch})
            assert response.status_code == 202, response.text
            assert response.json() == {"accepted": size, "duplicates": 0}
            response = uploader.post("/v1/reports", json={"reports": batch})
            assert response.json() == {"accepted": 0, "duplicates": size}
            _, n, support = _stored(url)
            assert n == 3 + size
            assert sum(row[3] for row in support) >= 3 + size  # every report supports its value
            exported = admin.get(
                f"/v1/admin/metrics/{spec.name}/reports", params={"limit": 1000}
            ).json()
            assert sorted(r["id"] for r in exported["reports"]) == sorted(
                r["id"] for r in stored_before + batch
            )
    finally:
        server.stop()


def test_the_fault_fails_the_commit_not_a_statement(
    databases: DatabaseFactory, backend: str
) -> None:
    """The injected fault passes every statement and fails only COMMIT (so the test above
    tests a failing commit, not a failing insert)."""
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url)).start()
    try:
        with commit_fault(backend, url, server):
            engine = server.app_state().database.writer
            connection = engine.connect()
            try:
                transaction = connection.begin()
                connection.execute(
                    text(
                        "INSERT INTO reports (id, metric, period, payload, received) "
                        "VALUES (:id, 'm', '2026-11-21', '0', '2026-11-21')"
                    ),
                    {
                        "id": "00000000-0000-4000-8000-000000000001"
                        if backend == "postgresql"
                        else bytes(16)
                    },
                )
                with pytest.raises(Exception, match=r"(?i)injected commit failure|foreign key"):
                    transaction.commit()
            finally:
                connection.close()
        assert _stored(url)[0] == []
    finally:
        server.stop()


def test_a_group_with_numeric_reports_whose_commit_fails_leaves_no_sums(
    databases: DatabaseFactory, backend: str
) -> None:
    """The numeric sums live in the same transaction: a failed commit leaves neither the
    reports nor the sums, and the batch sent again after the fault is counted once."""
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin, server.client(INGEST_KEY) as uploader:
            load = register(
                admin, MetricSpec.numeric("load", lower=0, upper=100, epsilon=1.0, mechanism="pm")
            )
            kind = register(admin, MetricSpec.categorical("kind", list("abcd"), epsilon=1.0))
            period = TEST_NOW.date().isoformat()
            first = make_numeric_reports(load, [10.0, 20.0], period, seed=1)
            assert uploader.post("/v1/reports", json={"reports": first}).status_code == 202
            database = server.app_state().database
            before = (_stored(url), read_sums(database, load, [period]))
            batch = make_numeric_reports(load, [i / 3 for i in range(300)], period, seed=2)
            batch += make_reports(kind, [i % 4 for i in range(100)], period, seed=3)
            with commit_fault(backend, url, server):
                response = uploader.post("/v1/reports", json={"reports": batch})
                assert 500 <= response.status_code < 600, (response.status_code, response.text)
                assert (_stored(url), read_sums(database, load, [period])) == before
            for expected in (
                {"accepted": 400, "duplicates": 0},
                {"accepted": 0, "duplicates": 400},
            ):
                assert uploader.post("/v1/reports", json={"reports": batch}).json() == expected
            (stored,) = read_sums(database, load, [period])
            ys = [r["payload"] for r in first + batch[:300]]
            assert stored.n == 302 and stored.total == pytest.approx(math.fsum(ys), rel=1e-12)
            assert _stored(url)[1] == 402
    finally:
        server.stop()
