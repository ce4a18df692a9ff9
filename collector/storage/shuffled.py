"""Released shuffled batches: recorded once by their first part, read by the accountant.

A row is the accountant's own record, :class:`~deniable.estimators.shufflingaccount.ShuffledBatch`
(one source of truth for what a batch is). The account reads bounded summaries, never every
row: :func:`batch_groups` (per metric and (mechanism, local eps): the count and the smallest
batch, one SQL aggregate) and :func:`recent_batches` (the most recent few).
"""

from __future__ import annotations

import datetime as dt

from deniable.estimators.shufflingaccount import DEFAULT_DELTA, BatchGroup, ShuffledBatch
from sqlalchemy import func, select

from .engine import Database
from .tables import shuffled_batches


def record_batch(database: Database, batch: ShuffledBatch) -> ShuffledBatch:
    """Record ``batch`` (its id, fingerprint and ``released_at`` set) unless its id is recorded
    already (a part sent again, another part of it); returns the row as stored, whose
    ``released_at`` dates every part's reports."""
    if batch.batch is None or batch.released_at is None:
        raise ValueError("a recorded batch has an id and a release time")
    row = {
        "batch": batch.batch,
        "metric": batch.metric,
        "mechanism": batch.mechanism,
        "epsilon": batch.epsilon,
        "fingerprint": batch.fingerprint,
        "n": batch.n,
        "released_at": batch.released_at,
    }
    with database.writing() as connection:
        connection.execute(database.insert(shuffled_batches).values(row).on_conflict_do_nothing())
        stored = connection.execute(
            select(shuffled_batches).where(shuffled_batches.c.batch == batch.batch)
        ).one()
    return _batch(stored, DEFAULT_DELTA)


def _batch(row: object, delta: float) -> ShuffledBatch:
    """A stored row as the accountant's record, at the ``delta`` the account states."""
    mapping = row._mapping  # type: ignore[attr-defined]
    released = mapping["released_at"]
    if released.tzinfo is None:
        released = released.replace(tzinfo=dt.UTC)
    return ShuffledBatch(
        metric=mapping["metric"],
        mechanism=mapping["mechanism"],
        epsilon=float(mapping["epsilon"]),
        n=int(mapping["n"]),
        delta=delta,
        batch=mapping["batch"],
        fingerprint=mapping["fingerprint"],
        released_at=released,
    )


def read_batches(
    database: Database, metric: str | None = None, delta: float = DEFAULT_DELTA
) -> list[ShuffledBatch]:
    """Every recorded batch (of ``metric``, if given), oldest first: for tests and tools
    that want them all (the account reads :func:`batch_groups` and :func:`recent_batches`)."""
    query = select(shuffled_batches).order_by(
        shuffled_batches.c.released_at, shuffled_batches.c.batch
    )
    if metric is not None:
        query = query.where(shuffled_batches.c.metric == metric)
    with database.reader.connect() as connection:
        return [_batch(row, delta) for row in connection.execute(query)]


def recent_batches(
    database: Database, limit: int, delta: float = DEFAULT_DELTA
) -> list[ShuffledBatch]:
    """The ``limit`` most recently released batches, oldest of them first."""
    query = (
        select(shuffled_batches)
        .order_by(shuffled_batches.c.released_at.desc(), shuffled_batches.c.batch.desc())
        .limit(limit)
    )
    with database.reader.connect() as connection:
        return [_batch(row, delta) for row in connection.execute(query)][::-1]


def batch_groups(database: Database, delta: float = DEFAULT_DELTA) -> list[BatchGroup]:
    """Per (metric, mechanism, local eps): how many batches were released and the smallest
    (its central eps holds for all, eps being non-increasing in n), by metric name. One
    aggregate: as many rows as distinct groups, however many batches."""
    c = shuffled_batches.c
    query = (
        select(c.metric, c.mechanism, c.epsilon, func.min(c.n), func.count())
        .group_by(c.metric, c.mechanism, c.epsilon)
        .order_by(c.metric, c.mechanism, c.epsilon)
    )
    with database.reader.connect() as connection:
        return [
            BatchGroup(
                ShuffledBatch(metric, mechanism, float(epsilon), int(smallest), delta),
                int(count),
            )
            for metric, mechanism, epsilon, smallest, count in connection.execute(query)
        ]
