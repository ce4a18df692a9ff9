"""Fixtures of the shuffler's tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from deniable.collector.sealingkeys import generate
from testkit import VIEWER_TOKEN, DatabaseFactory, RunningCollector, collector_settings
from testkit.shuffler_files import memory_directory
from testkit.shuffler_process import SHUFFLER_TOKEN

MIN_BATCH = 3
"""The collector's minimum batch in the route tests (``DENIABLE_SHUFFLE_MIN_BATCH``)."""


@pytest.fixture
def memory_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory in memory when the machine has one (/dev/shm)."""
    with memory_directory(tmp_path) as directory:
        yield directory


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    """A fresh sealing keys file."""
    path = tmp_path / "keys.json"
    generate(path, dt.datetime.now(dt.UTC))
    return path


@pytest.fixture
def any_server(
    backend: str, databases: DatabaseFactory, keys_file: Path
) -> Iterator[RunningCollector]:
    """A collector with sealing keys, a shuffler token and a viewer token, on each backend
    (SQLite, PostgreSQL)."""
    settings = collector_settings(
        databases.new(backend),
        shuffler_token=SHUFFLER_TOKEN,
        sealing_keys_file=keys_file,
        shuffle_min_batch=MIN_BATCH,
        viewer_token=VIEWER_TOKEN,
    )
    running = RunningCollector(settings).start()
    yield running
    running.stop()
