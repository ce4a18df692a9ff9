"""``deniable retention --archive-to``: expired raw reports go to Parquet, are verified, then
leave the database; a run SIGKILLed in the middle and run again loses and doubles nothing."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deniable.client import MetricSpec
from deniable.collector import migrate
from deniable.collector.storage import count_reports, open_database
from deniable.collector.storage.engine import Database, normalize_url
from deniable.collector.storage.ingest import ValidReport, prepare_batch, store_batches
from deniable.collector.storage.queries import read_counts, register_spec
from deniable.collector.storage.tables import id_text
from deniable.estimators.archivefiles import FILE_NAME, MANIFEST_NAME, check_file, open_archive
from sqlalchemy import create_engine, text

from testkit import DatabaseFactory
from testkit.cli import run_cli

SPEC = MetricSpec.categorical("archived_kinds", ["a", "b", "c", "d"], epsilon=1.0, mechanism="krr")
OLD = ["2026-07-01", "2026-07-02", "2026-07-03", "2026-07-04"]
RECENT = dt.datetime.now(dt.UTC).date().isoformat()
PER_PERIOD = 300
BEFORE = "2026-08-01"


def _fill(database: Database) -> dict[str, set[str]]:
    """PER_PERIOD reports of SPEC in each OLD period and today; their ids by period."""
    register_spec(database, SPEC, dt.datetime.now(dt.UTC))
    ids: dict[str, set[str]] = {}
    for i, period in enumerate([*OLD, RECENT]):
        batch = [
            ValidReport(str(uuid.uuid4()), SPEC.name, period, (j * 7 + i) % 4)
            for j in range(PER_PERIOD)
        ]
        prepared = prepare_batch(batch, {SPEC.name: SPEC}, dt.date(2026, 7, 1))
        store_batches(database, [prepared])
        ids[period] = {r.id for r in batch}
    return ids


@pytest.fixture
def filled(databases: DatabaseFactory, backend: str) -> Iterator[tuple[str, dict[str, set[str]]]]:
    url = databases.new(backend)
    migrate(url)
    database = open_database(url)
    try:
        ids = _fill(database)
    finally:
        database.dispose()
    yield url, ids


def _archived_ids(root: Path) -> dict[str, list[str]]:
    """Every id in the archive under ``root``, by period (a list: doubles would show)."""
    fs, base = open_archive(str(root))
    found: dict[str, list[str]] = {}
    for path in sorted(fs.glob(f"{base}/metric=*/period=*/{FILE_NAME}")):
        period = path.split("period=")[1].split("/")[0]
        table = pq.read_table(path)
        found[period] = [id_text(raw) for raw in table.column("id").to_pylist()]
    return found


def _command(url: str, root: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from deniable.cli.entry import main; main()",
        "retention",
        "--archive-to",
        str(root),
        "--database",
        url,
        "--before",
        BEFORE,
    ]


class HeldLock:
    """Blocks the database's writers (the archive run's drop) while the block runs: PostgreSQL
    a share lock on ``reports`` (DETACH needs it exclusively), SQLite its write lock."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(normalize_url(url))
        self.connection = self.engine.connect()
        if self.engine.dialect.name == "postgresql":
            self.connection.execute(text("LOCK TABLE reports IN ACCESS SHARE MODE"))
        else:
            self.connection.exec_driver_sql("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.connection.rollback()
        self.connection.close()
        self.engine.dispose()


def test_a_sigkilled_archive_run_run_again_loses_and_doubles_nothing(
    filled: tuple[str, dict[str, set[str]]], tmp_path: Path
) -> None:
    """The first run is killed (SIGKILL) once it has archived a period and waits to drop it;
    a torn file is left where the next period goes; the second run finishes: every expired
    report is in the archive exactly once, none is left in the database, today's stay."""
    url, ids = filled
    root = tmp_path / "archive"
    lock = HeldLock(url)
    try:
        first = subprocess.Popen(
            _command(url, root),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert first.stderr is not None
        line = first.stderr.readline()
        assert line.startswith(f"archived {SPEC.name} {OLD[0]}"), line
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=60) == -signal.SIGKILL
    finally:
        lock.release()
    database = open_database(url)
    try:
        assert count_reports(database, SPEC.name, start=OLD[0], end=OLD[-1]) == 4 * PER_PERIOD
    finally:
        database.dispose()
    torn = root / f"metric={SPEC.name}" / f"period={OLD[1]}"
    torn.mkdir(parents=True, exist_ok=True)
    (torn / FILE_NAME).write_bytes(b"PAR1 torn in the middle")

    second = subprocess.run(
        [*_command(url, root)[:-2], "--before", BEFORE, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr
    run = json.loads(second.stdout)
    assert run["deleted"] == 4 * PER_PERIOD
    kept = {row["period"]: row["kept"] for row in run["archived"]}
    assert kept == {OLD[0]: True, OLD[1]: False, OLD[2]: False, OLD[3]: False}

    archived = _archived_ids(root)
    assert sorted(archived) == OLD
    for period in OLD:
        assert len(archived[period]) == PER_PERIOD
        assert set(archived[period]) == ids[period]
        manifest = json.loads(
            (root / f"metric={SPEC.name}" / f"period={period}" / MANIFEST_NAME).read_text()
        )
        fs, _ = open_archive(str(root))
        check = check_file(fs, str(root / f"metric={SPEC.name}" / f"period={period}" / FILE_NAME))
        assert (manifest["rows"], manifest["sha256"]) == (check.rows, check.sha256)
    database = open_database(url)
    try:
        assert count_reports(database, SPEC.name, start=None, end=None) == PER_PERIOD
        n, _ = read_counts(database, SPEC, OLD)
        assert n.tolist() == [PER_PERIOD] * 4
    finally:
        database.dispose()

    third = run_cli("retention", "--archive-to", str(root), "--database", url, "--before", BEFORE)
    assert third.exit_code == 0, third.output
    assert "archived 0 raw report(s)" in third.stdout
    assert _archived_ids(root) == archived


def test_a_period_still_accepting_reports_is_refused(
    filled: tuple[str, dict[str, set[str]]], tmp_path: Path
) -> None:
    url, _ = filled
    result = run_cli(
        "retention", "--archive-to", str(tmp_path), "--database", url, "--before", RECENT
    )
    assert result.exit_code != 0
    assert "--before must be on or before" in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir())


def test_help_tells_it_apart_from_retiring_a_metric() -> None:
    result = run_cli("retention", "--help")
    assert "--archive-to" in result.stdout
    assert "deniable metrics archive" in result.stdout
