"""The shuffler's store as raw bytes: its files, where each envelope id lies in them, and how
close that order is to the order of arrival by chance alone (Kendall's tau under the null)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from math import sqrt
from pathlib import Path

from .row_order import Z_LIMIT


@contextlib.contextmanager
def memory_directory(fallback: Path) -> Iterator[Path]:
    """A directory in memory when the machine has one (/dev/shm), else ``fallback``: thousands
    of durable commits there cost no disk flush."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        yield fallback
        return
    with tempfile.TemporaryDirectory(dir=shm) as directory:
        yield Path(directory)


def store_files(path: Path) -> dict[str, bytes]:
    """The bytes of the store's file and of its ``-wal`` and ``-shm`` files that exist."""
    files = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        candidate = path.with_name(path.name + suffix)
        if candidate.exists():
            files[candidate.name] = candidate.read_bytes()
    return files


def physical_order(raw: bytes, ids: Sequence[str]) -> list[str]:
    """``ids`` in the order their first copy lies in ``raw``; every one must be there."""
    offsets = {}
    for envelope in ids:
        offset = raw.find(envelope.encode())
        assert offset >= 0, f"envelope id {envelope} is not in the file"
        offsets[envelope] = offset
    return sorted(ids, key=offsets.__getitem__)


def kendall_null_limit(n: int) -> float:
    """The largest |tau| chance gives between ``n`` items' two orders when one is uniformly
    random: ``Z_LIMIT`` standard deviations of tau's exact null distribution, whose mean is 0
    and variance 2(2n + 5) / (9n(n - 1)) (Kendall 1938)."""
    return Z_LIMIT * sqrt(2 * (2 * n + 5) / (9 * n * (n - 1)))
