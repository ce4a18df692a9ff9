"""The durable store in ``state_dir``: the outbox of randomized reports and the ledger behind it.

One SQLite file (WAL) holds the reports waiting for an acknowledgement, the budget counts,
the memo of randomized answers and the device secret. Reports and the ledger counts that
admitted them are written in one transaction, so after a kill either both exist or neither.
Reports are stored already encoded in the wire format, in chunks of at most one upload
batch, so that committing costs a string join per report rather than a table row. Only
randomized payloads are ever written here.

One outbox at a time owns a ``state_dir``: it holds an exclusive ``flock`` on a lock file
there from opening to :meth:`Outbox.close` (the OS releases it if the process dies). Two
owners would each admit a report from the same budget and each draw a fresh memoized answer,
which re-opens the averaging attack that budgets and memoization exist to stop. Where
``fcntl`` is missing (Windows) there is no such lock: one client per ``state_dir`` is then
the application's duty.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from .errors import DeniableError, InvalidInput
from .events import DayAggregate
from .ledger import PIN_PREFIX, LedgerDelta
from .mechanisms import Payload
from .windows import BookDelta
from .wire import join_reports, parse_payload_text, payload_text, report_text, split_reports

try:
    import fcntl

    _HAVE_FCNTL = True
except ImportError:  # pragma: no cover - not POSIX
    _HAVE_FCNTL = False

log = logging.getLogger("deniable.client")

DB_NAME = "deniable-client.sqlite3"
LOCK_NAME = "deniable-client.lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    count INTEGER NOT NULL,
    reports TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    metric TEXT NOT NULL,
    period TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (metric, period)
);
CREATE TABLE IF NOT EXISTS memo (key TEXT PRIMARY KEY, metric TEXT NOT NULL, payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS event_active (day INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS event_marks (
    metric TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    reported_through INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS event_days (
    metric TEXT NOT NULL,
    day INTEGER NOT NULL,
    aggregate TEXT NOT NULL,
    PRIMARY KEY (metric, day)
);
"""

QueuedReport = tuple[str, str, str, str, Payload, str]
"""One randomized report waiting to be committed: (id, metric, fingerprint, period, payload),
a plain tuple because ``record()`` makes one per call."""


class Chunk(NamedTuple):
    """Stored reports: ``reports`` is their wire texts as one run (:func:`.wire.join_reports`)."""

    seq: int
    count: int
    reports: str


def _chunks(items: list[str], per_chunk: int, max_bytes: int) -> Iterable[tuple[int, str]]:
    """Report texts grouped in order as (count, run): at most ``per_chunk`` reports and
    ``max_bytes`` a run, except that a single report over ``max_bytes`` gets a run of its own."""
    start, size = 0, 0
    for i, item in enumerate(items):
        if i > start and (i - start >= per_chunk or size + len(item) + 1 > max_bytes):
            yield i - start, join_reports(items[start:i])
            start, size = i, 0
        size += len(item) + 1
    if start < len(items):
        yield len(items) - start, join_reports(items[start:])


class StateDirInUseError(DeniableError, RuntimeError):
    """Another client (in this process or another) holds the ``state_dir``."""


def _lock_state_dir(state_dir: Path) -> int | None:
    """An open descriptor holding the exclusive lock on ``state_dir`` (``None`` without fcntl).

    Non-blocking: a ``state_dir`` already held raises :class:`StateDirInUseError` at once.
    The lock belongs to this open file description, so a second opening in the same process
    is refused too, and a child that inherits the descriptor across ``fork`` and closes it
    does not release the parent's lock.
    """
    if not _HAVE_FCNTL:
        return None
    fd = os.open(state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StateDirInUseError(f"state_dir {state_dir} is in use by another client") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


class Outbox:
    """The SQLite store; every method is thread-safe (one connection behind one lock).

    Opening it takes the ``state_dir`` lock before touching any file there (see the module
    docstring); :meth:`close` releases it.
    """

    def __init__(self, state_dir: Path) -> None:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = state_dir / DB_NAME
        self._lock = threading.Lock()
        self._flying: dict[int, int] = {}
        """The chunks of the upload in flight (seq -> count), which no trim touches."""
        self._max_queue: int | None = None
        """The bound the last commit trimmed to (applied again when a flight lands)."""
        self.set_aside: str | None = None
        """Why the state found on opening was unreadable and where it was kept (or None)."""
        self._dir_lock = _lock_state_dir(state_dir)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except BaseException:
            self._release_dir()
            raise
        try:
            problem = self._unreadable()
            if problem is not None:
                self._set_aside(problem)
            self._size = self._prepare()
        except BaseException:
            self.close()
            raise

    def _unreadable(self) -> str | None:
        """Why the state on disk cannot be used as it is (None if it can): not a SQLite
        database, a table of another shape, or a value of the wrong type (named, never shown)."""
        checks = {
            "ledger": "SELECT 1 FROM ledger WHERE typeof(metric) != 'text'"
            " OR typeof(period) != 'text' OR typeof(count) != 'integer' OR count < 0 LIMIT 1",
            "outbox": "SELECT 1 FROM outbox WHERE typeof(seq) != 'integer'"
            " OR typeof(count) != 'integer' OR count < 1 OR typeof(reports) != 'text' LIMIT 1",
            "meta": "SELECT 1 FROM meta WHERE key = 'secret'"
            " AND (typeof(value) != 'blob' OR length(value) != 32) LIMIT 1",
        }
        try:  # reads only: the state is kept aside exactly as it was found
            tables = {name for (name,) in self._db.execute("SELECT name FROM sqlite_master")}
            for name, query in checks.items():
                if name in tables and self._db.execute(query).fetchone() is not None:
                    return f"malformed {'secret' if name == 'meta' else name}"
            if "memo" not in tables:
                return None
            for key, metric, payload in self._db.execute("SELECT key, metric, payload FROM memo"):
                parsed = parse_payload_text(payload) if isinstance(payload, str) else None
                if not (isinstance(key, str) and isinstance(metric, str) and parsed is not None):
                    return "malformed memo"
                if key.startswith(PIN_PREFIX) and type(parsed) is not int:
                    return "malformed memo"
        except ValueError:
            return "malformed memo"
        except sqlite3.DatabaseError as exc:
            return f"not the client's SQLite database ({type(exc).__name__})"
        return None

    def _set_aside(self, problem: str) -> None:
        """Move the unreadable database (and its WAL files) aside, byte for byte, and start
        afresh: never thrown at the app, never deleted (the caller reports it)."""
        self._db.close()
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = self.path.with_name(f"{self.path.name}.bad-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                os.replace(source, f"{aside}{suffix}")
        self.set_aside = (
            f"the saved state was unreadable ({problem}); kept as {aside};"
            " the client started afresh"
        )
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)

    def _prepare(self) -> int:
        """Set the connection up, create the tables; returns how many reports are waiting."""
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("PRAGMA secure_delete=ON")  # a closed window's true aggregates: zeroed
        self._db.executescript(_SCHEMA)
        os.chmod(self.path, 0o600)
        return self._db.execute("SELECT COALESCE(SUM(count), 0) FROM outbox").fetchone()[0]

    def _release_dir(self) -> None:
        """Close the lock descriptor (which releases the lock), once."""
        fd, self._dir_lock = self._dir_lock, None
        if fd is not None:
            os.close(fd)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """Run the block in one ``BEGIN IMMEDIATE`` transaction, committed at its end and rolled
        back if it raises (call it holding the lock)."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def secret(self) -> bytes:
        """The device-local HMAC secret, created on first use; it never leaves the device."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()
            if row is not None:
                return bytes(row[0])
            value = secrets.token_bytes(32)
            self._db.execute("INSERT INTO meta (key, value) VALUES ('secret', ?)", (value,))
            return value

    def load_ledger(
        self,
    ) -> tuple[dict[tuple[str, str], int], dict[str, tuple[str, Payload]]]:
        """The durable budget counts and memo entries."""
        with self._lock:
            counts = {
                (m, p): n
                for m, p, n in self._db.execute("SELECT metric, period, count FROM ledger")
            }
            memo = {
                key: (metric, parse_payload_text(payload))
                for key, metric, payload in self._db.execute(
                    "SELECT key, metric, payload FROM memo"
                )
            }
        return counts, memo

    def load_events(
        self,
    ) -> tuple[list[int], list[tuple[str, str, int]], list[tuple[str, int, DayAggregate]]]:
        """The durable event state: the days active, each event metric's mark (fingerprint,
        the last day of the last window considered) and its day aggregates; a malformed
        aggregate is skipped (its events are lost, never guessed)."""
        with self._lock:
            active = [day for (day,) in self._db.execute("SELECT day FROM event_active")]
            marks = list(
                self._db.execute("SELECT metric, fingerprint, reported_through FROM event_marks")
            )
            days = []
            for metric, day, text in self._db.execute(
                "SELECT metric, day, aggregate FROM event_days"
            ):
                try:
                    days.append((metric, day, DayAggregate.from_json(json.loads(text))))
                except (InvalidInput, ValueError):
                    log.warning("skipped a malformed saved event aggregate of %s", metric)
        return active, marks, days

    def commit(
        self,
        reports: Sequence[QueuedReport],
        delta: LedgerDelta,
        *,
        events: BookDelta | None = None,
        max_queue: int,
        per_chunk: int,
        max_bytes: int,
    ) -> int:
        """Write reports and the ledger changes that admitted them in one transaction.

        Reports go in chunks of at most ``per_chunk`` reports and ``max_bytes``. Then the
        outbox is trimmed to ``max_queue`` reports besides those in flight (:meth:`fly`),
        oldest first; returns how many the trim dropped.
        """
        items = [report_text(*r) for r in reports]
        with self._lock:
            with self._transaction() as db:
                db.executemany(
                    "INSERT INTO outbox (count, reports) VALUES (?, ?)",
                    _chunks(items, per_chunk, max_bytes),
                )
                db.executemany(
                    "INSERT INTO ledger (metric, period, count) VALUES (?, ?, ?)"
                    " ON CONFLICT (metric, period) DO UPDATE"
                    " SET count = max(count, excluded.count)",
                    [(m, p, n) for (m, p), n in delta.counts.items()],
                )
                db.executemany(
                    "INSERT INTO memo (key, metric, payload) VALUES (?, ?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET payload = excluded.payload",
                    [(k, m, payload_text(p)) for k, (m, p) in delta.memo.items()],
                )
                if events:
                    self._commit_events(db, events)
                size = self._size + len(items)
                excess = size - sum(self._flying.values()) - max_queue
                dropped = self._trim(excess) if excess > 0 else 0
            self._size = size - dropped
            self._max_queue = max_queue
            return dropped

    @staticmethod
    def _commit_events(db: sqlite3.Connection, events: BookDelta) -> None:
        """Write the event state's changes (inside the commit's transaction)."""
        db.executemany(
            "INSERT OR IGNORE INTO event_active (day) VALUES (?)", [(d,) for d in events.active]
        )
        db.execute("DELETE FROM event_active WHERE day < ?", (events.forget_before,))
        db.executemany(
            "INSERT INTO event_marks (metric, fingerprint, reported_through) VALUES (?, ?, ?)"
            " ON CONFLICT (metric) DO UPDATE SET fingerprint = excluded.fingerprint,"
            " reported_through = excluded.reported_through",
            [(m, f, through) for m, (f, through) in events.marks.items()],
        )
        db.executemany(
            "DELETE FROM event_days WHERE metric = ? AND day = ?",
            [key for key, text in events.days.items() if text is None],
        )
        db.executemany(
            "INSERT INTO event_days (metric, day, aggregate) VALUES (?, ?, ?)"
            " ON CONFLICT (metric, day) DO UPDATE SET aggregate = excluded.aggregate",
            [(m, d, text) for (m, d), text in events.days.items() if text is not None],
        )

    def fly(self, batch: Sequence[Chunk]) -> None:
        """The chunks of ``batch`` are being uploaded: until :meth:`land`, no trim drops them
        or counts them against ``max_queue``, since the collector may be storing them (a
        report it acknowledges is delivered, never dropped)."""
        with self._lock:
            self._flying = {c.seq: c.count for c in batch}

    def land(self) -> int:
        """The upload is over (what it delivered already removed): trim to the last commit's
        ``max_queue`` again, oldest first; returns how many reports that dropped."""
        with self._lock:
            self._flying = {}
            bound = self._max_queue
            if bound is None or self._size <= bound:
                return 0
            with self._transaction():
                dropped = self._trim(self._size - bound)
            self._size -= dropped
            return dropped

    def _trim(self, excess: int) -> int:
        """Drop the ``excess`` oldest reports not in flight (inside the caller's transaction)."""
        dropped = 0
        rows = self._db.execute("SELECT seq, count, reports FROM outbox ORDER BY seq").fetchall()
        for seq, count, reports in rows:
            if dropped >= excess:
                break
            if seq in self._flying:
                continue
            if count <= excess - dropped:
                self._db.execute("DELETE FROM outbox WHERE seq = ?", (seq,))
                dropped += count
            else:
                keep = split_reports(reports)[excess - dropped :]
                self._db.execute(
                    "UPDATE outbox SET count = ?, reports = ? WHERE seq = ?",
                    (len(keep), join_reports(keep), seq),
                )
                dropped = excess
        return dropped

    def peek(self, limit: int, max_bytes: int) -> list[Chunk]:
        """The oldest waiting chunks: at most ``limit`` reports and ``max_bytes`` in all,
        but always at least the oldest chunk."""
        with self._lock:
            cursor = self._db.execute("SELECT seq, count, reports FROM outbox ORDER BY seq")
            batch: list[Chunk] = []
            count = size = 0
            for row in cursor:
                chunk = Chunk(*row)
                if batch and (count + chunk.count > limit or size + len(chunk.reports) > max_bytes):
                    break
                batch.append(chunk)
                count += chunk.count
                size += len(chunk.reports)
            cursor.close()
            return batch

    def remove(self, seqs: Iterable[int]) -> int:
        """Forget chunks the collector acknowledged (or refused for good); returns how many
        reports they still held (a trim for a full outbox may have taken some or all)."""
        with self._lock:
            with self._transaction() as db:
                removed = sum(
                    row[0]
                    for seq in seqs
                    for row in db.execute(
                        "DELETE FROM outbox WHERE seq = ? RETURNING count", (seq,)
                    ).fetchall()
                )
            self._size -= removed
            return removed

    def drop_reports(self, batch: Sequence[Chunk], indices: frozenset[int]) -> int:
        """Remove the reports at ``indices`` of a peeked batch (counted across its chunks),
        keeping the others in place and in order; returns how many were removed.

        A chunk trimmed since it was peeked is left alone (its indices no longer apply).
        """
        removed = 0
        with self._lock:
            with self._transaction() as db:
                offset = 0
                for chunk in batch:
                    items = split_reports(chunk.reports)
                    keep = [x for i, x in enumerate(items) if offset + i not in indices]
                    offset += len(items)
                    if len(keep) == len(items):
                        continue
                    if keep:
                        changed = db.execute(
                            "UPDATE outbox SET count = ?, reports = ? WHERE seq = ? AND count = ?",
                            (len(keep), join_reports(keep), chunk.seq, chunk.count),
                        ).rowcount
                    else:
                        changed = db.execute(
                            "DELETE FROM outbox WHERE seq = ? AND count = ?",
                            (chunk.seq, chunk.count),
                        ).rowcount
                    removed += (len(items) - len(keep)) * changed
            self._size -= removed
            return removed

    def __len__(self) -> int:
        """How many reports wait in the outbox."""
        return self._size

    def close(self) -> None:
        """Close the database (after a final commit by the caller) and free the ``state_dir``."""
        with self._lock:
            try:
                self._db.close()
            finally:
                self._release_dir()
