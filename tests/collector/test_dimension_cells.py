"""Migration 0007 and the cell counts: an existing database upgrades with its counts
untouched (the one cell of its metrics, which have no dimensions), a metric with dimensions
counts each new report in its cell and a resent one nowhere, and the downgrade drops the
cells only."""

from __future__ import annotations

import datetime as dt
import uuid

from deniable.client import MetricSpec
from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.ingest import ValidReport, prepare_batch, store_batches
from deniable.collector.storage.queries import read_cells, register_spec
from sqlalchemy import text

from testkit import TEST_NOW, DatabaseFactory
from tests.collector.test_migrations import (
    _downgrade,
    _rows,
    _tables,
    assert_schema_is_the_tables,
)

PERIOD = TEST_NOW.date().isoformat()


def _store(url: str, spec: MetricSpec, reports: list[ValidReport]) -> None:
    database = open_database(url)
    try:
        store_batches(database, [prepare_batch(reports, {spec.name: spec}, TEST_NOW.date())])
    finally:
        database.dispose()


def test_migration_0007_keeps_existing_counts_and_counts_new_reports_per_cell(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    migrate(url, "0006")
    plain = MetricSpec.boolean("before_dimensions", epsilon=1.0)
    database = open_database(url)
    try:
        register_spec(database, plain, dt.datetime.now(dt.UTC))
    finally:
        database.dispose()
    _store(url, plain, [ValidReport(str(uuid.uuid4()), plain.name, PERIOD, v) for v in (0, 1, 1)])
    totals = text("SELECT metric, period, n FROM period_counts ORDER BY metric")
    before = _rows(url, totals)
    assert "cell_counts" not in _tables(url)

    migrate(url)
    assert_schema_is_the_tables(url)
    assert _rows(url, totals) == before
    split = MetricSpec.boolean(
        "with_dimensions", epsilon=1.0, dimensions={"platform": ["ios", "android"]}
    )
    database = open_database(url)
    try:
        register_spec(database, split, dt.datetime.now(dt.UTC))
    finally:
        database.dispose()
    sent = [
        ValidReport(str(uuid.uuid4()), split.name, PERIOD, payload, cell)
        for payload, cell in ((1, "ios"), (1, "ios"), (0, "android"), (1, "other"))
    ]
    _store(url, split, sent)
    _store(url, split, [sent[0], ValidReport(str(uuid.uuid4()), split.name, PERIOD, 0, "ios")])
    database = open_database(url)
    try:
        cells = read_cells(database, split, [PERIOD])
    finally:
        database.dispose()
    assert {cell: int(stats.n[0]) for cell, stats in cells.items()} == {
        "ios": 3,
        "android": 1,
        "other": 1,
    }
    assert cells["ios"].counts[0].tolist() == [1, 2]
    assert _rows(url, text(f"SELECT n FROM period_counts WHERE metric = '{split.name}'")) == [(5,)]

    _downgrade(url, "0006")
    assert "cell_counts" not in _tables(url) and "cell_support" not in _tables(url)
    assert _rows(url, totals)[0] == before[0]
    migrate(url)
    assert_schema_is_the_tables(url)
