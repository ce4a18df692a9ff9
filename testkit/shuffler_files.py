"""The shuffler's store as raw bytes: its files, where each envelope id lies in them, and how
close that order is to the order of arrival by chance alone (Kendall's tau under the null)."""

from __future__ import annotations

import base64
import contextlib
import random
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from math import sqrt
from pathlib import Path

from scipy import stats

from deniable.shuffler.store import BatchKey, Incoming

from .row_order import Z_LIMIT, neighbour_moments, same_device_neighbours

DEVICES = 300
"""Devices in the raw-file test and its benchmark, each sending one report of every key."""
KEYS = [BatchKey(f"metric_{i}", "krr", 1.0, f"{i:016x}", "f" * 16) for i in range(3)]
"""The batch keys those devices report under."""


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


def device_uploads(
    seed: int, devices: int, keys: Sequence[BatchKey]
) -> list[tuple[str, list[Incoming]]]:
    """Each device's one upload, in arrival order: one sealed report per batch key (seeded
    ids, pseudonyms and 240-byte ciphertexts)."""
    rng = random.Random(seed)
    return [
        (
            f"{rng.getrandbits(128):032x}",
            [
                Incoming(
                    f"{rng.getrandbits(128):032x}",
                    key,
                    "fedcba9876543210",
                    base64.b64encode(rng.randbytes(240)).decode(),
                )
                for key in keys
            ],
        )
        for _ in range(devices)
    ]


@dataclass(frozen=True)
class FileStatistics:
    """What the raw bytes of a store's files give away about ``arrived`` uploads: which files
    hold a pseudonym (or its first 12 hex digits), Kendall's tau between the envelope ids'
    physical and arrival orders, and how many physical neighbours came from one device."""

    pseudonyms_in: frozenset[str]
    tau: float
    neighbours: int


def file_statistics(path: Path, arrived: Sequence[tuple[str, list[Incoming]]]) -> FileStatistics:
    """The :class:`FileStatistics` of the store at ``path`` after ``arrived`` were stored."""
    files = store_files(path)
    holding = frozenset(
        name
        for name, raw in files.items()
        for device, _ in arrived
        if device.encode() in raw or device[:12].encode() in raw
    )
    arrival = [envelope.id for _, envelopes in arrived for envelope in envelopes]
    device_of = {e.id: d for d, (_, envelopes) in enumerate(arrived) for e in envelopes}
    order = physical_order(b"".join(files.values()), arrival)
    rank = {envelope: place for place, envelope in enumerate(order)}
    tau = stats.kendalltau(range(len(arrival)), [rank[e] for e in arrival]).statistic
    return FileStatistics(holding, float(tau), same_device_neighbours(order, device_of))


def neighbour_limit(devices: int, per_device: int) -> float:
    """The most same-device neighbours chance gives: its exact mean plus ``Z_LIMIT`` sd."""
    mean, variance = neighbour_moments(devices, per_device)
    return mean + Z_LIMIT * sqrt(variance)


def first_layout(path: Path, arrived: Sequence[tuple[str, list[Incoming]]]) -> sqlite3.Connection:
    """Store ``arrived`` as the shuffler's first layout did (a rowid table in arrival order,
    the pseudonym cleared by a plain UPDATE, no checkpoint): the control of the checks. Its
    connection, open (so its WAL is there to read); the caller closes it."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(
        "CREATE TABLE envelopes (id TEXT PRIMARY KEY, batch_key TEXT, device TEXT, key TEXT,"
        " sealed TEXT, batch TEXT, position INTEGER)"
    )
    for device, envelopes in arrived:
        connection.executemany(
            "INSERT INTO envelopes VALUES (?, ?, ?, ?, ?, NULL, NULL)",
            [(e.id, e.key.text(), device, e.sealing_key, e.sealed) for e in envelopes],
        )
    connection.execute("UPDATE envelopes SET device = NULL, batch = 'b'")
    return connection


def settle_first_layout(connection: sqlite3.Connection) -> None:
    """Clear the first layout's file as well as it can be without changing its table:
    checkpoint, zero freed space (``secure_delete`` and ``VACUUM``), truncate the WAL."""
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA secure_delete=ON")
    connection.execute("VACUUM")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
