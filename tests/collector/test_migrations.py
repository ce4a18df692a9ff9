"""Upgrading a database that already holds reports: nothing lost, altered or counted twice."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import numpy as np
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, create_engine, inspect, select, text

from deniable.client import MetricSpec, SeededRandomness
from deniable.client.wire import payload_text
from deniable.collector import migrate
from deniable.collector.storage import open_database, read_batches, read_sums
from deniable.collector.storage.arrivals import Arrival, read_arrivals
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.migrator import alembic_config, run_locked
from deniable.collector.storage.partitions import include_name
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import read_counts, register_spec
from deniable.collector.storage.shuffled import record_part
from deniable.collector.storage.tables import metadata, reports, shuffled_batches
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from deniable.estimators.shufflingaccount import ShuffledBatch
from deniable.estimators.support import text_support
from testkit import (
    INGEST_KEY,
    TEST_NOW,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_reports,
)

STORED = 12_345
"""More than one chunk of the SQLite copy (10,000 rows)."""


def _downgrade(url: str, revision: str) -> None:
    def work(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)

    run_locked(normalize_url(url), work)


def _rows(url: str, query: Any) -> list[tuple[Any, ...]]:
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(query)]
    finally:
        engine.dispose()


def assert_schema_is_the_tables(url: str) -> None:
    """The migrated database at ``url`` has exactly the schema ``tables`` declares."""
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"include_name": include_name})
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


@pytest.fixture
def old_database(
    databases: DatabaseFactory, backend: str
) -> tuple[str, MetricSpec, list[dict[str, Any]]]:
    """A database at revision 0001 holding ``STORED`` reports with text ids, and their spec."""
    url = databases.new(backend)
    migrate(url, "0001")
    spec = MetricSpec.boolean("upgraded", epsilon=1.0)
    period = TEST_NOW.date().isoformat()
    stored = make_reports(spec, [i % 2 for i in range(STORED)], period, seed=3)
    database = open_database(url)
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        with database.writing() as connection:
            connection.execute(
                text(
                    "INSERT INTO reports (id, metric, period, payload, received)"
                    " VALUES (:id, :metric, :period, :payload, :received)"
                ),
                [
                    {**r, "payload": payload_text(r["payload"]), "received": TEST_NOW.date()}
                    for r in stored
                ],
            )
    finally:
        database.dispose()
    return url, spec, stored


def test_upgrade_keeps_every_report_and_resends_stay_duplicates(
    old_database: tuple[str, MetricSpec, list[dict[str, Any]]],
) -> None:
    url, spec, stored = old_database
    migrate(url)
    columns = (reports.c.id, reports.c.period, reports.c.payload)
    after = _rows(url, select(*columns).order_by(reports.c.id))
    assert after == sorted((r["id"], r["period"], json.dumps(r["payload"])) for r in stored)
    assert_schema_is_the_tables(url)

    server = RunningCollector(collector_settings(url)).start()
    try:
        fresh = make_reports(spec, [1, 0], stored[0]["period"], seed=4)
        with server.client(INGEST_KEY) as uploader:
            response = uploader.post("/v1/reports", json={"reports": stored[:3] + fresh})
    finally:
        server.stop()
    assert response.status_code == 202, response.text
    assert response.json() == {"accepted": 2, "duplicates": 3}

    _downgrade(url, "0001")
    back = _rows(url, text("SELECT id, period, payload FROM reports"))
    expected = [(r["id"], r["period"], json.dumps(r["payload"])) for r in stored + fresh]
    assert sorted(back) == sorted(expected)
    migrate(url)
    assert sorted(_rows(url, select(*columns))) == sorted(expected)


def test_archived_at_migration_keeps_the_registry_both_ways(
    databases: DatabaseFactory, backend: str
) -> None:
    """0003 adds ``metrics.archived_at`` (null: nothing archived) and drops it again on the way
    down, every registered spec kept; an archive made at head is gone after the downgrade."""
    from deniable.collector.storage.queries import archive_metric, load_registration

    url = databases.new(backend)
    migrate(url, "0002")
    spec = MetricSpec.boolean("kept_through", epsilon=1.0)
    database = open_database(url)
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
    finally:
        database.dispose()
    migrate(url)
    database = open_database(url)
    try:
        registration = load_registration(database, spec.name)
        assert registration is not None and not registration.archived
        assert archive_metric(database, spec.name, dt.datetime.now(dt.UTC)) is not None
        assert load_registration(database, spec.name).archived  # type: ignore[union-attr]
    finally:
        database.dispose()
    _downgrade(url, "0002")
    rows = _rows(url, text("SELECT name, fingerprint FROM metrics"))
    assert rows == [(spec.name, spec.fingerprint)]
    migrate(url)
    assert_schema_is_the_tables(url)


def test_numeric_sums_migration_adds_and_drops_its_table_only(
    databases: DatabaseFactory, backend: str
) -> None:
    """0004 creates ``numeric_sums`` beside a 0003 database's reports and counts, untouched
    (a release without numeric metrics stores categorical batches exactly as before);
    the downgrade drops it (numeric metrics' raw reports stay) and the upgrade makes it again."""
    url = databases.new(backend)
    migrate(url, "0003")
    boolean = MetricSpec.boolean("before_numbers", epsilon=1.0)
    period = TEST_NOW.date().isoformat()
    _store_at_0003(url, boolean, period, [0, 1, 1])
    counts = text("SELECT metric, period, n FROM period_counts")
    before = _rows(url, counts)
    assert "numeric_sums" not in _tables(url)

    migrate(url)
    assert "numeric_sums" in _tables(url)
    assert _rows(url, counts) == before
    assert_schema_is_the_tables(url)
    spec = MetricSpec.numeric("numbers", lower=0, upper=1, epsilon=1.0, mechanism="pm")
    database = open_database(url)
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        batch = [ValidReport(str(uuid.uuid4()), spec.name, period, y) for y in (0.5, -1.25, 2.0)]
        store_batches(database, [prepare_batch(batch, {spec.name: spec}, TEST_NOW.date())])
        assert read_sums(database, spec, [period])[0].n == 3
    finally:
        database.dispose()

    _downgrade(url, "0003")
    assert "numeric_sums" not in _tables(url)
    assert len(_rows(url, text("SELECT id FROM reports"))) == 6
    migrate(url)
    assert_schema_is_the_tables(url)
    assert _rows(url, text("SELECT n FROM numeric_sums")) == []


def _store_at_0003(url: str, spec: MetricSpec, period: str, payloads: list[int]) -> None:
    """Register ``spec`` and store reports with their period count in a revision-0003 schema,
    as that release did (its reports were keyed by id alone, which today's ingest no longer
    writes to)."""
    database = open_database(url)
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
    finally:
        database.dispose()
    engine = create_engine(normalize_url(url))
    rows = [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "period": period,
            "payload": str(payload),
            "received": TEST_NOW.date(),
        }
        for payload in payloads
    ]
    try:
        with engine.begin() as connection:
            connection.execute(reports.insert(), rows)
            connection.execute(
                text("INSERT INTO period_counts (metric, period, n) VALUES (:m, :p, :n)"),
                {"m": spec.name, "p": period, "n": len(rows)},
            )
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = create_engine(normalize_url(url))
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_report_key_migration_keeps_every_report_and_exactly_once(
    databases: DatabaseFactory, backend: str
) -> None:
    """0005 re-keys ``reports`` by (metric, period, id): every stored report survives the
    upgrade and the downgrade, the schema is the tables', and a report stored before the
    upgrade and resent after it is a duplicate."""
    url = databases.new(backend)
    migrate(url, "0003")
    spec = MetricSpec.boolean("before_rekey", epsilon=1.0)
    period = TEST_NOW.date().isoformat()
    _store_at_0003(url, spec, period, [0, 1, 1, 0])
    migrate(url, "0004")
    everything = text("SELECT id, metric, period, payload FROM reports ORDER BY id")
    before = _rows(url, everything)

    migrate(url)
    assert_schema_is_the_tables(url)
    assert _rows(url, everything) == before
    stored_id = str(_rows(url, select(reports.c.id))[0][0])
    database = open_database(url)
    try:
        resent = [ValidReport(stored_id, spec.name, period, 1)]
        fresh = [ValidReport(str(uuid.uuid4()), spec.name, period, 1)]
        prepared = prepare_batch(resent + fresh, {spec.name: spec}, TEST_NOW.date())
        [result] = store_batches(database, [prepared])
    finally:
        database.dispose()
    assert (result.accepted, result.duplicates) == (1, 1)

    _downgrade(url, "0004")
    assert len(_rows(url, everything)) == len(before) + 1


def test_shuffled_parts_migration_adds_and_drops_its_table_only(
    databases: DatabaseFactory, backend: str
) -> None:
    """0012 creates ``shuffled_parts`` beside a 0010 database's batches, untouched (counted at
    their stated n, no refusal recorded); the downgrade drops it (the batches stay, at their
    stated n again) and the upgrade makes it again, empty."""
    url = databases.new(backend)
    migrate(url, "0010")
    released = dt.datetime(2026, 11, 26, 9, tzinfo=dt.UTC)
    batch = ShuffledBatch("m", "krr", 2.0, 40, batch="a" * 32, fingerprint="f" * 16)
    database = open_database(url)
    try:
        with database.writing() as connection:
            connection.execute(
                shuffled_batches.insert().values(
                    batch=batch.batch,
                    metric=batch.metric,
                    mechanism=batch.mechanism,
                    epsilon=batch.epsilon,
                    fingerprint=batch.fingerprint,
                    n=batch.n,
                    released_at=released,
                )
            )
    finally:
        database.dispose()
    assert "shuffled_parts" not in _tables(url)

    migrate(url, "0012")
    assert _rows(url, text("SELECT batch FROM shuffled_parts")) == []
    parts_row = text("INSERT INTO shuffled_parts (batch, part, refused) VALUES (:b, 0, 3)")
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as connection:
            connection.execute(parts_row, {"b": batch.batch})
    finally:
        engine.dispose()

    _downgrade(url, "0010")
    assert "shuffled_parts" not in _tables(url)
    assert _rows(url, text("SELECT batch, n FROM shuffled_batches")) == [(batch.batch, 40)]
    migrate(url)
    assert_schema_is_the_tables(url)
    assert _rows(url, text("SELECT batch FROM shuffled_parts")) == []


def test_counted_parts_migration_counts_old_batches_at_nothing_they_cannot_show(
    databases: DatabaseFactory, backend: str
) -> None:
    """0015 adds each part's counted reports and each batch's stated parts: a batch recorded at
    0013 (stated n = 40, a part with 3 refused) cannot show how many distinct reports it
    delivered, so it counts 0 devices, incomplete, its stated 40 kept; parts recorded after
    count. The downgrade drops both columns and keeps every row."""
    url = databases.new(backend)
    migrate(url, "0013")
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO shuffled_batches (batch, metric, mechanism, epsilon, fingerprint,"
                    " n, released_at) VALUES (:b, 'm', 'krr', 2.0, :f, 40, :t)"
                ),
                {"b": "a" * 32, "f": "f" * 16, "t": dt.datetime(2026, 11, 26, 9, tzinfo=dt.UTC)},
            )
            connection.execute(
                text("INSERT INTO shuffled_parts (batch, part, refused) VALUES (:b, 0, 3)"),
                {"b": "a" * 32},
            )
    finally:
        engine.dispose()

    migrate(url)
    assert_schema_is_the_tables(url)
    database = open_database(url)
    try:
        (old,) = read_batches(database)
        assert (old.n, old.refused, old.declared, old.incomplete) == (0, 3, 40, True)
        record_part(database, "a" * 32, 1, 0, 17)
        record_part(database, "a" * 32, 1, 0, 99)  # sent again: its first count stands
        (old,) = read_batches(database)
        assert (old.n, old.refused, old.incomplete) == (17, 3, True)
    finally:
        database.dispose()

    _downgrade(url, "0013")
    assert _rows(url, text("SELECT batch, n FROM shuffled_batches")) == [("a" * 32, 40)]
    assert _rows(url, text("SELECT part, refused FROM shuffled_parts ORDER BY part")) == [
        (0, 3),
        (1, 0),
    ]
    migrate(url)
    assert_schema_is_the_tables(url)


def test_arrivals_migration_adds_and_drops_its_table_and_ingest_writes_it_only_once_there(
    databases: DatabaseFactory, backend: str
) -> None:
    """0016 creates ``arrivals``; a collector on a 0015 database still stores reports (and
    records no arrival); after the upgrade each new report counts in its minute, a resent one
    does not; the downgrade drops the table and nothing else."""
    url = databases.new(backend)
    migrate(url, "0015")
    spec = MetricSpec.boolean("arrives", epsilon=1.0)
    period = TEST_NOW.date().isoformat()
    at = TEST_NOW.timestamp()
    database = open_database(url)
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        old = [ValidReport(str(uuid.uuid4()), spec.name, period, 1) for _ in range(3)]
        store_batches(
            database, [prepare_batch(old, {spec.name: spec}, TEST_NOW.date(), received_at=at)]
        )
    finally:
        database.dispose()
    assert "arrivals" not in _tables(url)

    migrate(url)
    assert_schema_is_the_tables(url)
    database = open_database(url)
    try:
        assert read_arrivals(database, [spec.name], at)[spec.name] == Arrival(None, 0)
        new = [ValidReport(str(uuid.uuid4()), spec.name, period, 0) for _ in range(5)]
        batches = [
            prepare_batch(new[:4] + old[:1], {spec.name: spec}, TEST_NOW.date(), received_at=at),
            prepare_batch(new[2:], {spec.name: spec}, TEST_NOW.date(), received_at=at + 5),
        ]
        store_batches(database, batches)  # 4 new, then 1 new beside 2 resent: 5 at +5 s
        assert read_arrivals(database, [spec.name], at + 10)[spec.name] == Arrival(at + 5, 5)
        store_batches(
            database,
            [prepare_batch(new[:1], {spec.name: spec}, TEST_NOW.date(), received_at=at + 9)],
        )  # resent alone: nothing new arrived
        assert read_arrivals(database, [spec.name], at + 10)[spec.name] == Arrival(at + 5, 5)
        later = at + 60 * 60  # the same slot an hour on: counted afresh
        store_batches(
            database,
            [prepare_batch(old[1:], {spec.name: spec}, TEST_NOW.date(), received_at=later)],
        )
        assert read_arrivals(database, [spec.name], later)[spec.name] == Arrival(at + 5, 0)
        fresh = [ValidReport(str(uuid.uuid4()), spec.name, period, 1)]
        store_batches(
            database, [prepare_batch(fresh, {spec.name: spec}, TEST_NOW.date(), received_at=later)]
        )
        assert read_arrivals(database, [spec.name], later)[spec.name] == Arrival(later, 1)
        assert _rows(url, text("SELECT minute, n FROM arrivals")) == [
            (int(at // 60) + 60, 1),
        ]
    finally:
        database.dispose()

    _downgrade(url, "0015")
    assert "arrivals" not in _tables(url)
    assert len(_rows(url, text("SELECT id FROM reports"))) == 9
    migrate(url)
    assert_schema_is_the_tables(url)


def test_packed_text_counts_migration_packs_and_unpacks_losslessly(
    databases: DatabaseFactory, backend: str
) -> None:
    """0017 packs a text metric's ``support_counts`` (a row per nonzero count, as 0016
    ingestion left them) into one ``text_cell_counts`` row per sketch row of cell ``''``: the
    estimate's counts are exactly the rows', ingestion after it adds to them, and the
    downgrade writes back exactly the rows a row-per-count layout holds; other metrics'
    counts are untouched both ways."""
    url = databases.new(backend)
    migrate(url, "0016")
    words = MetricSpec.text("words", max_length=4, epsilon=1.0)
    other = MetricSpec.categorical("other", ["a", "b", "c"], epsilon=1.0)
    sketch = words.text_randomizer
    rng = SeededRandomness(11)
    periods = [TEST_NOW.date().isoformat(), (TEST_NOW.date() - dt.timedelta(days=1)).isoformat()]
    valid = [
        ValidReport(
            str(uuid.uuid4()),
            words.name,
            periods[i % 2],
            sketch.randomize(sketch.encode(f"w{i % 5}"), 1 + i % sketch.levels, rng),
        )
        for i in range(300)
    ]
    old = {p: np.zeros(words.count_width, dtype=np.int64) for p in periods}
    for report, indexes in zip(
        valid, text_support(sketch, [r.payload for r in valid]), strict=True
    ):
        np.add.at(old[report.period], indexes, 1)
    support_rows = sorted(
        (words.name, p, c, int(old[p][c])) for p in periods for c in np.flatnonzero(old[p]).tolist()
    )
    database = open_database(url)
    try:
        for spec in (words, other):
            register_spec(database, spec, dt.datetime.now(dt.UTC))
        others_valid = [
            ValidReport(r["id"], r["metric"], r["period"], r["payload"])
            for r in make_reports(other, [0, 1, 2, 2], periods[0], seed=5)
        ]
        store_batches(database, [prepare_batch(others_valid, {other.name: other}, TEST_NOW.date())])
        with database.writing() as connection:
            connection.execute(
                text("INSERT INTO period_counts (metric, period, n) VALUES (:m, :p, 150)"),
                [{"m": words.name, "p": p} for p in periods],
            )
            connection.execute(
                text("INSERT INTO support_counts VALUES (:m, :p, :c, :s)"),
                [dict(zip("mpcs", row, strict=True)) for row in support_rows],
            )
    finally:
        database.dispose()
    support_query = text("SELECT metric, period, category, support FROM support_counts")
    others = sorted(r for r in _rows(url, support_query) if r[0] == other.name)

    migrate(url)
    assert_schema_is_the_tables(url)
    assert sorted(_rows(url, support_query)) == others
    chunks = _rows(url, text("SELECT DISTINCT cell, period, chunk FROM text_cell_counts"))
    touched = {(r.period, r.payload["l"], r.payload["r"]) for r in valid}
    assert sorted(chunks) == sorted(("", p, (lv - 1) * sketch.rows + row) for p, lv, row in touched)
    database = open_database(url)
    try:
        n, counts = read_counts(database, words, sorted(periods))
        assert n.tolist() == [150, 150]
        assert all(np.array_equal(counts[i], old[p]) for i, p in enumerate(sorted(periods)))
        more = [ValidReport(str(uuid.uuid4()), words.name, periods[0], valid[0].payload)]
        store_batches(database, [prepare_batch(more, {words.name: words}, TEST_NOW.date())])
        np.add.at(old[periods[0]], text_support(sketch, [valid[0].payload])[0], 1)
        n, counts = read_counts(database, words, [periods[0]])
        assert n.tolist() == [151] and np.array_equal(counts[0], old[periods[0]])
    finally:
        database.dispose()

    _downgrade(url, "0016")
    after = sorted(
        (words.name, p, c, int(old[p][c])) for p in periods for c in np.flatnonzero(old[p]).tolist()
    )
    assert sorted(_rows(url, support_query)) == sorted(after + others)
    assert _rows(url, text("SELECT count(*) FROM text_cell_counts")) == [(0,)]
    migrate(url)
    assert_schema_is_the_tables(url)
    database = open_database(url)
    try:
        n, counts = read_counts(database, words, [periods[0]])
        assert n.tolist() == [151] and np.array_equal(counts[0], old[periods[0]])
    finally:
        database.dispose()


def test_text_counts_storage_migration_keeps_the_counts_both_ways(
    databases: DatabaseFactory,
) -> None:
    """0018 stores ``text_cell_counts.counts`` uncompressed out of line and gives the table
    ``fillfactor = 50`` (PostgreSQL); the counts stored before read the same after it, ingestion
    adds to them, and the downgrade restores ``numeric``'s storage and full pages."""
    url = databases.new("postgresql")
    migrate(url, "0017")
    words = MetricSpec.text("words", max_length=4, epsilon=1.0)
    sketch = words.text_randomizer
    rng = SeededRandomness(12)
    period = TEST_NOW.date().isoformat()
    valid = [
        ValidReport(
            str(uuid.uuid4()),
            words.name,
            period,
            sketch.randomize(sketch.encode(f"w{i % 3}"), 1 + i % sketch.levels, rng),
        )
        for i in range(120)
    ]
    expected = np.zeros(words.count_width, dtype=np.int64)
    for indexes in text_support(sketch, [r.payload for r in valid]):
        np.add.at(expected, indexes, 1)

    def store_and_read(batch: list[ValidReport]) -> np.ndarray:
        database = open_database(url)
        try:
            register_spec(database, words, dt.datetime.now(dt.UTC))
            store_batches(database, [prepare_batch(batch, {words.name: words}, TEST_NOW.date())])
            return read_counts(database, words, [period])[1][0]
        finally:
            database.dispose()

    assert np.array_equal(store_and_read(valid[:60]), _partial(sketch, valid[:60]))
    storage = text(
        "SELECT a.attstorage, c.reloptions FROM pg_attribute a JOIN pg_class c"
        " ON c.oid = a.attrelid WHERE c.relname = 'text_cell_counts' AND a.attname = 'counts'"
    )
    assert _rows(url, storage) == [("m", None)]
    migrate(url)
    assert_schema_is_the_tables(url)
    assert _rows(url, storage) == [("e", ["fillfactor=50"])]
    assert np.array_equal(store_and_read(valid[60:]), expected)
    _downgrade(url, "0017")
    assert _rows(url, storage) == [("m", None)]
    assert np.array_equal(store_and_read([]), expected)


def _partial(sketch: Any, batch: list[ValidReport]) -> np.ndarray:
    """The counts of ``batch``'s text reports alone."""
    counts = np.zeros(sketch.cell_count, dtype=np.int64)
    for indexes in text_support(sketch, [r.payload for r in batch]):
        np.add.at(counts, indexes, 1)
    return counts
