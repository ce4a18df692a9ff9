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
from sqlalchemy import create_engine, select, text

from deniable.client import MetricSpec
from deniable.collector import migrate
from deniable.collector.storage import count_reports, open_database
from deniable.collector.storage.archive import Archive
from deniable.collector.storage.engine import Database, normalize_url
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import read_counts, register_spec, report_pages
from deniable.collector.storage.retention import retain
from deniable.collector.storage.tables import id_bytes, id_text, reports
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from deniable.sources.archivefiles import (
    FILE_NAME,
    MANIFEST_NAME,
    ArchiveLink,
    Digest,
    EphemeralArchive,
    check_file,
    open_archive,
    open_for_writing,
    partition_dir,
)
from testkit import DatabaseFactory
from testkit.archive_digest import groups_reference
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


def _stored(url: str) -> int:
    database = open_database(url)
    try:
        return count_reports(database, SPEC.name, start=None, end=None)
    finally:
        database.dispose()


def test_a_memory_target_is_refused_before_anything_is_dropped(
    filled: tuple[str, dict[str, set[str]]],
) -> None:
    """fsspec's memory filesystem dies with the command: archiving there and dropping would
    lose every report, so the run stops, on one line, and the database keeps them all."""
    url, _ = filled
    result = run_cli("retention", "--archive-to", "memory://deniable", "--database", url)
    assert result.exit_code != 0
    assert "memory:// is not a durable store" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert _stored(url) == 5 * PER_PERIOD


@pytest.mark.parametrize(
    "target",
    [
        "memory://deniable",
        "simplecache::memory://deniable",
        "dir::memory://deniable",
        "filecache::file://{root}",
        "simplecache::file://{root}",
        "blockcache::file://{root}",
    ],
)
def test_targets_that_do_not_outlive_the_process_are_refused(target: str, tmp_path: Path) -> None:
    url = target.format(root=tmp_path)
    with pytest.raises(EphemeralArchive, match="is not a durable store"):
        Archive(url)
    assert not any(tmp_path.iterdir())


def _plant(root: Path, kind: str, victim: Path) -> None:
    """A symbolic link to ``victim`` where the archive of the first OLD period writes."""
    directory = root / f"metric={SPEC.name}" / f"period={OLD[0]}"
    if kind == "directory":
        (root / f"metric={SPEC.name}").mkdir(parents=True)
        directory.symlink_to(victim.parent, target_is_directory=True)
        return
    directory.mkdir(parents=True)
    name = {"partial": FILE_NAME + ".partial", "file": FILE_NAME, "manifest": MANIFEST_NAME}
    (directory / name[kind]).symlink_to(victim)


@pytest.mark.parametrize("kind", ["partial", "file", "manifest", "directory"])
def test_planted_links_are_refused_and_their_targets_kept(
    filled: tuple[str, dict[str, set[str]]], tmp_path: Path, kind: str
) -> None:
    """A link planted as ``reports.parquet.partial``, ``reports.parquet``, ``manifest.json`` or
    a partition directory is refused: its target keeps its bytes, nothing is dropped."""
    url, _ = filled
    victim = tmp_path / "elsewhere" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("not the archiver's to overwrite")
    root = tmp_path / "archive"
    _plant(root, kind, victim)
    database = open_database(url)
    try:
        with pytest.raises(ArchiveLink, match="is a symbolic link"):
            retain(database, [SPEC], dt.date.fromisoformat(BEFORE), archive=Archive(str(root)))
    finally:
        database.dispose()
    assert victim.read_text() == "not the archiver's to overwrite"
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]
    assert _stored(url) == 5 * PER_PERIOD


@pytest.mark.parametrize("kind", ["manifest", "directory"])
def test_links_under_a_dir_layer_are_refused_too(
    filled: tuple[str, dict[str, set[str]]], tmp_path: Path, kind: str
) -> None:
    """``dir::file:///...`` wraps the local filesystem: the link checks and O_NOFOLLOW look
    through the layer to the local path it writes (issue 38: only the outermost filesystem
    was looked at, so a link under ``dir::`` was written through)."""
    url, _ = filled
    victim = tmp_path / "elsewhere" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("not the archiver's to overwrite")
    target = f"dir::file://{tmp_path / 'archive'}"
    fs, root = open_archive(target)
    written = os.path.normpath(fs._join(root))  # where the layer puts the archive on disk
    assert written.startswith(str(tmp_path / "archive"))
    _plant(Path(written), kind, victim)
    database = open_database(url)
    try:
        with pytest.raises(ArchiveLink, match="is a symbolic link"):
            retain(database, [SPEC], dt.date.fromisoformat(BEFORE), archive=Archive(target))
    finally:
        database.dispose()
    assert victim.read_text() == "not the archiver's to overwrite"
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]
    assert _stored(url) == 5 * PER_PERIOD


def test_a_link_planted_after_the_check_is_not_written_through(tmp_path: Path) -> None:
    """The files are opened with O_NOFOLLOW: a link that appears between the check and the
    open is refused, its target untouched."""
    victim = tmp_path / "precious.txt"
    victim.write_text("kept")
    link = tmp_path / "manifest.json"
    link.symlink_to(victim)
    fs, _ = open_archive(str(tmp_path))
    with pytest.raises(ArchiveLink):
        open_for_writing(fs, str(link), "w")
    assert victim.read_text() == "kept"


def test_the_checksum_is_the_pinned_digest_of_the_database_rows(
    filled: tuple[str, dict[str, set[str]]], tmp_path: Path
) -> None:
    """The manifest's checksum (hashed on Arrow columns as the rows are written) is the
    pinned one: :class:`Digest` of the period's rows as the export reads them (id text, payload,
    received, cell), in id order, on both engines; its groups' checksums (a krr metric's) are
    the reference's over their payloads, and over their cells and payloads."""
    url, _ = filled
    database = open_database(url)
    try:
        expected, counted, rows_of = {}, {}, {}
        for period in OLD:
            digest = Digest()
            rows_of[period] = []
            for rows in report_pages(database, SPEC.name, start=period, end=period, size=128):
                rows_of[period] += rows
                received = _received(database, period)
                digest.update(
                    [id_bytes(row[0]) for row in rows],
                    [row[2] for row in rows],
                    [received] * len(rows),
                    [row[3] for row in rows],
                )
            expected[period] = (digest.rows, digest.hexdigest())
            payloads = [row[2] for row in rows_of[period]]
            counted[period] = {
                "groups_sha256": groups_reference(payloads),
                "cell_groups_sha256": groups_reference(
                    payloads, [row[3] for row in rows_of[period]]
                ),
            }
        archive = Archive(str(tmp_path))
        for period in OLD:
            stored = archive.store(database, SPEC, period)
            assert (stored.rows, stored.sha256) == expected[period]
            assert not stored.kept
            manifest = Path(partition_dir(str(tmp_path), SPEC.name, period)) / MANIFEST_NAME
            written = json.loads(manifest.read_text())
            assert {key: written.get(key) for key in counted[period]} == counted[period]
            again = archive.store(database, SPEC, period)
            assert again.kept and (again.rows, again.sha256) == expected[period]
    finally:
        database.dispose()


def _received(database: Database, period: str) -> str:
    """The one received date (ISO) of the period's reports (``_fill`` stores each batch on one
    day)."""
    with database.reader.connect() as connection:
        days = connection.execute(
            select(reports.c.received).where(reports.c.period == period).distinct()
        ).all()
    [(day,)] = days
    return day.isoformat()
