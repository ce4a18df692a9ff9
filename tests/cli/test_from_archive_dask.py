"""``deniable estimate --from-archive --engine dask``: the re-analysis on a Dask cluster (a
LocalCluster of two worker processes, reached by its scheduler's address as any cluster would
be) gives the online estimates too, and the embedded engine's counts file by file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit import DatabaseFactory
from testkit.cli import run_cli

from .test_from_archive import PER_PERIOD, PERIODS, SPECS, _cli_args, assert_same, build_archive

pytestmark = pytest.mark.dask

KEYS = ["arch_oue", "arch_mean", "arch_hist", "arch_text candidates"]


@pytest.fixture(scope="module")
def sqlite_archive(
    databases: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path]:
    """The archive of test_from_archive's metrics, built from SQLite (the engines read files:
    the database they came from does not matter), and the online documents."""
    return build_archive(databases.new("sqlite"), tmp_path_factory.mktemp("archive"))


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    from dask.distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=True
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def test_dask_gives_the_online_estimates(
    sqlite_archive: tuple[dict[str, Any], Path], scheduler: str
) -> None:
    online, root = sqlite_archive
    for key in KEYS:
        result = run_cli(
            *_cli_args(key),
            "--from-archive",
            str(root),
            "--engine",
            "dask",
            "--scheduler",
            scheduler,
            "--format",
            "json",
        )
        assert result.exit_code == 0, result.output
        assert_same(online[key], json.loads(result.stdout), key)


def test_dask_counts_equal_the_embedded_counts_file_by_file(
    sqlite_archive: tuple[dict[str, Any], Path], scheduler: str
) -> None:
    from deniable.sources.archivecounts import archive_counts
    from deniable.sources.archivedask import dask_counts

    _, root = sqlite_archive
    spec = next(s for s in SPECS if s.name == "arch_olh")
    embedded = archive_counts(str(root), spec, PERIODS)
    distributed = dask_counts(str(root), spec, PERIODS, scheduler=scheduler)
    assert [f.period for f in distributed] == PERIODS
    for a, b in zip(embedded, distributed, strict=True):
        assert a.whole.n == b.whole.n == PER_PERIOD
        assert a.whole.support.tolist() == b.whole.support.tolist()  # type: ignore[union-attr]


def test_without_a_scheduler_it_starts_a_local_cluster(
    sqlite_archive: tuple[dict[str, Any], Path],
) -> None:
    online, root = sqlite_archive
    result = run_cli(
        *_cli_args("arch_krr"), "--from-archive", str(root), "--engine", "dask", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    assert_same(online["arch_krr"], json.loads(result.stdout))
