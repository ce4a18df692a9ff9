"""Delete raw reports of old periods in small batches while keeping their counts.

Each batch is its own short transaction, so ingestion never waits behind one huge delete.
The counts stay: estimates over old periods still work after their raw reports are gone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from deniable.client.spec import MetricSpec, period_label
from sqlalchemy import delete, select, tuple_

from .engine import Database
from .tables import reports

DELETE_BATCH = 5000


def purge_before(
    database: Database, specs: Iterable[MetricSpec], before: dt.date, batch_size: int = DELETE_BATCH
) -> int:
    """Delete the raw reports of every period that ends before ``before``; return how many.

    A period lies entirely before the date exactly when its label sorts before the label
    of the period holding the date (labels of one kind sort chronologically).
    """
    deleted = 0
    for spec in specs:
        cut = period_label(spec.period, before)
        key = (reports.c.metric, reports.c.period, reports.c.id)
        victims = select(*key).where(reports.c.metric == spec.name, reports.c.period < cut)
        stmt = delete(reports).where(tuple_(*key).in_(victims.limit(batch_size)))
        while True:
            with database.writing() as connection:
                removed = connection.execute(stmt).rowcount
            deleted += removed
            if removed < batch_size:
                break
    return deleted
