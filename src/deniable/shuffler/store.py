"""The shuffler's durable store: an SQLite file of sealed reports and the batches they form.

A sealed report moves through three states, each a committed row:

- **received**: ``batch`` is null; ``device`` holds the sender's pseudonym (so a batch takes at
  most one report per device) and ``expires`` the hour after which it is deleted unbatched;
- **batched**: ``batch`` and ``position`` (its place in the batch's shuffled order) are set;
  ``device`` and ``expires`` are cleared: nothing links it to its sender any more;
- **forwarded**: the collector acknowledged its part; its ciphertext, header and place are
  cleared and only its id, batch and an ``expires`` hour are kept, so a resend within
  ``max_wait`` is acknowledged as a duplicate and never forwarded twice.

Nothing else is stored: no address, no header, no time of arrival finer than the hour its
expiry rounds to, no connection. Nothing orders the rows by arrival: ``envelopes`` is a
``WITHOUT ROWID`` table, a B-tree in the order of the envelope id (a SHA-256 of the report
id), so the file lays rows out by a hash, never by when they came. Clearing is durable:
``secure_delete`` overwrites every cleared cell and freed page with zeros, and after every
batch formed, part acknowledged and expiry the WAL is checkpointed and truncated to nothing,
so no earlier version of a page (with a pseudonym in it) survives in either file.

Bounds (refused whole, nothing written): a pseudonym has at most ``device_waiting`` reports
waiting (429), and an upload that would take the file's used pages past ``max_bytes`` is
rolled back (507). Waiting reports and forwarded ids expire after ``max_wait_hours``; so does a
batch the collector refused (a final 4xx: an unregistered metric, a header that is not the
spec, a batch below its minimum), counted from the hour of its first refusal (``refused``, the
only time a batch row holds): until then it is tried again (a metric may be registered late),
after it its reports are deleted. A batch held up by a collector that is down (5xx, network
errors) is never refused, so it never expires.

The file runs in WAL mode with ``synchronous=FULL``: a commit is on disk before the device is
acknowledged.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from deniable.client.errors import DeniableError

SCHEMA = """
CREATE TABLE IF NOT EXISTS envelopes (
    id TEXT PRIMARY KEY,
    batch_key TEXT,
    device TEXT,
    key TEXT,
    sealed TEXT,
    expires INTEGER,
    batch TEXT,
    position INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS envelopes_waiting ON envelopes (batch_key, device) WHERE batch IS NULL;
CREATE INDEX IF NOT EXISTS envelopes_device ON envelopes (device) WHERE batch IS NULL;
CREATE INDEX IF NOT EXISTS envelopes_batched ON envelopes (batch, position)
    WHERE position IS NOT NULL;
CREATE INDEX IF NOT EXISTS envelopes_expiry ON envelopes (expires) WHERE expires IS NOT NULL;
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    batch_key TEXT NOT NULL,
    n INTEGER NOT NULL,
    parts INTEGER NOT NULL,
    per_part INTEGER NOT NULL,
    forwarded INTEGER NOT NULL DEFAULT 0,
    refused INTEGER
);
"""

PART_OVERHEAD = 40
"""Bytes of a forwarded part's body around each sealed report (its key id and JSON)."""

HOUR = 3600
"""Expiry is kept in whole hours: the only time a row holds, and no finer than that."""

CACHE_KIB = 65_536
"""The page cache (KiB): the rows of a batch lie spread over the file by their hashed ids, so
forming or acknowledging one dirties pages all over it; a cache that holds them keeps SQLite
from spilling and reading them back within the transaction."""

WAL_LIMIT = 8 << 20
"""Bytes the WAL is cut back to after SQLite's automatic checkpoints between batches (each
batch truncates it to nothing)."""

_RANDOM = secrets.SystemRandom()
"""The OS CSPRNG: a batch's order and which reports it takes."""


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LimitReached(DeniableError):
    """An upload refused whole because storing it would pass one of the store's bounds; the
    HTTP status to answer (429 for a pseudonym's bound, 507 for the file's) and a detail
    naming the setting."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    """The store's bounds (the shuffler's settings of the same names)."""

    max_bytes: int = 1 << 30
    """The most bytes of pages in use in the file: an upload past it is refused (507)."""
    device_waiting: int = 1000
    """The most reports one pseudonym may have waiting for a batch (429 past it)."""
    max_wait_hours: int = 168
    """Hours a report waits for a batch before it is deleted unsent; also how long a forwarded
    report's id is kept to recognise a resend."""


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

    device: str
    rows: list[tuple[str, str, str, str, str]]
    new: int = 0
    done: bool = False
    error: Exception | None = None


@dataclass
class _Acknowledgement:
    """One acknowledged part waiting for a group commit, and its outcome."""

    batch: Batch
    part: int
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
    generator to check the order's distribution reproducibly. ``clock`` is the time expiry
    reads (a test's settable clock, else UTC now)."""

    def __init__(
        self,
        path: Path,
        rng: random.Random | None = None,
        *,
        limits: Limits | None = None,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.path = path
        self.limits = limits or Limits()
        self._rng = rng or _RANDOM
        """The OS CSPRNG; a seeded generator for tests of the order's distribution only."""
        self._clock = clock or _utc_now
        self._connection = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30
        )
        self._lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending: list[_Upload] = []
        self._acks: list[_Acknowledgement] = []
        self._unsettled = False
        with self._lock:
            connection = self._connection
            connection.execute("PRAGMA secure_delete=ON")
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            connection.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
            connection.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            _migrate(connection, self._expiry())
            connection.executescript(SCHEMA)
            _add_refused(connection)
            _widen_batch_keys(connection)
            self._settle()
            self._page_size = connection.execute("PRAGMA page_size").fetchone()[0]

    def _expiry(self) -> int:
        """The hour (since the epoch) a row stamped now expires at: ``max_wait_hours`` from
        now, rounded up, so it is kept at least that long and deleted within the hour after."""
        later = self._clock().timestamp() + self.limits.max_wait_hours * HOUR
        return math.ceil(later / HOUR)

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

    def _settle(self) -> None:
        """Checkpoint the WAL into the file and truncate it to nothing (under the lock), so the
        page versions a clearing replaced are gone from both files; retried by :meth:`settle`
        when a reader kept it from finishing."""
        busy, _, _ = self._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        self._unsettled = busy != 0

    def settle(self) -> None:
        """Finish a checkpoint an earlier clearing could not (a reader had the file open)."""
        with self._lock:
            if self._unsettled:
                self._settle()

    def receive(self, device: str, envelopes: Sequence[Incoming]) -> tuple[int, int]:
        """Store a device's sealed reports (durably, before this returns); (new, duplicates):
        a report whose id is already stored, in any state, is a duplicate and changes nothing.
        :class:`LimitReached` if the upload would pass a bound (then nothing of it is stored).

        Group commit: uploads that arrive while another commits wait for the write lock and
        are then committed together by the first of them, one disk flush for all; each is
        answered only after the commit that holds it."""
        expires = self._expiry()
        rows = [
            (e.id, e.key.text(), device, e.sealing_key, e.sealed, expires)
            for e in dict.fromkeys(envelopes)
        ]
        job = _Upload(device, rows)
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

    def _used_bytes(self, connection: sqlite3.Connection) -> int:
        """Bytes of the file's pages in use (free pages are reused before the file grows)."""
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        return (pages - free) * self._page_size

    def _insert(self, connection: sqlite3.Connection, upload: _Upload) -> None:
        """Insert one upload inside the group's transaction, or none of it past a bound."""
        limits = self.limits
        (waiting,) = connection.execute(
            "SELECT COUNT(*) FROM envelopes WHERE batch IS NULL AND device = ?", (upload.device,)
        ).fetchone()
        connection.execute("SAVEPOINT upload")
        before = connection.total_changes
        connection.executemany(
            "INSERT OR IGNORE INTO envelopes (id, batch_key, device, key, sealed, expires)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            upload.rows,
        )
        upload.new = connection.total_changes - before
        refusal = None
        if waiting + upload.new > limits.device_waiting:
            refusal = LimitReached(
                429,
                f"a device has at most {limits.device_waiting} reports waiting for a batch"
                f" (DENIABLE_SHUFFLER_DEVICE_WAITING); it has {waiting}: send these later",
            )
        elif upload.new and self._used_bytes(connection) > limits.max_bytes:
            refusal = LimitReached(
                507,
                f"the shuffler's store is full (DENIABLE_SHUFFLER_MAX_BYTES,"
                f" {limits.max_bytes} bytes): send these later",
            )
        if refusal is not None:
            connection.execute("ROLLBACK TO upload")
            upload.new = 0
            upload.error = refusal
        connection.execute("RELEASE upload")

    def _commit(self, group: list[_Upload]) -> None:
        """Insert every upload of ``group`` in one transaction (under the write lock)."""
        connection = self._connection
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for upload in group:
                    self._insert(connection, upload)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        except Exception as exc:
            for upload in group:
                upload.error = exc
                upload.new = 0
        for upload in group:
            upload.done = True

    def waiting_keys(self, min_batch: int) -> list[BatchKey]:
        """The batch keys whose received reports come from at least ``min_batch`` devices."""
        with self._lock:
            return waiting_keys_of(self._connection, min_batch)

    def form_batch(
        self, key: BatchKey, min_batch: int, max_batch: int, max_part: int, part_bytes: int
    ) -> Batch | None:
        """Form one batch of ``key``: one received report of each of at most ``max_batch``
        devices (chosen uniformly at random when more wait), in a uniformly random order from
        the OS CSPRNG; None if fewer than ``min_batch`` devices wait (:meth:`form_batches`
        for one batch of one key)."""
        formed, _ = self.form_batches([key], min_batch, max_batch, max_part, part_bytes, 1)
        return formed[0] if formed else None

    def form_batches(
        self,
        keys: Sequence[BatchKey],
        min_batch: int,
        max_batch: int,
        max_part: int,
        part_bytes: int,
        limit: int,
    ) -> tuple[list[Batch], list[BatchKey]]:
        """Form up to ``limit`` batches of ``keys``, in order (a key as many times as it has
        ``min_batch`` devices waiting), each as :meth:`form_batch` forms one, all in one
        transaction; then the WAL is checkpointed and truncated once. Returns the batches and
        the keys that may form more (the first of them the key formed last, if any). Its
        parts hold at most ``max_part`` reports and about ``part_bytes`` bytes of body each."""
        formed: list[Batch] = []
        left = list(keys)
        with self._transaction() as connection:
            while left and len(formed) < limit:
                batch = self._form(connection, left[0], min_batch, max_batch, max_part, part_bytes)
                if batch is None:
                    left.pop(0)
                else:
                    formed.append(batch)
        if formed:
            self.settle_now()
        return formed, left

    def _form(
        self,
        connection: sqlite3.Connection,
        key: BatchKey,
        min_batch: int,
        max_batch: int,
        max_part: int,
        part_bytes: int,
    ) -> Batch | None:
        """Form one batch of ``key`` in ``connection``'s transaction (:meth:`form_batch`):
        its reports batched (their device and expiry cleared) and the batch recorded."""
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
            "UPDATE envelopes SET batch = ?, position = ?, device = NULL, expires = NULL"
            " WHERE id = ?",
            [(batch.id, position, envelope) for position, envelope in enumerate(chosen)],
        )
        connection.execute(
            "INSERT INTO batches (id, batch_key, n, parts, per_part, forwarded)"
            " VALUES (?, ?, ?, ?, ?, 0)",
            (batch.id, key.text(), batch.n, batch.parts, batch.per_part),
        )
        return batch

    def settle_now(self) -> None:
        """Checkpoint and truncate the WAL now (after a commit that cleared something)."""
        with self._lock:
            self._settle()

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
        """The collector stored ``part``: its reports become forwarded (ciphertext, header and
        place dropped; the id kept until its expiry hour), then the WAL is truncated, before
        this returns.

        Group commit, as :meth:`receive`: parts acknowledged while another commits are
        committed together by the first of them, one flush and one truncation for all."""
        job = _Acknowledgement(batch, part)
        with self._pending_lock:
            self._acks.append(job)
        with self._lock:
            if not job.done:
                with self._pending_lock:
                    group, self._acks = self._acks, []
                self._acknowledge(group)
        if job.error is not None:
            raise job.error

    def _acknowledge(self, group: list[_Acknowledgement]) -> None:
        """Mark every part of ``group`` forwarded in one transaction, then truncate the WAL
        (under the write lock)."""
        connection = self._connection
        expires = self._expiry()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for job in group:
                    first = job.part * job.batch.per_part
                    connection.execute(
                        "UPDATE envelopes SET sealed = NULL, batch_key = NULL, key = NULL,"
                        " position = NULL, expires = ? WHERE batch = ? AND position >= ?"
                        " AND position < ?",
                        (expires, job.batch.id, first, first + job.batch.per_part),
                    )
                    connection.execute(
                        "UPDATE batches SET forwarded = MAX(forwarded, ?) WHERE id = ?",
                        (job.part + 1, job.batch.id),
                    )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            self._settle()
        except Exception as exc:
            for job in group:
                job.error = exc
        for job in group:
            job.done = True

    def expire(self) -> int:
        """Delete the waiting reports and forwarded ids whose expiry hour has come (a batched
        report never expires: it is on its way); how many were deleted."""
        with self._transaction() as connection:
            deleted = connection.execute(
                "DELETE FROM envelopes WHERE expires IS NOT NULL AND expires <= ?",
                (math.floor(self._clock().timestamp() / HOUR),),
            ).rowcount
        if deleted:
            self.settle_now()
        return deleted

    def refused(self, batch: Batch) -> None:
        """The collector refused a part of ``batch`` for good: record the hour of its first
        refusal (rounded up, so it is kept at least ``max_wait_hours`` from then)."""
        with self._transaction() as connection:
            connection.execute(
                "UPDATE batches SET refused = ? WHERE id = ? AND refused IS NULL",
                (math.ceil(self._clock().timestamp() / HOUR), batch.id),
            )

    def expire_refused(self) -> list[tuple[BatchKey, int]]:
        """Delete the batches first refused ``max_wait_hours`` ago or more, and their reports
        not yet forwarded (ids of parts acknowledged before stay until their own expiry), then
        truncate the WAL; (key, reports deleted) of each batch deleted."""
        hour = math.floor(self._clock().timestamp() / HOUR)
        dropped = []
        with self._transaction() as connection:
            rows = connection.execute(
                "SELECT id, batch_key FROM batches WHERE refused IS NOT NULL AND refused <= ?",
                (hour - self.limits.max_wait_hours,),
            ).fetchall()
            for batch, key in rows:
                reports = connection.execute(
                    "DELETE FROM envelopes WHERE batch = ? AND sealed IS NOT NULL", (batch,)
                ).rowcount
                connection.execute("DELETE FROM batches WHERE id = ?", (batch,))
                dropped.append((BatchKey.of_text(key), reports))
        if dropped:
            self.settle_now()
        return dropped

    def counts(self) -> dict[str, int]:
        """How many reports are received, batched and forwarded, and how many batches."""
        with self._lock:
            return counts_of(self._connection)

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._connection.close()


def _migrate(connection: sqlite3.Connection, expires: int) -> None:
    """Move a file of the first layout (a rowid table in arrival order, no expiry) into the
    hash-ordered table: waiting reports and forwarded ids expire ``expires`` (a full wait from
    now), the old table's pages are zeroed as they are freed (``secure_delete``)."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(envelopes)")}
    if not columns or "expires" in columns:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute("DROP INDEX IF EXISTS envelopes_waiting")
        connection.execute("DROP INDEX IF EXISTS envelopes_batched")
        connection.execute("ALTER TABLE envelopes RENAME TO envelopes_first")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                connection.execute(statement)
        connection.execute(
            "INSERT INTO envelopes (id, batch_key, device, key, sealed, expires, batch, position)"
            " SELECT id, CASE WHEN sealed IS NULL THEN NULL ELSE batch_key END, device,"
            " CASE WHEN sealed IS NULL THEN NULL ELSE key END, sealed,"
            " CASE WHEN batch IS NULL OR sealed IS NULL THEN ? END, batch,"
            " CASE WHEN sealed IS NULL THEN NULL ELSE position END"
            " FROM envelopes_first ORDER BY id",
            (expires,),
        )
        connection.execute("DROP TABLE envelopes_first")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _add_refused(connection: sqlite3.Connection) -> None:
    """Give a ``batches`` table of an earlier layout its ``refused`` column (null: never
    refused; a batch refused before the upgrade records its next refusal)."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(batches)")}
    if "refused" not in columns:
        connection.execute("ALTER TABLE batches ADD COLUMN refused INTEGER")


def _widen_batch_keys(connection: sqlite3.Connection) -> None:
    """Give the batch keys of an earlier layout (metric, mechanism, epsilon, fingerprint: four
    fields) their sealing key id, from the envelope's ``key`` column (a batch's, from one of
    its envelopes), so reports that waited across the upgrade still form batches."""
    narrow = connection.execute(
        "SELECT id, batch_key, key FROM envelopes"
        " WHERE batch_key IS NOT NULL AND json_array_length(batch_key) = 4"
    ).fetchall()
    batches = connection.execute(
        "SELECT id, batch_key, (SELECT key FROM envelopes WHERE batch = batches.id"
        " AND key IS NOT NULL LIMIT 1) FROM batches WHERE json_array_length(batch_key) = 4"
    ).fetchall()
    if not narrow and not batches:
        return

    def widened(text: str, sealing_key: str | None) -> str:
        metric, mechanism, epsilon, fingerprint = json.loads(text)
        return BatchKey(metric, mechanism, float(epsilon), fingerprint, sealing_key or "").text()

    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(
            "UPDATE envelopes SET batch_key = ? WHERE id = ?",
            [(widened(text, key), envelope) for envelope, text, key in narrow],
        )
        connection.executemany(
            "UPDATE batches SET batch_key = ? WHERE id = ?",
            [(widened(text, key), batch) for batch, text, key in batches],
        )
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def waiting_keys_of(connection: sqlite3.Connection, min_batch: int) -> list[BatchKey]:
    """The batch keys of the store open on ``connection`` whose received reports come from at
    least ``min_batch`` devices."""
    rows = connection.execute(
        "SELECT batch_key FROM envelopes WHERE batch IS NULL"
        " GROUP BY batch_key HAVING COUNT(DISTINCT device) >= ?",
        (min_batch,),
    ).fetchall()
    return [BatchKey.of_text(row[0]) for row in rows]


def counts_of(connection: sqlite3.Connection) -> dict[str, int]:
    """How many reports of the store open on ``connection`` are received, batched and
    forwarded, and how many batches it holds (for its operator: ``/healthz`` says none of it)."""
    received, batched, forwarded = connection.execute(
        "SELECT SUM(batch IS NULL), SUM(batch IS NOT NULL AND sealed IS NOT NULL),"
        " SUM(batch IS NOT NULL AND sealed IS NULL) FROM envelopes"
    ).fetchone()
    batches = connection.execute("SELECT COUNT(*) FROM batches").fetchone()[0]
    return {
        "received": received or 0,
        "batched": batched or 0,
        "forwarded": forwarded or 0,
        "batches": batches,
    }
