"""PostgreSQL: raw reports partitioned by period label (``PARTITION BY LIST (period)``).

One partition holds one period label (``2026-11-21``, ``2026-W47``, ``2026-11``) of every
metric with that kind of period. The key stays (metric, period, id) and includes the
partition key, so ``ON CONFLICT (metric, period, id)`` keeps each report exactly once.

A row whose period has no partition would fail its whole batch, so the writer makes sure
the partitions of a group's periods exist before it inserts (:func:`with_partitions`):
``CREATE TABLE IF NOT EXISTS ... PARTITION OF`` in its own short transaction under an
advisory lock, remembered per process so the usual group costs nothing; if a remembered
partition is gone (the database was replaced underneath), the group is retried once after
creating it again. Retention detaches and drops whole partitions (:func:`drop_partition`):
milliseconds and a few KB of WAL per period, the space returned at once. There is no
DEFAULT partition: it would block creating a partition for any label it holds.

SQLite has no partitions: every function here is for PostgreSQL only.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, text

from deniable.client.spec import next_period, period_label

from .engine import Database

PARTITION_PREFIX = "reports_p_"
"""Every partition of ``reports`` is named this prefix plus its label, lowercased, with ``-``
as ``_`` (``reports_p_2026_11_21``, ``reports_p_2026_w47``, ``reports_p_2026_11``)."""

PARTITION_LOCK_KEY = 0x64656E6970617274 & 0x7FFFFFFFFFFFFFFF
"""The advisory lock key ("denipart" in ASCII) that serializes creating and dropping
partitions across collector processes and retention runs."""

LOCK_TIMEOUT = "5s"
"""How long detaching a partition waits for the parent's lock before giving up (it must
not queue every ingesting writer behind a long read)."""

NO_PARTITION = "23514"
"""PostgreSQL's SQLSTATE (check_violation) for a row no partition accepts."""

_LABEL = re.compile(r"^[0-9]{4}-(?:W[0-9]{2}|[0-9]{2}(?:-[0-9]{2})?)$")
_BOUND = re.compile(r"^FOR VALUES IN \('([^']*)'\)$")

T = TypeVar("T")


def partition_name(label: str) -> str:
    """The partition name of period ``label``; ValueError if it is not a period label."""
    if not _LABEL.match(label):
        raise ValueError(f"not a period label: {label!r}")
    return PARTITION_PREFIX + label.lower().replace("-", "_")


def is_partition(name: str | None) -> bool:
    """Whether the table ``name`` is a partition of ``reports`` (schema comparisons skip
    them: the schema declares the partitioned table, not its partitions)."""
    return name is not None and name.startswith(PARTITION_PREFIX)


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's ``include_name`` hook: every object but the partitions."""
    return not (type_ == "table" and is_partition(name))


_known: dict[str, set[str]] = {}
_partitioned: dict[str, bool] = {}
"""Whether each database's ``reports`` was partitioned when this process last made sure of
its partitions."""
_known_lock = threading.Lock()


def is_partitioned(connection: Connection) -> bool:
    """Whether ``reports`` is the partitioned table (PostgreSQL, migrated to 0010)."""
    kind = connection.execute(
        text("SELECT relkind FROM pg_class WHERE oid = to_regclass('reports')")
    ).scalar_one_or_none()
    return kind == "p"


def _create(connection: Connection, labels: Iterable[str]) -> bool:
    """Create the missing partitions of ``labels``, unless ``reports`` is not partitioned (a
    database not yet migrated to 0010 takes every period as it is); whether it is. The
    partitions already there are read in one statement, not met one by one (a process's
    first group of 90 periods made 90 round trips that created nothing)."""
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PARTITION_LOCK_KEY})
    if not is_partitioned(connection):
        return False
    for label in sorted(set(labels) - set(list_partitions(connection))):
        connection.exec_driver_sql(
            f'CREATE TABLE IF NOT EXISTS "{partition_name(label)}"'
            f" PARTITION OF reports FOR VALUES IN ('{label}')"
        )
    return True


def ensure_partitions(database: Database, labels: Iterable[str]) -> None:
    """Make sure ``reports`` has a partition for each label (PostgreSQL; nothing on SQLite).

    Labels this process already made sure of cost nothing; the others are created, if
    missing, in one short transaction of their own (never inside an ingest transaction,
    whose locks would then be taken in another order).
    """
    if database.dialect != "postgresql":
        return
    wanted = set(labels)
    with _known_lock:
        missing = wanted - _known.get(database.url, set())
    if not missing:
        return
    with database.writer.begin() as connection:
        partitioned = _create(connection, missing)
    with _known_lock:
        _known.setdefault(database.url, set()).update(missing)
        _partitioned[database.url] = partitioned


def forget_partitions(database: Database) -> None:
    """Forget which partitions this process made sure of (they may have been dropped)."""
    with _known_lock:
        _known.pop(database.url, None)
        _partitioned.pop(database.url, None)


UNDEFINED_TABLE = "42P01"
"""PostgreSQL's SQLSTATE for a table that does not exist (a partition inserted into directly)."""


def missing_partition(error: BaseException | None) -> bool:
    """Whether ``error`` (or the driver error it was raised from) is PostgreSQL refusing a row
    no partition accepts, or naming a partition that does not exist."""
    while error is not None:
        cause = getattr(error, "orig", None) or error
        state = getattr(cause, "sqlstate", None)
        if (state == NO_PARTITION and "no partition" in str(cause)) or (
            state == UNDEFINED_TABLE and PARTITION_PREFIX in str(cause)
        ):
            return True
        error = error.__cause__ or error.__context__
    return False


def with_partitions(database: Database, labels: Iterable[str], work: Callable[[], T]) -> T:
    """Run ``work`` (which inserts reports of ``labels``) once their partitions exist; if a
    partition was missing all the same (dropped behind this process's back), make it and run
    ``work`` once more (the failed transaction stored nothing)."""
    wanted = set(labels)
    ensure_partitions(database, wanted)
    try:
        return work()
    except Exception as error:
        if not missing_partition(error):
            raise
    forget_partitions(database)
    ensure_partitions(database, wanted)
    return work()


def list_partitions(connection: Connection) -> dict[str, str]:
    """Every partition of ``reports``: its period label -> its table name."""
    rows = connection.execute(
        text(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'reports'::regclass"
        )
    ).all()
    found = {}
    for name, bound in rows:
        match = _BOUND.match(bound or "")
        if match:
            found[match.group(1)] = name
    return found


def drop_partition(connection: Connection, label: str) -> None:
    """Detach and drop the partition of ``label`` (in the caller's transaction, under the
    partition lock); the parent's lock is waited for at most :data:`LOCK_TIMEOUT`."""
    name = partition_name(label)
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PARTITION_LOCK_KEY})
    connection.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    connection.exec_driver_sql(f'ALTER TABLE reports DETACH PARTITION "{name}"')
    connection.exec_driver_sql(f'DROP TABLE "{name}"')


def create_partitions(connection: Connection, labels: Iterable[str]) -> None:
    """Create the partitions of ``labels`` that do not exist yet, in the caller's transaction
    (migrations, and the maintenance step that creates the coming periods ahead)."""
    _create(connection, labels)


_TARGET = "INSERT INTO reports ("
_direct: dict[tuple[int, str], Any] = {}


def partitioned(database: Database) -> bool:
    """Whether this process found ``database``'s reports table partitioned (False until
    :func:`ensure_partitions` looked)."""
    with _known_lock:
        return _partitioned.get(database.url, False)


def one_partition(database: Database, statement: Any, periods: Sequence[str]) -> Any:
    """``statement`` (an ingest ``text()`` inserting ``INTO reports``) inserting straight into
    the partition of its one period when every row has that period (the usual group): the
    partition's own key holds the same exactly-once, and the statement skips routing each
    row through the parent; several periods: ``statement`` itself."""
    first = periods[0]
    with _known_lock:
        partitioned = _partitioned.get(database.url, False)
    if not partitioned or any(label != first for label in periods):
        return statement
    key = (id(statement), first)
    direct = _direct.get(key)
    if direct is None:
        direct = statement.__class__(
            statement.text.replace(_TARGET, f'INSERT INTO "{partition_name(first)}" (', 1)
        )
        if len(_direct) > 10_000:
            _direct.clear()
        _direct[key] = direct
    return direct


AHEAD_KINDS = ("day", "week", "month")


def create_ahead(database: Database, today: dt.date) -> list[str]:
    """PostgreSQL: create the partitions of the current and the next period of every kind
    (at start-up and on every retention run), so the first report of a period finds its
    partition made; their labels (none on SQLite or an unpartitioned table)."""
    if database.dialect != "postgresql":
        return []
    labels: set[str] = set()
    for kind in AHEAD_KINDS:
        current = period_label(kind, today)
        labels.update((current, next_period(kind, current)))
    with database.writer.begin() as connection:
        if not _create(connection, labels):
            return []
    return sorted(labels)
