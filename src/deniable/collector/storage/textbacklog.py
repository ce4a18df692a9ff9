"""Text reports appended per (metric, period, cell) and folded into their counts later.

A text report adds to one 8 KB packed sketch row (:mod:`.textcells`); rewriting that row for
every group that touches it made a text report cost several times an oue report. Ingestion
instead appends a group's new text reports to ``text_pending`` (a row per (metric, period,
cell): their sketch rows and their bits as received), and a fold adds a (metric, period,
cell)'s pending rows into ``text_cell_counts`` and deletes them in one transaction: each
sketch row is then rewritten once per fold, for all the reports since the last.

Every read adds the rows still pending (in the statement that reads the counts, so one
snapshot), so a fold changes no answer and advances no read version. Each collector process
counts what it appended (:class:`TextBacklog`); a (metric, period, cell) is due once that
reaches :data:`FOLD_FACTOR` reports per sketch row, and its writer's fold thread
(:class:`BackgroundFolds`) folds it while the writer goes on. The fold thread first folds
every backlog (what an earlier process left), and retention folds the periods it drops. The
pending rows of a (metric, period, cell) therefore stay near workers × :data:`FOLD_FACTOR`
reports per sketch row, about 175 bytes each against the counts' 8 KB per sketch row. Two
folds of the same rows are safe: the ``DELETE ... RETURNING`` that takes them is the claim.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import ColumnElement, Connection, delete, insert, select

from deniable.client.kinds import TextSpec

from .engine import Database
from .queries import spec_from_json
from .tables import metrics, text_pending
from .textcells import (
    ChunkCounts,
    PendingRow,
    TextCellRows,
    add_chunks,
    pending_increments,
    text_increments,
    write_chunk_counts,
)

log = logging.getLogger("deniable.collector")

FOLD_FACTOR = 16
"""A collector folds a (metric, period, cell) once it appended this many reports per sketch
row there (4,096 for a 16-byte text metric's 256 sketch rows): each fold rewrites at most the
cell's sketch rows for at least this many reports each, on average."""

FOLDS_PER_TURN = 4
"""At most this many (metric, period, cell)s are folded in one turn (on PostgreSQL, at once),
so a writer that folds a turn itself never stops taking batches for long."""

FOLD_THREADS = 4
"""How many keys a PostgreSQL fold of several takes at once (each on its own connection)."""

MOST_DUE = 4 * FOLDS_PER_TURN
"""More due keys than this and the writer folds a turn itself (:class:`BackgroundFolds`)."""

PendingKey = tuple[str, str, str]
"""(metric, period, cell): what one fold takes."""


@dataclass(frozen=True)
class Appended:
    """What a group appended to ``text_pending`` for one (metric, period, cell): its new
    reports and the appended reports at which the key is due (:data:`FOLD_FACTOR` per sketch
    row)."""

    reports: int
    fold_at: int


def store_text(
    connection: Connection,
    database: Database,
    batches: Sequence[tuple[dict[str, TextCellRows], list[PendingRow]]],
    new: Sequence[np.ndarray] | None,
) -> dict[PendingKey, Appended]:
    """Keep the group's new text reports: ``batches`` holds each batch's rows per text metric
    and its ``text_pending`` rows if every report is new, ``new`` each batch's mask of new
    reports (None: all are). Appended to ``text_pending`` (what was appended per key is
    returned), or on a schema before 0019 added to the counts at once (nothing returned)."""
    if not any(groups for groups, _ in batches):
        return {}
    if not database.has_table(connection, text_pending.name):
        write_chunk_counts(connection, text_increments([groups for groups, _ in batches], new))
        return {}
    rows: list[PendingRow] = []
    fold_at: dict[str, int] = {}
    for b, (groups, all_new) in enumerate(batches):
        for metric, grouped in groups.items():
            fold_at[metric] = FOLD_FACTOR * grouped.sketch_rows
        if new is None or new[b].all():
            rows.extend(all_new)
            continue
        for metric, grouped in groups.items():
            rows.extend(grouped.pending(metric, new[b][grouped.positions]))
    if not rows:
        return {}
    connection.execute(insert(text_pending), [row._asdict() for row in rows])
    appended: dict[PendingKey, Appended] = {}
    for row in rows:
        _count(appended, (row.metric, row.period, row.cell), row.reports, fold_at[row.metric])
    return appended


def _count(into: dict[PendingKey, Appended], key: PendingKey, reports: int, fold_at: int) -> None:
    """Add ``reports`` appended at ``key`` to ``into``."""
    before = into.get(key)
    into[key] = Appended(reports + (before.reports if before else 0), fold_at)


@dataclass
class TextBacklog:
    """What this process appended to ``text_pending`` per (metric, period, cell) since it last
    folded it, and which are due. The writer thread adds to it and a fold takes from it, each
    under :attr:`lock` (the writer's :class:`BackgroundFolds` folds on a thread of its own)."""

    waiting: dict[PendingKey, Appended] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, appended: dict[PendingKey, Appended]) -> None:
        """Count a group's appends."""
        with self.lock:
            for key, more in appended.items():
                _count(self.waiting, key, more.reports, more.fold_at)

    def due(self, most: int = FOLDS_PER_TURN) -> list[PendingKey]:
        """Up to ``most`` keys whose appends reached their fold, the largest first."""
        with self.lock:
            return self._due(most)

    def _due(self, most: int) -> list[PendingKey]:
        ready = [key for key, seen in self.waiting.items() if seen.reports >= seen.fold_at]
        ready.sort(key=lambda key: -self.waiting[key].reports)
        return ready[:most]

    def fold(self, database: Database, most: int = FOLDS_PER_TURN) -> bool:
        """Fold up to ``most`` due keys (:func:`fold_keys`): whether any was folded. A fold
        that fails is logged and its keys stay due (their rows stay pending, and reads still
        count them)."""
        with self.lock:
            taken = {key: self.waiting.pop(key) for key in self._due(most)}
        if not taken:
            return False
        try:
            fold_keys(database, list(taken))
        except Exception as exc:  # a fold is an optimization: never fail the writer
            log.warning("could not fold pending text reports (%s)", type(exc).__name__)
            self.add(taken)
            return False
        return True


class BackgroundFolds:
    """Folds a writer's due keys on a thread of its own, so the writer keeps committing groups
    meanwhile: first whatever an earlier process left pending, then, each time it is woken,
    every key due. The writer folds a turn itself only when more than :data:`MOST_DUE` keys
    wait (the folds lag behind the appends), which bounds the rows pending."""

    def __init__(self, database: Database, backlog: TextBacklog) -> None:
        self.database = database
        self.backlog = backlog
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="deniable-fold", daemon=True)
        self._thread.start()

    def after_commit(self) -> None:
        """Wake the fold thread; fold a turn in the caller's thread if too many keys wait."""
        self._wake.set()
        if len(self.backlog.due(MOST_DUE + 1)) > MOST_DUE:
            self.backlog.fold(self.database)

    def close(self, timeout: float = 60) -> None:
        """Fold the keys due, then stop the thread."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=timeout)

    def _run(self) -> None:
        try:
            fold_all(self.database)
        except Exception as exc:  # a fold is an optimization: the writer serves regardless
            log.warning("could not fold pending text reports at start (%s)", type(exc).__name__)
        while True:
            self._wake.wait()
            self._wake.clear()
            stopping = self._stopping
            while self.backlog.fold(self.database):
                pass
            if stopping:
                return


def fold_keys(database: Database, keys: Sequence[PendingKey]) -> int:
    """Fold each of ``keys``' pending rows into its counts, one transaction per key: the
    reports folded. On PostgreSQL up to :data:`FOLD_THREADS` keys at once (two keys share no
    row); SQLite has one writer at a time, so one after the other."""
    if database.dialect != "postgresql" or len(keys) < 2:
        return sum(_fold_key(database, key) for key in keys)
    with ThreadPoolExecutor(FOLD_THREADS, thread_name_prefix="deniable-fold") as pool:
        return sum(pool.map(lambda key: _fold_key(database, key), keys))


def _fold_key(database: Database, key: PendingKey) -> int:
    """Fold one (metric, period, cell)'s pending rows in a transaction of its own."""
    metric, period, cell = key
    t = text_pending.c
    with database.writing(changes=()) as connection:
        return fold_pending_rows(
            connection, (t.metric == metric) & (t.period == period) & (t.cell == cell)
        )


def pending_keys(
    database: Database, metric: str | None = None, before: str | None = None
) -> list[PendingKey]:
    """Every (metric, period, cell) with pending rows (of ``metric`` and of a period before
    ``before`` if given), in key order; none on a schema before 0019."""
    t = text_pending.c
    with database.reader.connect() as connection:
        if not database.has_table(connection, text_pending.name):
            return []
        query = select(t.metric, t.period, t.cell).distinct().order_by(t.metric, t.period, t.cell)
        if metric is not None:
            query = query.where(t.metric == metric)
        if before is not None:
            query = query.where(t.period < before)
        return [(name, period, cell) for name, period, cell in connection.execute(query)]


def fold_all(database: Database, metric: str | None = None, before: str | None = None) -> int:
    """Fold every pending row (of ``metric`` and of periods before ``before`` if given): the
    reports folded."""
    return fold_keys(database, pending_keys(database, metric, before))


def fold_pending_rows(connection: Connection, where: ColumnElement[bool] | None = None) -> int:
    """Take the ``text_pending`` rows ``where`` selects (all if None) and add them into
    ``text_cell_counts``, in the caller's transaction: the reports folded. A row of a metric
    no longer registered as text is dropped with nothing to add it to."""
    t = text_pending.c
    taken = delete(text_pending).returning(t.metric, t.period, t.cell, t.chunks, t.payloads)
    if where is not None:
        taken = taken.where(where)
    by_metric: dict[str, list[tuple[str, str, bytes, bytes]]] = {}
    for metric, period, cell, chunks, payloads in connection.execute(taken):
        by_metric.setdefault(metric, []).append((period, cell, bytes(chunks), bytes(payloads)))
    total: ChunkCounts = {}
    folded = 0
    for metric, rows in by_metric.items():
        spec_json = connection.execute(
            select(metrics.c.spec).where(metrics.c.name == metric)
        ).scalar_one_or_none()
        spec = spec_from_json(spec_json) if spec_json is not None else None
        if not isinstance(spec, TextSpec):
            continue
        add_chunks(total, pending_increments(metric, spec.text_randomizer, rows))
        folded += sum(len(row[2]) // 2 for row in rows)
    write_chunk_counts(connection, total)
    return folded
