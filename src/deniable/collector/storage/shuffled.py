"""Released shuffled batches: recorded once by their first part, read by the accountant.

A row is the accountant's own record, :class:`~deniable.estimators.shufflingaccount.ShuffledBatch`
(one source of truth for what a batch is). The size a shuffler states is recorded and shown,
never believed: each part ingested records (:func:`record_part`, once per (batch, part): a
part sent again records nothing) how many of its sealed reports the collector refused and how
many distinct reports it counted (opened and stored anew: a repeated report counts once), and
a batch is read at its accounted n, the sum of its parts' counts, and flagged incomplete until
every part it stated has arrived. The account reads bounded summaries, never every row:
:func:`batch_groups` (per metric and (mechanism, local eps): the count, the smallest accounted
batch, how many fall below the minimum and how many are incomplete, one SQL aggregate) and
:func:`recent_batches` (the most recent few).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, case, func, select

from deniable.estimators.shufflingaccount import DEFAULT_DELTA, BatchGroup, ShuffledBatch

from .engine import Database
from .tables import period_counts, shuffled_batches, shuffled_parts


def record_batch(database: Database, batch: ShuffledBatch, parts: int) -> ShuffledBatch | None:
    """Record ``batch`` (its id, fingerprint and ``released_at`` set; its ``declared`` size and
    ``parts`` as its shuffler stated them) unless its id is recorded already (a part sent
    again, another part of it); returns the row as stored, whose ``released_at`` dates every
    part's reports, or None if the id is recorded with another header."""
    if batch.batch is None or batch.released_at is None:
        raise ValueError("a recorded batch has an id and a release time")
    row = {
        "batch": batch.batch,
        "metric": batch.metric,
        "mechanism": batch.mechanism,
        "epsilon": batch.epsilon,
        "fingerprint": batch.fingerprint,
        "n": batch.declared,
        "released_at": batch.released_at,
        "parts": parts,
    }
    c = shuffled_batches.c
    with database.writing(changes=[batch.metric]) as connection:
        connection.execute(database.insert(shuffled_batches).values(row).on_conflict_do_nothing())
        stored = connection.execute(
            select(shuffled_batches, *_parts(c.batch)).where(c.batch == batch.batch)
        ).one()
    header = ("metric", "mechanism", "epsilon", "fingerprint", "n")
    if any(stored._mapping[name] != row[name] for name in header):
        return None
    if stored._mapping["parts"] not in (None, parts):  # None: recorded before 0015, resumed
        return None
    return _batch(stored, DEFAULT_DELTA)


@dataclass(frozen=True)
class PartArrival:
    """A part of a shuffled batch as it arrived: its batch, its number and how many of its
    sealed reports were refused; the distinct reports it stored anew are counted when stored."""

    batch: str
    part: int
    refused: int


def insert_part(
    connection: Connection, database: Database, arrival: PartArrival, counted: int
) -> None:
    """Record ``arrival`` with ``counted`` distinct reports stored anew, in ``connection``'s
    transaction, unless that part is recorded already (sent again: its first counts stand,
    nothing is counted twice)."""
    row = {
        "batch": arrival.batch,
        "part": arrival.part,
        "refused": arrival.refused,
        "counted": counted,
    }
    connection.execute(database.insert(shuffled_parts).values(row).on_conflict_do_nothing())


def record_part(database: Database, batch: str, part: int, refused: int, counted: int) -> None:
    """:func:`insert_part` in a transaction of its own: for a part that stored no report
    (the writer records the others with their reports)."""
    with database.writing() as connection:
        insert_part(connection, database, PartArrival(batch, part, refused), counted)


def _parts(batch: ColumnElement[str]) -> list[ColumnElement[int]]:
    """The refused and counted reports and the arrived parts of the batch named by the
    enclosing row's ``batch`` column (0 if none): sums over its parts, read through their key."""
    p = shuffled_parts.c
    where = p.batch == batch
    return [
        func.coalesce(select(func.sum(p.refused)).where(where).scalar_subquery(), 0).label(
            "refused"
        ),
        func.coalesce(select(func.sum(p.counted)).where(where).scalar_subquery(), 0).label(
            "counted"
        ),
        select(func.count()).where(where).scalar_subquery().label("arrived"),
    ]


def _batch(row: Row[Any], delta: float) -> ShuffledBatch:
    """A stored row as the accountant's record, at the ``delta`` the account states: ``n`` the
    distinct reports its parts counted, ``declared`` the size its shuffler stated, incomplete
    while a stated part is missing (or the batch predates the parts' counts)."""
    mapping = row._mapping
    released = mapping["released_at"]
    if released.tzinfo is None:
        released = released.replace(tzinfo=dt.UTC)
    parts = mapping["parts"]
    return ShuffledBatch(
        metric=mapping["metric"],
        mechanism=mapping["mechanism"],
        epsilon=float(mapping["epsilon"]),
        n=int(mapping["counted"] or 0),
        delta=delta,
        batch=mapping["batch"],
        fingerprint=mapping["fingerprint"],
        released_at=released,
        refused=int(mapping["refused"] or 0),
        declared=int(mapping["n"]),
        incomplete=parts is None or int(mapping["arrived"] or 0) < int(parts),
    )


def read_batches(
    database: Database, metric: str | None = None, delta: float = DEFAULT_DELTA
) -> list[ShuffledBatch]:
    """Every recorded batch (of ``metric``, if given), oldest first, at its accounted n: for
    tests and tools that want them all (the account reads :func:`batch_groups` and
    :func:`recent_batches`)."""
    query = select(shuffled_batches, *_parts(shuffled_batches.c.batch)).order_by(
        shuffled_batches.c.released_at, shuffled_batches.c.batch
    )
    if metric is not None:
        query = query.where(shuffled_batches.c.metric == metric)
    with database.reader.connect() as connection:
        return [_batch(row, delta) for row in connection.execute(query)]


def recent_batches(
    database: Database, limit: int, delta: float = DEFAULT_DELTA
) -> list[ShuffledBatch]:
    """The ``limit`` most recently released batches, oldest of them first, at their accounted n
    (their parts summed for these rows only, after the limit)."""
    c = shuffled_batches.c
    recent = select(shuffled_batches).order_by(c.released_at.desc(), c.batch.desc()).limit(limit)
    rows = recent.subquery()
    query = select(rows, *_parts(rows.c.batch)).order_by(rows.c.released_at, rows.c.batch)
    with database.reader.connect() as connection:
        return [_batch(row, delta) for row in connection.execute(query)]


def batch_groups(
    database: Database, delta: float = DEFAULT_DELTA, min_batch: int = 0
) -> list[BatchGroup]:
    """Per (metric, mechanism, local eps): how many batches were released, the smallest at its
    accounted n (its central eps holds for all, eps being non-increasing in n), how many count
    fewer devices than ``min_batch`` and how many are incomplete, by metric name. One aggregate
    over the batches and their parts: as many rows as distinct groups, however many batches."""
    p = shuffled_parts.c
    arrived = (
        select(p.batch, func.sum(p.counted).label("counted"), func.count().label("arrived"))
        .group_by(p.batch)
        .subquery()
    )
    c = shuffled_batches.c
    incomplete = case(
        (c.parts.is_(None), 1), (func.coalesce(arrived.c.arrived, 0) < c.parts, 1), else_=0
    )
    counted = select(
        c.metric,
        c.mechanism,
        c.epsilon,
        func.coalesce(arrived.c.counted, 0).label("n"),
        incomplete.label("incomplete"),
    ).select_from(shuffled_batches.outerjoin(arrived, arrived.c.batch == c.batch))
    b = counted.subquery().c
    query = (
        select(
            b.metric,
            b.mechanism,
            b.epsilon,
            func.min(b.n),
            func.count(),
            func.sum(case((b.n < min_batch, 1), else_=0)),
            func.sum(b.incomplete),
            func.sum(b.n),
        )
        .group_by(b.metric, b.mechanism, b.epsilon)
        .order_by(b.metric, b.mechanism, b.epsilon)
    )
    with database.reader.connect() as connection:
        return [
            BatchGroup(
                ShuffledBatch(metric, mechanism, float(epsilon), int(smallest), delta),
                int(count),
                int(below),
                int(unfinished),
                int(reports),
            )
            for metric, mechanism, epsilon, smallest, count, below, unfinished, reports in (
                connection.execute(query)
            )
        ]


def reports_received(database: Database) -> dict[str, int]:
    """The distinct reports the collector has received per metric, directly or through a
    shuffler (``period_counts``, which retention leaves): with the reports batches counted,
    how many came directly. One aggregate, one row per metric."""
    c = period_counts.c
    query = select(c.metric, func.sum(c.n)).group_by(c.metric)
    with database.reader.connect() as connection:
        return {metric: int(n) for metric, n in connection.execute(query)}
