"""Text reports kept in ``text_pending`` and folded into ``text_cell_counts`` later
(migration 0019, :mod:`deniable.collector.storage.textbacklog`): every read counts each new
report once, before and after a fold, whoever folds (the writer's fold thread when a key is
due or when it starts, the writer itself when folds lag, retention, a downgrade, two folds at
once)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from deniable.client import MetricSpec, SeededRandomness
from deniable.client.mechanisms import PrefixSketch
from deniable.collector import migrate
from deniable.collector.storage import open_database, textbacklog
from deniable.collector.storage.engine import Database, normalize_url
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import read_text_cells, register_spec
from deniable.collector.storage.retention import retain
from deniable.collector.storage.tables import text_pending
from deniable.collector.storage.textbacklog import (
    FOLD_FACTOR,
    BackgroundFolds,
    TextBacklog,
    fold_all,
    fold_pending_rows,
)
from deniable.collector.storage.textcells import PENDING_CHUNK, pending_increments
from deniable.collector.storage.transaction import store_batches
from deniable.collector.storage.writer import GroupWriter
from deniable.collector.validation import ValidReport
from testkit import TEST_NOW, DatabaseFactory
from tests.collector.test_migrations import _downgrade, _rows, _tables
from tests.collector.test_text_cells import _expected

TODAY = TEST_NOW.date()
PERIODS = [(TODAY - dt.timedelta(days=back)).isoformat() for back in (9, 1, 0)]
CELLS = ("ios", "web", "other")
WORDS = ("cat", "dog", "sun", "tea")


def _spec() -> MetricSpec:
    return MetricSpec.text(
        "typed", max_length=3, epsilon=2, dimensions={"platform": ["ios", "web"]}
    )


def _reports(
    spec: MetricSpec, count: int, seed: int, periods: list[str] = PERIODS
) -> list[ValidReport]:
    """``count`` text reports from the real randomizer, spread over ``periods`` and
    :data:`CELLS` (seeded draws; ids from the seed, so a seed's reports are resends)."""
    rng, sketch = SeededRandomness(seed), spec.text_randomizer
    out = []
    for i in range(count):
        payload = sketch.randomize(sketch.encode(WORDS[i % 4]), 1 + i % sketch.levels, rng)
        report_id = f"{seed:08x}-0000-4000-8000-{i:012x}"
        out.append(
            ValidReport(report_id, spec.name, periods[i % len(periods)], payload, CELLS[i // 2 % 3])
        )
    return out


def _due_reports(spec: MetricSpec, seed: int, cell: str) -> list[ValidReport]:
    """Exactly enough reports of the last period and ``cell`` to make that key due."""
    sketch = spec.text_randomizer
    fold_at = FOLD_FACTOR * sketch.levels * sketch.rows
    drawn = _reports(spec, 3 * fold_at + 3, seed=seed, periods=[PERIODS[-1]])
    return [r for r in drawn if r.cell == cell][:fold_at]


def _assert_reads(database: Database, spec: MetricSpec, stored: list[ValidReport]) -> None:
    """Every (period, cell)'s counts, read as estimates read them, are the stored reports'."""
    expected = _expected(spec, stored)
    cells = read_text_cells(database, spec, PERIODS)
    assert {(p, c) for c, s in cells.items() for i, p in enumerate(PERIODS) if s.n[i]} == set(
        expected
    )
    for cell, stats in cells.items():
        for i, period in enumerate(PERIODS):
            want = expected.get((period, cell), np.zeros(spec.text_randomizer.cell_count))
            assert np.array_equal(stats.counts[i], want), (period, cell)


def _pending(url: str) -> int:
    (count,) = _rows(url, text("SELECT coalesce(sum(reports), 0) FROM text_pending"))[0]
    return int(count)


def _store(
    database: Database,
    spec: MetricSpec,
    batches: list[list[ValidReport]],
    backlog: TextBacklog | None = None,
) -> None:
    prepared = [
        prepare_batch(batch, {spec.name: spec}, TODAY, dialect=database.dialect)
        for batch in batches
    ]
    store_batches(database, prepared, backlog)


def _database(databases: DatabaseFactory, backend: str) -> tuple[str, Database, MetricSpec]:
    url = databases.new(backend)
    migrate(url)
    database = open_database(url)
    spec = _spec()
    register_spec(database, spec, dt.datetime.now(dt.UTC))
    return url, database, spec


def test_a_key_is_folded_once_its_appends_reach_the_factor_and_reads_never_change(
    databases: DatabaseFactory, backend: str
) -> None:
    url, database, spec = _database(databases, backend)
    sketch = spec.text_randomizer
    fold_at = FOLD_FACTOR * sketch.levels * sketch.rows
    key = (spec.name, PERIODS[-1], "ios")
    drawn = _reports(spec, 3 * (fold_at + 10), seed=1, periods=[PERIODS[-1]])
    in_key = [r for r in drawn if r.cell == "ios"]
    below, rest = in_key[: fold_at - 1], in_key[fold_at - 1 :]
    others = _reports(spec, 60, seed=2, periods=PERIODS[:2])
    try:
        backlog = TextBacklog()
        # resends in a group are neither appended nor counted towards a fold
        _store(database, spec, [below[:100], others], backlog)
        _store(database, spec, [below, others[:30]], backlog)
        stored = below + others
        assert _pending(url) == len(stored)
        assert backlog.waiting[key].reports == len(below)
        assert backlog.due() == []
        _assert_reads(database, spec, stored)
        _store(database, spec, [rest], backlog)
        stored += rest
        assert backlog.due() == [key]
        backlog.fold(database)
        assert backlog.due() == [] and key not in backlog.waiting
        assert _pending(url) == len(others)
        _assert_reads(database, spec, stored)
        assert fold_all(database) == len(others)
        assert _pending(url) == 0
        _assert_reads(database, spec, stored)
    finally:
        database.dispose()


def test_two_folds_of_the_same_rows_count_them_once(
    databases: DatabaseFactory, backend: str
) -> None:
    url, database, spec = _database(databases, backend)
    stored = _reports(spec, 90, seed=4)
    try:
        _store(database, spec, [stored[:50], stored[50:]])
        taken: list[int] = []
        with database.writing(changes=()) as connection:
            # the first fold holds its rows; a second one waits for them, then finds none
            first = fold_pending_rows(connection)
            second = threading.Thread(target=lambda: taken.append(fold_all(database)))
            second.start()
            second.join(timeout=0.5)
        second.join(timeout=60)
        assert not second.is_alive()
        assert (first, taken) == (len(stored), [0])
        assert _pending(url) == 0
        _assert_reads(database, spec, stored)
    finally:
        database.dispose()


def test_a_writer_folds_what_an_earlier_process_left_when_it_starts(
    databases: DatabaseFactory, backend: str
) -> None:
    url, database, spec = _database(databases, backend)
    stored = _reports(spec, 45, seed=5)
    try:
        _store(database, spec, [stored])
        assert _pending(url) == len(stored)
        GroupWriter(database).close()
        assert _pending(url) == 0
        _assert_reads(database, spec, stored)
    finally:
        database.dispose()


def test_a_writers_fold_thread_folds_its_due_keys_and_leaves_the_rest_pending(
    databases: DatabaseFactory, backend: str
) -> None:
    url, database, spec = _database(databases, backend)
    due = _due_reports(spec, seed=6, cell="ios")
    others = _reports(spec, 30, seed=7, periods=PERIODS[:2])
    try:
        writer = GroupWriter(database)
        for batch in (due, others):
            writer.store(prepare_batch(batch, {spec.name: spec}, TODAY, dialect=backend))
        writer.close()  # the fold thread folds what is due before it stops
        assert _pending(url) == len(others)
        _assert_reads(database, spec, due + others)
    finally:
        database.dispose()


def test_the_writer_folds_a_turn_itself_only_when_more_keys_are_due_than_the_bound(
    databases: DatabaseFactory, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, database, spec = _database(databases, backend)
    due = _due_reports(spec, seed=8, cell="web")
    try:
        backlog = TextBacklog()
        folds = BackgroundFolds(database, backlog)
        folds.close()  # no fold thread any more: only the caller of after_commit folds
        _store(database, spec, [due], backlog)
        folds.after_commit()  # one key due, within the bound: left to the fold thread
        assert len(backlog.due()) == 1 and _pending(url) == len(due)
        monkeypatch.setattr(textbacklog, "MOST_DUE", 0)
        folds.after_commit()
        assert backlog.due() == [] and _pending(url) == 0
        _assert_reads(database, spec, due)
    finally:
        database.dispose()


def test_retention_folds_the_pending_reports_of_the_periods_it_drops(
    databases: DatabaseFactory, backend: str
) -> None:
    url, database, spec = _database(databases, backend)
    stored = _reports(spec, 60, seed=6)
    try:
        _store(database, spec, [stored])
        run = retain(database, [spec], TODAY - dt.timedelta(days=2))
        assert run.deleted == sum(1 for r in stored if r.period == PERIODS[0])
        by_period = text("SELECT period, sum(reports) FROM text_pending GROUP BY period")
        assert dict(_rows(url, by_period)) == {
            period: sum(1 for r in stored if r.period == period) for period in PERIODS[1:]
        }
        _assert_reads(database, spec, stored)
    finally:
        database.dispose()


def test_migration_0019_downgrade_folds_and_a_collector_before_it_counts_at_once(
    databases: DatabaseFactory, backend: str
) -> None:
    url, database, spec = _database(databases, backend)
    first, second = _reports(spec, 40, seed=7), _reports(spec, 40, seed=8)
    try:
        _store(database, spec, [first])
        assert _pending(url) == len(first)
    finally:
        database.dispose()
    _downgrade(url, "0018")
    assert "text_pending" not in _tables(url)
    database = open_database(url)
    try:
        _assert_reads(database, spec, first)
        # a schema before 0019: ingestion adds to the counts at once, reads still whole
        _store(database, spec, [second, first[:10]])
        _assert_reads(database, spec, first + second)
    finally:
        database.dispose()
    migrate(url)
    assert text_pending.name in _tables(url) and _pending(url) == 0
    database = open_database(url)
    try:
        _assert_reads(database, spec, first + second)
    finally:
        database.dispose()


def test_migration_0020_stores_pending_bytes_uncompressed_and_keeps_them_both_ways(
    databases: DatabaseFactory,
) -> None:
    """0020 (PostgreSQL) sets ``text_pending``'s bytes to ``STORAGE EXTERNAL``: rows appended
    before and after it, and after its downgrade, all read and fold the same."""
    url, database, spec = _database(databases, "postgresql")
    batches = [_reports(spec, 40, seed=seed) for seed in (10, 11, 12)]
    storage = text(
        "SELECT a.attname, a.attstorage FROM pg_attribute a JOIN pg_class c"
        " ON c.oid = a.attrelid WHERE c.relname = 'text_pending'"
        " AND a.attname IN ('chunks', 'payloads') ORDER BY a.attname"
    )
    assert _rows(url, storage) == [("chunks", "e"), ("payloads", "e")]
    database.dispose()
    _downgrade(url, "0019")
    assert _rows(url, storage) == [("chunks", "x"), ("payloads", "x")]
    stored: list[ValidReport] = []
    for batch in batches:
        database = open_database(url)
        try:
            _store(database, spec, [batch])
            stored += batch
            assert _pending(url) == len(stored)
            _assert_reads(database, spec, stored)
        finally:
            database.dispose()
        migrate(url)
    assert _rows(url, storage) == [("chunks", "e"), ("payloads", "e")]
    database = open_database(url)
    try:
        assert fold_all(database) == len(stored)
        _assert_reads(database, spec, stored)
    finally:
        database.dispose()


def test_a_fold_that_fails_leaves_its_keys_due_and_its_reports_pending(
    databases: DatabaseFactory, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    url, database, spec = _database(databases, backend)
    in_key = _due_reports(spec, seed=9, cell="web")
    key = (spec.name, PERIODS[-1], "web")
    try:
        backlog = TextBacklog()
        _store(database, spec, [in_key], backlog)
        assert backlog.due() == [key]
        _execute(url, "ALTER TABLE text_cell_counts RENAME TO text_cell_counts_away")
        with caplog.at_level(logging.WARNING, logger="deniable.collector"):
            backlog.fold(database)
        assert "could not fold pending text reports" in caplog.text
        assert backlog.due() == [key] and _pending(url) == len(in_key)
        _execute(url, "ALTER TABLE text_cell_counts_away RENAME TO text_cell_counts")
        backlog.fold(database)
        assert backlog.due() == [] and _pending(url) == 0
        _assert_reads(database, spec, in_key)
    finally:
        database.dispose()


def _execute(url: str, statement: str) -> None:
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()


def test_increments_of_dense_and_scattered_reports_are_the_reference_counts() -> None:
    """A fold's reports (many per sketch row: each row's bits summed at once) and scattered
    ones (a set bit's place counted) give the counts the reference implementation does."""
    spec = _spec()
    sketch = spec.text_randomizer
    chunks = sketch.levels * sketch.rows
    drawn = _reports(spec, 3 * 8 * chunks, seed=10, periods=[PERIODS[-1]])
    dense = [r for r in drawn if r.cell == "ios"]  # 8 reports per sketch row
    scattered = _reports(spec, 40, seed=11)
    for reports in (dense, scattered):
        rows = [(r.period, r.cell, *_pending_bytes(sketch, r.payload)) for r in reports]
        found: dict[tuple[str, str], np.ndarray] = {}
        for (_, period, cell, chunk), counts in pending_increments("m", sketch, rows).items():
            flat = found.setdefault((period, cell), np.zeros(sketch.cell_count, np.int64))
            flat[chunk * sketch.cells : (chunk + 1) * sketch.cells] += counts[:-1]
            flat[chunks * sketch.cells + chunk] += counts[-1]
        expected = _expected(spec, reports)
        assert found.keys() == expected.keys()
        for key, counts in expected.items():
            assert np.array_equal(found[key], counts), key


def _pending_bytes(sketch: PrefixSketch, payload: Any) -> tuple[bytes, bytes]:
    """One text report's ``text_pending`` chunk and payload bytes."""
    chunk = (payload["l"] - 1) * sketch.rows + payload["r"]
    return np.array([chunk], dtype=PENDING_CHUNK).tobytes(), payload["b"].encode()
