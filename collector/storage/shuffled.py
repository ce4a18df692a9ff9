"""Released shuffled batches: recorded once by their first part, read by the accountant.

A row is the accountant's own record, :class:`~deniable.estimators.shufflingaccount.ShuffledBatch`
(one source of truth for what a batch is). Each part ingested with refusals records how many
of its sealed reports the collector refused (:func:`record_part`, once per (batch, part): a
part sent again records nothing; a part without refusals writes no row, so the table stays as
small as refusals are rare), and a batch is read at its accounted n, the n its shuffler stated
less the refused reports of its parts, which hide nobody. The account reads bounded summaries,
never every row: :func:`batch_groups` (per metric and (mechanism, local eps): the count, the
smallest accounted batch and how many fall below the minimum, one SQL aggregate) and
:func:`recent_batches` (the most recent few).
"""

from __future__ import annotations

import datetime as dt

from deniable.estimators.shufflingaccount import DEFAULT_DELTA, BatchGroup, ShuffledBatch
from sqlalchemy import ColumnElement, case, func, select

from .engine import Database
from .tables import shuffled_batches, shuffled_parts


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
    with database.writing(changes=[batch.metric]) as connection:
        connection.execute(database.insert(shuffled_batches).values(row).on_conflict_do_nothing())
        stored = connection.execute(
            select(shuffled_batches).where(shuffled_batches.c.batch == batch.batch)
        ).one()
    return _batch(stored, DEFAULT_DELTA)


def record_part(database: Database, batch: str, part: int, refused: int) -> None:
    """Record that part ``part`` of ``batch`` had ``refused`` sealed reports refused, unless that
    part is recorded already (sent again: its first count stands, nothing is subtracted twice)."""
    row = {"batch": batch, "part": part, "refused": refused}
    with database.writing() as connection:
        connection.execute(database.insert(shuffled_parts).values(row).on_conflict_do_nothing())


def _refused(batch: ColumnElement[str]) -> ColumnElement[int]:
    """The refused reports of the batch named by the enclosing row's ``batch`` column (0 if
    none): a sum over its parts, read through the parts' key."""
    p = shuffled_parts.c
    total = select(func.sum(p.refused)).where(p.batch == batch)
    return func.coalesce(total.scalar_subquery(), 0).label("refused")


def _batch(row: object, delta: float) -> ShuffledBatch:
    """A stored row as the accountant's record, at the ``delta`` the account states: ``n`` the
    accounted devices (stated less refused), ``refused`` when the row carries it."""
    mapping = row._mapping  # type: ignore[attr-defined]
    released = mapping["released_at"]
    if released.tzinfo is None:
        released = released.replace(tzinfo=dt.UTC)
    refused = int(mapping.get("refused") or 0)
    return ShuffledBatch(
        metric=mapping["metric"],
        mechanism=mapping["mechanism"],
        epsilon=float(mapping["epsilon"]),
        n=int(mapping["n"]) - refused,
        delta=delta,
        batch=mapping["batch"],
        fingerprint=mapping["fingerprint"],
        released_at=released,
        refused=refused,
    )


def read_batches(
    database: Database, metric: str | None = None, delta: float = DEFAULT_DELTA
) -> list[ShuffledBatch]:
    """Every recorded batch (of ``metric``, if given), oldest first, at its accounted n: for
    tests and tools that want them all (the account reads :func:`batch_groups` and
    :func:`recent_batches`)."""
    query = select(shuffled_batches, _refused(shuffled_batches.c.batch)).order_by(
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
    (the refused reports summed for these rows only, after the limit)."""
    c = shuffled_batches.c
    recent = select(shuffled_batches).order_by(c.released_at.desc(), c.batch.desc()).limit(limit)
    rows = recent.subquery()
    query = select(rows, _refused(rows.c.batch)).order_by(rows.c.released_at, rows.c.batch)
    with database.reader.connect() as connection:
        return [_batch(row, delta) for row in connection.execute(query)]


def batch_groups(
    database: Database, delta: float = DEFAULT_DELTA, min_batch: int = 0
) -> list[BatchGroup]:
    """Per (metric, mechanism, local eps): how many batches were released, the smallest at its
    accounted n (its central eps holds for all, eps being non-increasing in n) and how many
    count fewer than ``min_batch`` devices, by metric name. One aggregate over the batches
    and their parts' refusals: as many rows as distinct groups, however many batches."""
    p = shuffled_parts.c
    refused = select(p.batch, func.sum(p.refused).label("refused")).group_by(p.batch).subquery()
    c = shuffled_batches.c
    counted = select(
        c.metric,
        c.mechanism,
        c.epsilon,
        (c.n - func.coalesce(refused.c.refused, 0)).label("n"),
    ).select_from(shuffled_batches.outerjoin(refused, refused.c.batch == c.batch))
    b = counted.subquery().c
    query = (
        select(
            b.metric,
            b.mechanism,
            b.epsilon,
            func.min(b.n),
            func.count(),
            func.sum(case((b.n < min_batch, 1), else_=0)),
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
            )
            for metric, mechanism, epsilon, smallest, count, below in connection.execute(query)
        ]
