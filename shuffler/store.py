"""The shuffler's durable store: an SQLite file of sealed reports and the batches they form.

A sealed report moves through three states, each a committed row:

- **received**: ``batch`` is null; ``device`` holds the sender's pseudonym (so a batch takes at
  most one report per device);
- **batched**: ``batch`` and ``position`` (its place in the batch's shuffled order) are set and
  ``device`` is cleared: nothing links it to its sender any more;
- **forwarded**: the collector acknowledged its part; ``sealed`` is cleared and only the id is
  kept, so a resend of it is acknowledged as a duplicate and never forwarded twice.

Nothing else is stored: no address, no header, no time of arrival, no connection. Rows are
never read in the order they arrived (the primary key is the envelope id, a hash of the report
id). A batch row holds its key, its size, its parts and how many of them the collector has
acknowledged; parts go in order, so a crash resumes at the first unacknowledged one, and the
collector dedupes a part sent twice by report id.

The file runs in WAL mode with ``synchronous=FULL``: a commit is on disk before the device is
acknowledged.
"""

from __future__ import annotations

import json
import random
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS envelopes (
    id TEXT PRIMARY KEY,
    batch_key TEXT NOT NULL,
    device TEXT,
    key TEXT NOT NULL,
    sealed TEXT,
    batch TEXT,
    position INTEGER
);
CREATE INDEX IF NOT EXISTS envelopes_waiting ON envelopes (batch_key, device) WHERE batch IS NULL;
CREATE INDEX IF NOT EXISTS envelopes_batched ON envelopes (batch, position) WHERE batch IS NOT NULL;
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    batch_key TEXT NOT NULL,
    n INTEGER NOT NULL,
    parts INTEGER NOT NULL,
    per_part INTEGER NOT NULL,
    forwarded INTEGER NOT NULL DEFAULT 0
);
"""

PART_OVERHEAD = 40
"""Bytes of a forwarded part's body around each sealed report (its key id and JSON)."""

_RANDOM = secrets.SystemRandom()
"""The OS CSPRNG: a batch's order and which reports it takes."""


@dataclass(frozen=True)
class BatchKey:
    """What reports are batched by, in the clear in each envelope's header: the sealing key id
    too, so a batch only holds reports sealed to one key (:mod:`.keyset`)."""

    metric: str
    mechanism: str
    epsilon: float
    fingerprint: str
    sealing_key: str

    def text(self) -> str:
        """The key as stored (canonical JSON)."""
        fields = [self.metric, self.mechanism, self.epsilon, self.fingerprint, self.sealing_key]
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def of_text(cls, text: str) -> BatchKey:
        metric, mechanism, epsilon, fingerprint, *sealing_key = json.loads(text)
        return cls(metric, mechanism, float(epsilon), fingerprint, "".join(sealing_key))


@dataclass(frozen=True)
class Incoming:
    """One sealed report as a device sent it (validated)."""

    id: str
    key: BatchKey
    sealing_key: str
    sealed: str


@dataclass
class _Upload:
    """One upload's rows waiting for a group commit, and its outcome."""

    rows: list[tuple[str, str, str, str, str]]
    new: int = 0
    done: bool = False
    error: Exception | None = None


@dataclass(frozen=True)
class Batch:
    """A formed batch: its id, key, size, parts and how many parts were acknowledged."""

    id: str
    key: BatchKey
    n: int
    parts: int
    per_part: int
    forwarded: int


class Store:
    """The shuffler's SQLite file; every method is one transaction (thread-safe).

    ``rng`` draws each batch's order and, when more devices wait than a batch takes, which of
    them it takes: the OS CSPRNG (``secrets.SystemRandom``) unless a test injects a seeded
    generator to check the order's distribution reproducibly."""

    def __init__(self, path: Path, rng: random.Random | None = None) -> None:
        self.path = path
        self._rng = rng or _RANDOM
        """The OS CSPRNG; a seeded generator for tests of the order's distribution only."""
        self._connection = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30
        )
        self._lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending: list[_Upload] = []
        with self._lock:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=FULL")
            self._connection.executescript(SCHEMA)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            connection = self._connection
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def receive(self, device: str, envelopes: Sequence[Incoming]) -> tuple[int, int]:
        """Store a device's sealed reports (durably, before this returns); (new, duplicates):
        a report whose id is already stored, in any state, is a duplicate and changes nothing.

        Group commit: uploads that arrive while another commits wait for the write lock and
        are then committed together by the first of them, one disk flush for all; each is
        answered only after the commit that holds it."""
        rows = [
            (e.id, e.key.text(), device, e.sealing_key, e.sealed) for e in dict.fromkeys(envelopes)
        ]
        job = _Upload(rows)
        with self._pending_lock:
            self._pending.append(job)
        with self._lock:
            if not job.done:
                with self._pending_lock:
                    group, self._pending = self._pending, []
                self._commit(group)
        if job.error is not None:
            raise job.error
        return job.new, len(envelopes) - job.new

    def _commit(self, group: list[_Upload]) -> None:
        """Insert every upload of ``group`` in one transaction (under the write lock)."""
        connection = self._connection
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for upload in group:
                    before = connection.total_changes
                    connection.executemany(
                        "INSERT OR IGNORE INTO envelopes (id, batch_key, device, key, sealed)"
                        " VALUES (?, ?, ?, ?, ?)",
                        upload.rows,
                    )
                    upload.new = connection.total_changes - before
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        except Exception as exc:
            for upload in group:
                upload.error = exc
        for upload in group:
            upload.done = True

    def waiting_keys(self, min_batch: int) -> list[BatchKey]:
        """The batch keys whose received reports come from at least ``min_batch`` devices."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT batch_key FROM envelopes WHERE batch IS NULL"
                " GROUP BY batch_key HAVING COUNT(DISTINCT device) >= ?",
                (min_batch,),
            ).fetchall()
        return [BatchKey.of_text(row[0]) for row in rows]

    def form_batch(
        self, key: BatchKey, min_batch: int, max_batch: int, max_part: int, part_bytes: int
    ) -> Batch | None:
        """Form one batch of ``key``: one received report of each of at most ``max_batch``
        devices (chosen uniformly at random when more wait), in a uniformly random order from
        the OS CSPRNG; None if fewer than ``min_batch`` devices wait. One transaction: the
        reports are batched (their device cleared) and the batch recorded together. Its parts
        hold at most ``max_part`` reports and about ``part_bytes`` bytes of body each."""
        with self._transaction() as connection:
            rows = connection.execute(
                "SELECT device, id, LENGTH(sealed) FROM envelopes"
                " WHERE batch IS NULL AND batch_key = ?",
                (key.text(),),
            ).fetchall()
            one_each: dict[str, str] = {}
            longest = 1
            for device, envelope, length in rows:
                longest = max(longest, length)
                if device not in one_each or envelope < one_each[device]:
                    one_each[device] = envelope
            if len(one_each) < min_batch:
                return None
            chosen = list(one_each.values())
            if len(chosen) > max_batch:
                chosen = self._rng.sample(chosen, max_batch)
            self._rng.shuffle(chosen)
            per_part = max(1, min(max_part, part_bytes // (longest + PART_OVERHEAD)))
            batch = Batch(
                secrets.token_hex(16), key, len(chosen), -(-len(chosen) // per_part), per_part, 0
            )
            connection.executemany(
                "UPDATE envelopes SET batch = ?, position = ?, device = NULL WHERE id = ?",
                [(batch.id, position, envelope) for position, envelope in enumerate(chosen)],
            )
            connection.execute(
                "INSERT INTO batches (id, batch_key, n, parts, per_part, forwarded)"
                " VALUES (?, ?, ?, ?, ?, 0)",
                (batch.id, key.text(), batch.n, batch.parts, batch.per_part),
            )
        return batch

    def unfinished(self) -> list[Batch]:
        """The batches with parts not yet acknowledged by the collector."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT id, batch_key, n, parts, per_part, forwarded FROM batches"
                " WHERE forwarded < parts"
            ).fetchall()
        return [Batch(r[0], BatchKey.of_text(r[1]), r[2], r[3], r[4], r[5]) for r in rows]

    def part(self, batch: Batch, part: int) -> list[tuple[str, str]]:
        """(sealing key id, sealed) of the reports of ``part``, in the batch's shuffled order."""
        first = part * batch.per_part
        with self._lock:
            return self._connection.execute(
                "SELECT key, sealed FROM envelopes WHERE batch = ? AND position >= ?"
                " AND position < ? ORDER BY position",
                (batch.id, first, first + batch.per_part),
            ).fetchall()

    def acknowledged(self, batch: Batch, part: int) -> None:
        """The collector stored ``part``: its reports become forwarded (ciphertext dropped)."""
        first = part * batch.per_part
        with self._transaction() as connection:
            connection.execute(
                "UPDATE envelopes SET sealed = NULL WHERE batch = ? AND position >= ?"
                " AND position < ?",
                (batch.id, first, first + batch.per_part),
            )
            connection.execute(
                "UPDATE batches SET forwarded = MAX(forwarded, ?) WHERE id = ?",
                (part + 1, batch.id),
            )

    def counts(self) -> dict[str, int]:
        """How many reports are received, batched and forwarded, and how many batches."""
        with self._lock:
            received, batched, forwarded = self._connection.execute(
                "SELECT SUM(batch IS NULL), SUM(batch IS NOT NULL AND sealed IS NOT NULL),"
                " SUM(batch IS NOT NULL AND sealed IS NULL) FROM envelopes"
            ).fetchone()
            batches = self._connection.execute("SELECT COUNT(*) FROM batches").fetchone()[0]
        return {
            "received": received or 0,
            "batched": batched or 0,
            "forwarded": forwarded or 0,
            "batches": batches,
        }

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._connection.close()
