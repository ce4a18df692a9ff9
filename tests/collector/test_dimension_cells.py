"""The cell counts of metrics with dimensions: migration 0007 leaves the totals alone, 0008
packs 0007's per-category ``cell_support`` rows into one row per cell losslessly both ways,
and ingestion counts each new report once in its cell (a resent one nowhere), one row per
touched cell, the metric's totals being the sum of its cells, with the raw report keeping its cell, which the export (API, CLI file) gives
back as the report's dims."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import numpy as np
import polars as pl
from sqlalchemy import create_engine, text

from deniable.client import MetricSpec
from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import read_cells, read_counts, register_spec
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from deniable.estimators import support_matrix
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    DatabaseFactory,
    FastRandomness,
    RunningCollector,
    collector_settings,
    make_reports,
    register,
)
from testkit.cli import run_cli
from tests.collector.test_migrations import (
    _downgrade,
    _rows,
    _tables,
    assert_schema_is_the_tables,
)

PERIOD = TEST_NOW.date().isoformat()
EARLIER = (TEST_NOW.date() - dt.timedelta(days=1)).isoformat()
PLATFORMS = {"platform": ["ios", "android"]}


def _register(url: str, *specs: MetricSpec) -> None:
    database = open_database(url)
    try:
        for spec in specs:
            register_spec(database, spec, dt.datetime.now(dt.UTC))
    finally:
        database.dispose()


def _store(url: str, specs: list[MetricSpec], *batches: list[ValidReport]) -> list[tuple[int, int]]:
    """Store ``batches`` as one group (one transaction); (accepted, duplicates) per batch."""
    by_name = {spec.name: spec for spec in specs}
    database = open_database(url)
    try:
        stored = store_batches(
            database, [prepare_batch(batch, by_name, TEST_NOW.date()) for batch in batches]
        )
    finally:
        database.dispose()
    return [(result.accepted, result.duplicates) for result in stored]


def _cells(url: str, spec: MetricSpec, periods: list[str]) -> dict[str, tuple[list[int], list]]:
    database = open_database(url)
    try:
        found = read_cells(database, spec, periods)
    finally:
        database.dispose()
    return {
        cell: (
            stats.n.tolist(),
            stats.total.tolist() if spec.type == "numeric" else stats.counts.tolist(),
        )
        for cell, stats in found.items()
    }


def _execute(url: str, statement: str, rows: list[dict]) -> None:
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as connection:
            connection.execute(text(statement), rows)
    finally:
        engine.dispose()


def test_migration_0007_leaves_the_totals_and_adds_empty_cells(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    migrate(url, "0006")
    _execute(
        url,
        "INSERT INTO period_counts (metric, period, n) VALUES (:m, :p, :n)",
        [{"m": "before_dimensions", "p": PERIOD, "n": 3}],
    )
    totals = text("SELECT metric, period, n FROM period_counts")
    migrate(url, "0007")
    assert _rows(url, totals) == [("before_dimensions", PERIOD, 3)]
    assert _rows(url, text("SELECT count(*) FROM cell_counts")) == [(0,)]
    _downgrade(url, "0006")
    assert "cell_counts" not in _tables(url) and "cell_support" not in _tables(url)
    assert _rows(url, totals) == [("before_dimensions", PERIOD, 3)]


SUPPORT_0007 = [
    ("split", PERIOD, "ios", 0, 7),
    ("split", PERIOD, "ios", 2, 4),
    ("split", PERIOD, "android", 1, 5),
    ("split", EARLIER, "other", 0, 1),
]
"""0007's cell support rows of a k = 3 oue metric: sparse (absent categories count 0), one
cell whose last category is absent (its packed vector is shorter than k)."""


def test_migration_0008_packs_the_cell_support_losslessly_both_ways(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    migrate(url, "0007")
    split = MetricSpec.categorical(
        "split", ["a", "b", "c"], epsilon=1.0, mechanism="oue", dimensions=PLATFORMS
    )
    mean = MetricSpec.numeric("mean", lower=0.0, upper=1.0, epsilon=1.0, dimensions=PLATFORMS)
    _register(url, split, mean)
    cells = [
        ("split", PERIOD, "ios", 9, 0.0, 0.0),
        ("split", PERIOD, "android", 5, 0.0, 0.0),
        ("split", EARLIER, "other", 2, 0.0, 0.0),
        ("mean", PERIOD, "ios", 2, 0.25, 0.125),
    ]
    _execute(
        url,
        "INSERT INTO cell_counts (metric, period, cell, n, total, total_squares)"
        " VALUES (:m, :p, :c, :n, :y, :y2)",
        [dict(zip(("m", "p", "c", "n", "y", "y2"), row, strict=True)) for row in cells],
    )
    _execute(
        url,
        "INSERT INTO cell_support (metric, period, cell, category, support)"
        " VALUES (:m, :p, :c, :v, :s)",
        [dict(zip(("m", "p", "c", "v", "s"), row, strict=True)) for row in SUPPORT_0007],
    )
    _execute(
        url,
        "INSERT INTO reports (id, metric, period, payload, received)"
        " VALUES (:id, 'mean', :p, '0.5', :r)",
        [{"id": str(uuid.uuid4()), "p": PERIOD, "r": TEST_NOW.date()}],
    )
    totals_0007 = [("split", PERIOD, 0, 7), ("split", PERIOD, 1, 5), ("split", PERIOD, 2, 4)]
    totals_0007 += [("split", EARLIER, 0, 1), ("plain", PERIOD, 1, 3)]
    _execute(
        url,
        "INSERT INTO support_counts (metric, period, category, support) VALUES (:m, :p, :v, :s)",
        [dict(zip(("m", "p", "v", "s"), row, strict=True)) for row in totals_0007],
    )
    support_totals = text(
        "SELECT metric, period, category, support FROM support_counts"
        " ORDER BY metric, period, category"
    )
    counts_0007 = text(
        "SELECT metric, period, cell, n, total, total_squares FROM cell_counts"
        " ORDER BY metric, period, cell"
    )
    before = _rows(url, counts_0007)

    migrate(url)
    assert_schema_is_the_tables(url)
    assert "cell_support" not in _tables(url)
    assert _rows(url, counts_0007) == before
    assert _cells(url, split, [EARLIER, PERIOD]) == {
        "ios": ([0, 9], [[0, 0, 0], [7, 0, 4]]),
        "android": ([0, 5], [[0, 0, 0], [0, 5, 0]]),
        "other": ([2, 0], [[1, 0, 0], [0, 0, 0]]),
    }
    assert _cells(url, mean, [PERIOD]) == {"ios": ([2], [0.25])}
    assert _rows(url, text("SELECT cell FROM reports")) == [("",)]
    assert _rows(url, support_totals) == [("plain", PERIOD, 1, 3)]

    _downgrade(url, "0007")
    support_0007 = text(
        "SELECT metric, period, cell, category, support FROM cell_support"
        " ORDER BY metric, period, cell, category"
    )
    assert _rows(url, support_0007) == sorted(SUPPORT_0007)
    assert _rows(url, support_totals) == sorted(totals_0007)
    assert _rows(url, counts_0007) == before
    migrate(url)
    assert _cells(url, split, [EARLIER, PERIOD])["ios"] == ([0, 9], [[0, 0, 0], [7, 0, 4]])


def test_each_new_report_counts_once_in_its_cell_and_its_raw_report_keeps_it(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    migrate(url)
    split = MetricSpec.categorical(
        "split", ["a", "b", "c"], epsilon=1.0, mechanism="oue", dimensions=PLATFORMS
    )
    mean = MetricSpec.numeric("mean", lower=0.0, upper=1.0, epsilon=1.0, dimensions=PLATFORMS)
    plain = MetricSpec.boolean("plain", epsilon=1.0)
    _register(url, split, mean, plain)
    source = FastRandomness(5)

    def report(cell: str, value: int, period: str = PERIOD) -> ValidReport:
        payload = split.randomizer.randomize(value, source)
        return ValidReport(str(uuid.uuid4()), split.name, period, payload, cell)

    first = [report("ios", 0), report("ios", 2), report("android", 1), report("other", 0)]
    second = [report("ios", 1), report("android", 1, EARLIER), first[1]]
    numbers = [ValidReport(str(uuid.uuid4()), mean.name, PERIOD, y, "ios") for y in (0.5, -0.25)]
    specs = [split, mean, plain]
    assert _store(url, specs, first, second + numbers) == [(4, 0), (4, 1)]
    assert _store(url, specs, [*first[:2], second[0], *numbers[:1]]) == [(0, 4)]
    late = [report("ios", 2), ValidReport(str(uuid.uuid4()), plain.name, PERIOD, 1)]
    assert _store(url, specs, [*late, first[0]]) == [(2, 1)]

    kept = [*first, *second[:2], late[0]]
    expected: dict[str, tuple[list[int], list]] = {}
    for cell in ("ios", "android", "other"):
        per_period = []
        for period in (EARLIER, PERIOD):
            mine = [r.payload for r in kept if r.cell == cell and r.period == period]
            counts = support_matrix(split.randomizer, mine).sum(axis=0) if mine else np.zeros(3)
            per_period.append((len(mine), counts.astype(int).tolist()))
        expected[cell] = ([n for n, _ in per_period], [c for _, c in per_period])
    assert _cells(url, split, [EARLIER, PERIOD]) == expected
    assert _cells(url, mean, [PERIOD]) == {"ios": ([2], [0.25])}
    assert _rows(url, text("SELECT n FROM period_counts WHERE metric = 'split' ORDER BY period"))[
        -1
    ] == (6,)
    assert _rows(url, text("SELECT count(*) FROM support_counts WHERE metric = 'split'")) == [(0,)]
    database = open_database(url)
    try:
        n, counts = read_counts(database, split, [EARLIER, PERIOD])
    finally:
        database.dispose()
    assert n.tolist() == [sum(cell[0][i] for cell in expected.values()) for i in (0, 1)]
    assert counts.tolist() == np.sum([cell[1] for cell in expected.values()], axis=0).tolist()
    stored_cells = _rows(url, text("SELECT metric, cell FROM reports ORDER BY metric, cell"))
    assert stored_cells == sorted([(r.metric, r.cell) for r in [*kept, *numbers]] + [("plain", "")])


def test_the_export_and_its_file_carry_each_reports_dims(
    databases: DatabaseFactory, backend: str, tmp_path: Path
) -> None:
    url = databases.new(backend)
    migrate(url)
    split = MetricSpec.categorical("split", ["a", "b", "c"], epsilon=1.0, dimensions=PLATFORMS)
    plain = MetricSpec.boolean("plain", epsilon=1.0)
    sent = make_reports(split, [0, 1, 2, 1], PERIOD, seed=8)
    for report, platform in zip(sent, ["ios", "android", "other", "ios"], strict=True):
        report["dims"] = {"platform": platform}
    plain_sent = make_reports(plain, [1, 0], PERIOD, seed=9)
    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin, server.client(INGEST_KEY) as uploader:
            register(admin, split)
            register(admin, plain)
            response = uploader.post("/v1/reports", json={"reports": sent + plain_sent})
            assert response.status_code == 202, response.text
            exported = admin.get(f"/v1/admin/metrics/{split.name}/reports").json()["reports"]
            plain_exported = admin.get(f"/v1/admin/metrics/{plain.name}/reports").json()
        path = tmp_path / "split.parquet"
        result = run_cli(
            "--collector",
            server.url,
            "--token",
            ADMIN_TOKEN,
            "export",
            split.name,
            "--output",
            str(path),
        )
        assert result.exit_code == 0, result.output
        from_database = tmp_path / "split.csv"
        result = run_cli("export", split.name, "--database", url, "--output", str(from_database))
        assert result.exit_code == 0, result.output
    finally:
        server.stop()
    expected = {r["id"]: r["dims"] for r in sent}
    assert {r["id"]: r["dims"] for r in exported} == expected
    assert [r["dims"] for r in plain_exported["reports"]] == [None, None]
    for frame in (pl.read_parquet(path), pl.read_csv(from_database)):
        assert dict(zip(frame["id"], frame["dim_platform"], strict=True)) == {
            key: dims["platform"] for key, dims in expected.items()
        }
