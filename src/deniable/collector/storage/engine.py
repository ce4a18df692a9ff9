"""Database engines for SQLite (WAL, durable commits) and PostgreSQL from one URL.

SQLite writes take the lock at BEGIN (``BEGIN IMMEDIATE``) so concurrent writers queue on the
busy timeout instead of failing on a lock upgrade; reads use a separate deferred engine so
estimates never wait for ingestion.

Statements carry report ids and payloads as parameters, and results carry them as rows, so
every engine hides its parameters (in log lines and in the text of its errors) and never logs
result rows: see :data:`ENGINE_OPTIONS`.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import DBAPIError

from deniable.client.errors import StorageUnavailable

from ..settings import DEFAULT_POOL_SIZE
from .dialects import insert_of
from .tables import ADD_PACKED_SQL, add_packed
from .versions import advance

if sys.platform != "win32":  # Windows has no fcntl: writers rely on SQLite's busy timeout alone.
    import fcntl

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_CACHE_KIB = 65_536
"""Page cache per connection: random report ids touch pages all over the id index."""


LOGGING_NAME = "deniable"
"""Our engines log as ``sqlalchemy.engine.Engine.deniable``."""

ENGINE_OPTIONS: dict[str, Any] = {"hide_parameters": True, "logging_name": LOGGING_NAME}
"""Every engine's options: parameters (report ids, payloads) never appear in a log line or in
an error's text, which the server's logs may quote."""

APPLICATION_NAME = "deniable-collector"
"""The ``application_name`` a PostgreSQL connection of the collector carries (unless the URL
names another), so an operator or a test can tell its connections in ``pg_stat_activity``."""

UNDEFINED_TABLE = "42P01"
"""PostgreSQL's SQLSTATE for a table that does not exist."""


def _never_log_rows() -> None:
    """Cap our engines' logger at INFO: at DEBUG, SQLAlchemy logs every result row (report ids
    and payloads of an export, the ids an insert returns); statements, with their parameters
    hidden, still log at INFO for whoever turned SQLAlchemy's logging on before the engine
    was made. Otherwise the logger keeps SQLAlchemy's level (WARNING), so no statement builds
    a log record nobody reads: set at INFO regardless, that cost a seventh of a one-period
    estimate's time."""
    wanted = logging.getLogger("sqlalchemy.engine").getEffectiveLevel()
    logger = logging.getLogger(f"sqlalchemy.engine.Engine.{LOGGING_NAME}")
    logger.setLevel(max(logging.INFO, wanted))


def schema_missing(error: DBAPIError) -> bool:
    """Whether ``error`` says a table of the schema does not exist (the database is empty or
    was never migrated), rather than that the database is down or the statement is wrong.

    PostgreSQL says so by SQLSTATE; SQLite has none and reports every such error as the
    generic SQLITE_ERROR, so its fixed message text is all there is to go on.
    """
    cause = error.orig
    if isinstance(cause, sqlite3.OperationalError):
        return str(cause).startswith("no such table")
    return getattr(cause, "sqlstate", None) == UNDEFINED_TABLE


SCHEMA_MISSING = "database schema missing or not migrated; run `deniable migrate`"
"""What :class:`~deniable.client.errors.StorageUnavailable` says when the schema is missing."""

_NO_DATABASE = re.compile(r'database "([^"]+)" does not exist')
"""PostgreSQL's message when the URL names a database the server does not have."""


class DatabaseMissing(StorageUnavailable):
    """The PostgreSQL server has no database of the name the URL gives: a configuration error
    (create it, or fix the URL), not a failure of the server."""


def missing_database(error: BaseException, url: str) -> DatabaseMissing | None:
    """A :class:`DatabaseMissing` saying how to create the database if ``error`` is
    PostgreSQL refusing a connection to a database it does not have, else None."""
    found = _NO_DATABASE.search(str(getattr(error, "orig", None) or error))
    if found is None:
        return None
    parsed = make_url(url)
    options = [
        f"-h {parsed.host}" * bool(parsed.host),
        f"-p {parsed.port}" * bool(parsed.port),
        f"-U {parsed.username}" * bool(parsed.username),
    ]
    command = " ".join(["createdb", *filter(None, options), found.group(1)])
    return DatabaseMissing(
        f'database "{found.group(1)}" does not exist on the PostgreSQL server: create it'
        f" ({command}), or point DENIABLE_DATABASE_URL (--database) at one that does"
    )


def _refuse_missing_schema(engine: Engine) -> None:
    """Make ``engine`` raise :class:`~deniable.client.errors.StorageUnavailable` (the driver's
    error as its cause) wherever a statement finds a table of the schema missing, and
    :class:`DatabaseMissing` when PostgreSQL has no database of the URL's name."""

    @event.listens_for(engine, "handle_error")
    def _translate(context: ExceptionContext) -> BaseException | None:
        error = context.sqlalchemy_exception
        if isinstance(error, DBAPIError) and schema_missing(error):
            return StorageUnavailable(SCHEMA_MISSING)
        if isinstance(error, DBAPIError) and engine.dialect.name == "postgresql":
            return missing_database(error, engine.url.render_as_string(hide_password=True))
        return None


def normalize_url(database_url: str) -> str:
    """Map ``postgresql://`` and ``postgres://`` to the psycopg 3 driver SQLAlchemy should use."""
    for prefix in ("postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql+psycopg://" + database_url[len(prefix) :]
    return database_url


def is_sqlite(database_url: str) -> bool:
    """Whether the URL names an SQLite database."""
    return make_url(normalize_url(database_url)).get_backend_name() == "sqlite"


class WriterLock:
    """Queues SQLite writers: a thread lock in the process and, on POSIX, ``flock`` on a file
    beside the database across processes (worker processes wake as soon as it is free).

    SQLite has one writer at a time, and its own busy handler backs off in sleeps of up to
    100 ms, so letting writers contend for the database lock wastes most of the time.
    """

    def __init__(self, path: str | None) -> None:
        self._thread_lock = threading.Lock()
        self._path = path if path and sys.platform != "win32" else None

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the duration of the block."""
        with self._thread_lock:
            if self._path is None:
                yield
                return
            with open(self._path, "a+b") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


FILE_GONE = (
    "the SQLite database file was deleted or replaced while the collector ran; writes are"
    " refused: restore it (docs/operations.md, a deleted SQLite file), then restart"
)
"""What :class:`~deniable.client.errors.StorageUnavailable` says when the file is gone."""


class SQLiteFile:
    """The SQLite file a collector opened, so that its deletion or replacement is noticed.

    Connections keep writing to a deleted file's inode, which vanishes when the process exits:
    every upload would be acknowledged and lost. :meth:`check` compares the path's device and
    inode with those seen at start (or first seen, if the file did not exist yet).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._identity = self._stat()

    def _stat(self) -> tuple[int, int] | None:
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return None
        return status.st_dev, status.st_ino

    def check(self) -> None:
        """Raise :class:`~deniable.client.errors.StorageUnavailable` if the file at the path is
        gone or is another file than the one opened."""
        current = self._stat()
        if self._identity is None:
            self._identity = current
            return
        if current != self._identity:
            raise StorageUnavailable(FILE_GONE)


def _enable_wal(cursor: Any) -> None:
    """Switch the database to WAL, retrying while another process holds it.

    SQLite's busy handler does not cover the journal-mode switch: when several processes open
    a fresh database at once, all but one get "database is locked" immediately.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _sqlite_engine(url: str, begin: str, pool_size: int) -> Engine:
    engine = create_engine(
        url, pool_size=pool_size, max_overflow=0, pool_pre_ping=False, **ENGINE_OPTIONS
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        _enable_wal(cursor)
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        # Zero what is deleted, so reports retention dropped are not left in free pages for
        # a thief of the file: Debian's SQLite does by default, other builds do not.
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.close()
        dbapi_connection.create_function(ADD_PACKED_SQL, 2, add_packed, deterministic=True)

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)

    return engine


@dataclass(frozen=True)
class Database:
    """A writer engine (ingestion, registry, retention) and a reader engine (estimates)."""

    url: str
    writer: Engine
    reader: Engine
    _write_lock: WriterLock | None = field(default=None, repr=False)
    sqlite_file: SQLiteFile | None = field(default=None, repr=False)
    _versioned: bool = field(default=False, repr=False)
    _found_tables: set[str] = field(default_factory=set, repr=False)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.writer.dialect.name

    @contextmanager
    def writing(self, changes: Collection[str] | None = None) -> Iterator[Connection]:
        """A write transaction, committed on exit, that advances the read versions of the
        metrics ``changes`` names (None: of every metric) before it commits (:mod:`.versions`):
        no write can leave a cached read current.

        On SQLite, writers first queue on a :class:`WriterLock`, and nothing is written once
        the database file was deleted or replaced (:class:`SQLiteFile`).
        """
        self.check_file()
        if self._write_lock is None:
            with self.writer.begin() as connection:
                yield connection
                if self.versioned(connection):
                    advance(connection, changes)
            return
        with self._write_lock.held(), self.writer.begin() as connection:
            yield connection
            if self.versioned(connection):
                advance(connection, changes)

    def versioned(self, connection: Connection) -> bool:
        """Whether the schema keeps read versions (migration 0014): a collector may run
        against a database a separate job has not migrated yet; it then caches no read.
        Checked until it is found, then remembered."""
        if not self._versioned:  # frozen: set once, from False to True
            object.__setattr__(self, "_versioned", inspect(connection).has_table("read_versions"))
        return self._versioned

    def keeps_versions(self) -> bool:
        """:meth:`versioned`, on a reader connection of its own only until it is found."""
        if not self._versioned:
            with self.reader.connect() as connection:
                return self.versioned(connection)
        return True

    def keeps_table(self, name: str) -> bool:
        """:meth:`has_table`, on a reader connection of its own only until it is found."""
        if name not in self._found_tables:
            with self.reader.connect() as connection:
                return self.has_table(connection, name)
        return True

    def has_table(self, connection: Connection, name: str) -> bool:
        """Whether the schema has the table ``name`` yet (a collector may run against a
        database not migrated to its release); checked until it is found, then remembered."""
        if name not in self._found_tables and inspect(connection).has_table(name):
            self._found_tables.add(name)
        return name in self._found_tables

    def check_file(self) -> None:
        """On SQLite, raise StorageUnavailable if the database file is gone (else nothing)."""
        if self.sqlite_file is not None:
            self.sqlite_file.check()

    def insert(self, table: Any) -> Any:
        """This dialect's INSERT construct (with ON CONFLICT support) for ``table``."""
        return insert_of(self.dialect)(table)

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.writer.dispose()
        if self.reader is not self.writer:
            self.reader.dispose()


def open_database(database_url: str, pool_size: int = DEFAULT_POOL_SIZE) -> Database:
    """Engines for ``database_url`` (SQLite file or PostgreSQL).

    ``pool_size`` is a hard cap: on PostgreSQL the process never holds more connections than
    that (requests wait for a free one), so replicas times ``pool_size`` bounds the total.
    A statement that finds the schema missing raises
    :class:`~deniable.client.errors.StorageUnavailable`.
    """
    _never_log_rows()
    url = normalize_url(database_url)
    if is_sqlite(url):
        writer = _sqlite_engine(url, "BEGIN IMMEDIATE", pool_size)
        reader = _sqlite_engine(url, "BEGIN", pool_size)
        path = make_url(url).database
        lock_path = f"{path}-writer.lock" if path and path != ":memory:" else None
        _refuse_missing_schema(writer)
        _refuse_missing_schema(reader)
        file = SQLiteFile(path) if path and path != ":memory:" else None
        return Database(url, writer, reader, WriterLock(lock_path), file)
    named = {} if "application_name=" in url else {"application_name": APPLICATION_NAME}
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=0,
        pool_pre_ping=True,
        connect_args=named,
        **ENGINE_OPTIONS,
    )
    _refuse_missing_schema(engine)
    return Database(url, engine, engine)
