"""When each metric's reports arrived (``arrivals``, :data:`.tables.arrivals`): written by the
ingest transaction, one row per metric and minute of the last hour, and read by the
dashboard's "last report received" and "reports in the last hour".

The write is one upsert per group commit with a row per (metric, minute) the group touched,
in sorted key order (after every other write of the transaction, so the lock order stays
that of :mod:`.transaction`). A slot whose stored minute is older than the one written starts
again at the new count, so the table holds at most 60 rows per metric. A database not yet
migrated to revision 0016 records and shows no arrivals.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, Insert, case, select

from .dialects import insert_of
from .engine import Database
from .prepare import PreparedBatch
from .tables import ARRIVAL_SLOTS, arrivals

ArrivalRow = tuple[str, int, int, float]
"""(metric, epoch minute, new reports, time of the last one in epoch seconds)."""


def arrival_rows(
    batches: Sequence[PreparedBatch], new: Sequence[np.ndarray] | None
) -> list[ArrivalRow]:
    """The group's new reports per (metric, minute received), in key order; a batch that
    says no time (``received_at`` None) or stored nothing new adds nothing."""
    found: dict[tuple[str, int], tuple[int, float]] = {}
    for index, batch in enumerate(batches):
        if batch.received_at is None:
            continue
        if new is None:
            fresh = dict(batch.per_metric)
        else:
            fresh = {}
            for report, is_new in zip(batch.reports, new[index].tolist(), strict=True):
                if is_new:
                    fresh[report.metric] = fresh.get(report.metric, 0) + 1
        minute = math.floor(batch.received_at / 60)
        for metric, count in fresh.items():
            if count:
                n, last = found.get((metric, minute), (0, batch.received_at))
                found[(metric, minute)] = (n + count, max(last, batch.received_at))
    return [(m, minute, n, last) for (m, minute), (n, last) in sorted(found.items())]


@functools.cache
def _upsert(dialect: str) -> Insert:
    """Add rows to their metrics' minute slots: built once per dialect, since building it
    anew (its three ``CASE`` expressions) cost about 0.3 ms of every group commit."""
    stmt = insert_of(dialect)(arrivals)
    newer = stmt.excluded.minute > arrivals.c.minute
    return stmt.on_conflict_do_update(
        index_elements=["metric", "slot"],
        set_={
            "n": case((newer, stmt.excluded.n), else_=arrivals.c.n + stmt.excluded.n),
            "minute": case((newer, stmt.excluded.minute), else_=arrivals.c.minute),
            "last_at": case(
                (stmt.excluded.last_at > arrivals.c.last_at, stmt.excluded.last_at),
                else_=arrivals.c.last_at,
            ),
        },
    )


def upsert_arrivals(connection: Connection, database: Database, rows: list[ArrivalRow]) -> None:
    """Add ``rows`` to their metrics' minute slots (a slot holding an older minute starts
    again); nothing for no rows."""
    if not rows or not database.has_table(connection, arrivals.name):
        return
    connection.execute(
        _upsert(database.dialect),
        [
            {"metric": m, "slot": minute % ARRIVAL_SLOTS, "minute": minute, "n": n, "last_at": t}
            for m, minute, n, t in rows
        ],
    )


@dataclass(frozen=True)
class Arrival:
    """A metric's arrivals as the dashboard shows them: the time of its last report (epoch
    seconds, None: none recorded) and its new reports in the hour before ``now``."""

    last_at: float | None
    last_hour: int


def read_arrivals(database: Database, metrics: Iterable[str], now: float) -> dict[str, Arrival]:
    """Each of ``metrics``' :class:`Arrival` at ``now`` (epoch seconds): the reports of the 60
    minutes up to and including the current one."""
    names = sorted(set(metrics))
    result = {name: Arrival(None, 0) for name in names}
    if not names:
        return result
    current = math.floor(now / 60)
    query = select(arrivals.c.metric, arrivals.c.minute, arrivals.c.n, arrivals.c.last_at).where(
        arrivals.c.metric.in_(names)
    )
    with database.reader.connect() as connection:
        if not database.has_table(connection, arrivals.name):
            return result
        found = connection.execute(query).all()
    for metric, minute, n, last_at in found:
        before = result[metric]
        last = last_at if before.last_at is None else max(before.last_at, last_at)
        recent = int(n) if current - ARRIVAL_SLOTS < minute <= current else 0
        result[metric] = Arrival(last, before.last_hour + recent)
    return result
