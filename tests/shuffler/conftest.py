"""Fixtures of the shuffler's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.shuffler_files import memory_directory


@pytest.fixture
def memory_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory in memory when the machine has one (/dev/shm)."""
    with memory_directory(tmp_path) as directory:
        yield directory
