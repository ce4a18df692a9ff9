"""A text metric with dimensions in storage (``text_cell_counts``, migration 0011): its sketch
counts per cell, one row per nonzero count, for new reports only, whatever mix of new reports,
resends and repeats a write group holds; the whole population's counts are the sum of the
cells; the migration up and down on both engines; the breakdown's work bound."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter

import numpy as np
import pytest
from sqlalchemy import text

from deniable.client import MetricSpec, SeededRandomness
from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import read_counts, read_text_cells, register_spec
from deniable.collector.storage.textbacklog import fold_all
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from deniable.estimators.support import text_support
from testkit import (
    ADMIN_TOKEN,
    TEST_NOW,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    register,
)
from tests.collector.test_migrations import (
    _downgrade,
    _rows,
    _tables,
    assert_schema_is_the_tables,
)

PERIOD = TEST_NOW.date().isoformat()
EARLIER = (TEST_NOW.date() - dt.timedelta(days=1)).isoformat()
PLATFORMS = {"platform": ["ios", "android", "web"]}
CELLS = ("ios", "android", "web", "other")
WORDS = ("cat", "dog", "sun", "tea")


def _spec(name: str) -> MetricSpec:
    return MetricSpec.text(name, max_length=3, epsilon=2, dimensions=PLATFORMS)


def _reports(spec: MetricSpec, count: int, seed: int) -> list[ValidReport]:
    """``count`` text reports drawn through the real randomizer, over two periods and every
    cell (seeded draws; fresh ids)."""
    rng, sketch = SeededRandomness(seed), spec.text_randomizer
    reports = []
    for i in range(count):
        padded = sketch.encode(WORDS[i % len(WORDS)])
        payload = sketch.randomize(padded, 1 + i % sketch.levels, rng)
        period = PERIOD if i % 3 else EARLIER
        cell = CELLS[(i // 2) % len(CELLS)]
        reports.append(ValidReport(str(uuid.uuid4()), spec.name, period, payload, cell))
    return reports


def _expected(spec: MetricSpec, stored: list[ValidReport]) -> dict[tuple[str, str], np.ndarray]:
    """(period, cell) -> the sketch counts of the distinct ``stored`` reports."""
    expected: dict[tuple[str, str], np.ndarray] = {}
    indexes = text_support(spec.text_randomizer, [r.payload for r in stored])  # type: ignore[misc]
    for report, found in zip(stored, indexes, strict=True):
        counts = expected.setdefault(
            (report.period, report.cell), np.zeros(spec.text_randomizer.cell_count, np.int64)
        )
        counts[found] += 1
    return expected


def test_sketch_counts_per_cell_count_each_new_report_once(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    migrate(url)
    database = open_database(url)
    spec = _spec("search_by")
    specs = {spec.name: spec}
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        first = _reports(spec, 120, seed=1)
        day = TEST_NOW.date()
        (stored,) = store_batches(database, [prepare_batch(first, specs, day, dialect=backend)])
        assert (stored.accepted, stored.duplicates) == (120, 0)
        fresh = _reports(spec, 60, seed=2)
        # one group: new reports, resends of the first batch, and new ones twice over
        mixed = [*fresh[:40], *first[:30]]
        repeated = [*fresh[30:], *first[100:]]
        results = store_batches(
            database,
            [
                prepare_batch(mixed, specs, day, dialect=backend),
                prepare_batch(repeated, specs, day, dialect=backend),
            ],
        )
        assert [(r.accepted, r.duplicates) for r in results] == [(40, 30), (20, 30)]
        distinct = first + fresh
        labels = [EARLIER, PERIOD]
        expected = _expected(spec, distinct)
        pending = text("SELECT sum(reports) FROM text_pending WHERE metric = :m")
        assert _rows(url, pending.bindparams(m=spec.name)) == [(len(distinct),)]
        # the reads add the pending reports; a fold moves them into the counts, the same answer
        for fold in (False, True):
            if fold:
                assert fold_all(database) == len(distinct)
                assert _rows(url, pending.bindparams(m=spec.name)) == [(None,)]
            cells = read_text_cells(database, spec, labels)
            assert set(cells) == set(CELLS)
            for cell, stats in cells.items():
                for i, label in enumerate(labels):
                    assert np.array_equal(stats.counts[i], expected[(label, cell)]), (cell, label)
        touched = {
            (r.period, r.cell, int(found[-1]) - 3 * 16 * 1024)
            for r, found in zip(
                distinct,
                text_support(spec.text_randomizer, [r.payload for r in distinct]),  # type: ignore[misc]
                strict=True,
            )
        }
        query = text("SELECT period, cell, chunk FROM text_cell_counts WHERE metric = :m")
        assert set(_rows(url, query.bindparams(m=spec.name))) == touched
        for table in ("support_counts", "cell_counts"):
            query = text(f"SELECT count(*) FROM {table} WHERE metric = :m").bindparams(m=spec.name)
            assert _rows(url, query) == [(0,)]
        n = _rows(
            url,
            text("SELECT period, n FROM period_counts WHERE metric = :m").bindparams(m=spec.name),
        )
        assert dict(n) == dict(Counter(r.period for r in distinct))

        for cell, stats in cells.items():
            assert stats.n.tolist() == [
                sum(r.cell == cell and r.period == label for r in distinct) for label in labels
            ]
        totals, counts = read_counts(database, spec, labels)
        assert totals.tolist() == [dict(n)[label] for label in labels]
        assert np.array_equal(counts, sum(stats.counts for stats in cells.values()))
    finally:
        database.dispose()


def test_migration_0011_adds_and_drops_its_table_and_keeps_such_metrics_from_a_downgrade(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    migrate(url, "0010")
    assert "text_cell_counts" not in _tables(url)
    migrate(url)
    assert "text_cell_counts" in _tables(url)
    assert_schema_is_the_tables(url)
    _downgrade(url, "0010")
    assert "text_cell_counts" not in _tables(url)
    assert _rows(url, text("SELECT version_num FROM alembic_version")) == [("0010",)]
    migrate(url)
    assert_schema_is_the_tables(url)

    database = open_database(url)
    spec = _spec("kept")
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        batch = prepare_batch(_reports(spec, 8, seed=3), {spec.name: spec}, TEST_NOW.date())
        store_batches(database, [batch])
        fold_all(database)
    finally:
        database.dispose()
    count = text("SELECT count(*) FROM text_cell_counts")
    version = text("SELECT version_num FROM alembic_version")
    before, at = _rows(url, count), _rows(url, version)
    with pytest.raises(RuntimeError, match=r"text metrics with dimensions are registered \(kept\)"):
        _downgrade(url, "0010")
    assert _rows(url, count) == before and before != [(0,)]
    assert _rows(url, version) == at


def test_a_breakdown_past_the_estimate_cells_limit_is_refused_naming_it(
    databases: DatabaseFactory,
) -> None:
    settings = collector_settings(databases.new("sqlite"), max_estimate_cells=100_000)
    collector = RunningCollector(settings).start()
    try:
        with collector.client(ADMIN_TOKEN) as admin:
            spec = register(admin, _spec("limited"))
            answer = admin.get(f"/v1/metrics/{spec.name}/estimate", params={"by": "platform"})
    finally:
        collector.stop()
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == (
        "the breakdown would read 4 cells × 1 period × 49,200 sketch counts, more than the"
        " limit of 100,000 cells (DENIABLE_MAX_ESTIMATE_CELLS)"
    )
