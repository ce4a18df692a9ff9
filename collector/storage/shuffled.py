"""Released shuffled batches: recorded once by their first part, read by the accountant."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select

from .engine import Database
from .tables import shuffled_batches


@dataclass(frozen=True)
class ShuffledBatch:
    """One batch the shuffler released: its key, its size and when the collector first saw it."""

    batch: str
    metric: str
    mechanism: str
    epsilon: float
    fingerprint: str
    n: int
    released_at: dt.datetime


def record_batch(database: Database, batch: ShuffledBatch) -> ShuffledBatch:
    """Record ``batch`` unless its id is recorded already (a part sent again, another part of
    it); returns the row as stored, whose ``released_at`` dates every part's reports."""
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
    return _batch(stored)


def _batch(row: object) -> ShuffledBatch:
    mapping = row._mapping  # type: ignore[attr-defined]
    released = mapping["released_at"]
    if released.tzinfo is None:
        released = released.replace(tzinfo=dt.UTC)
    return ShuffledBatch(
        mapping["batch"],
        mapping["metric"],
        mapping["mechanism"],
        float(mapping["epsilon"]),
        mapping["fingerprint"],
        int(mapping["n"]),
        released,
    )


def read_batches(database: Database, metric: str | None = None) -> list[ShuffledBatch]:
    """Every recorded batch (of ``metric``, if given), oldest first."""
    query = select(shuffled_batches).order_by(
        shuffled_batches.c.released_at, shuffled_batches.c.batch
    )
    if metric is not None:
        query = query.where(shuffled_batches.c.metric == metric)
    with database.reader.connect() as connection:
        return [_batch(row) for row in connection.execute(query)]
