"""Reads and writes of the metric registry, the count reads estimates are made from, and pages
of raw reports for export.

An estimate reads ``period_counts`` and ``support_counts`` only: at most k rows per period,
so its cost does not grow with the number of stored reports.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

import numpy as np
from deniable.client.spec import MetricSpec, canonical_json
from sqlalchemy import select

from .engine import Database
from .tables import metrics, period_counts, reports, support_counts


class SpecConflict(Exception):
    """The metric name is registered with a different spec."""

    def __init__(self, existing: MetricSpec) -> None:
        super().__init__(f"metric {existing.name} already exists with another spec")
        self.existing = existing


def _spec_from_row(spec_json: str) -> MetricSpec:
    return MetricSpec.from_dict(json.loads(spec_json))


def load_spec(database: Database, name: str) -> MetricSpec | None:
    """The registered spec named ``name``, or None."""
    with database.reader.connect() as connection:
        row = connection.execute(select(metrics.c.spec).where(metrics.c.name == name)).first()
    return None if row is None else _spec_from_row(row[0])


def list_specs(database: Database) -> list[MetricSpec]:
    """Every registered spec, by name."""
    with database.reader.connect() as connection:
        rows = connection.execute(select(metrics.c.spec).order_by(metrics.c.name)).all()
    return [_spec_from_row(row[0]) for row in rows]


def register_spec(database: Database, spec: MetricSpec, now: dt.datetime) -> bool:
    """Register ``spec``; True if it was created, False if the same spec already was.

    Raises :class:`SpecConflict` if the name is taken by a different spec.
    """
    stmt = (
        database.insert(metrics)
        .values(
            name=spec.name,
            spec=canonical_json(spec.fingerprint_fields()),
            fingerprint=spec.fingerprint,
            created_at=now,
        )
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(metrics.c.name)
    )
    with database.writing() as connection:
        created = connection.execute(stmt).first() is not None
        if not created:
            row = connection.execute(
                select(metrics.c.spec).where(metrics.c.name == spec.name)
            ).one()
    if created:
        return True
    existing = _spec_from_row(row[0])
    if existing.fingerprint != spec.fingerprint:
        raise SpecConflict(existing)
    return False


def read_counts(
    database: Database, metric: str, k: int, periods: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """n per period and the (len(periods), k) support counts, for labels ``periods`` (sorted).

    Periods without reports get n = 0 and zero counts.
    """
    n = np.zeros(len(periods), dtype=np.int64)
    counts = np.zeros((len(periods), k), dtype=np.int64)
    if not periods:
        return n, counts
    position = {label: i for i, label in enumerate(periods)}
    first, last = periods[0], periods[-1]
    # One statement, so one snapshot: two selects under READ COMMITTED could see a commit land
    # between them and pair an old n with newer support counts.
    joined = period_counts.outerjoin(
        support_counts,
        (support_counts.c.metric == period_counts.c.metric)
        & (support_counts.c.period == period_counts.c.period),
    )
    query = (
        select(
            period_counts.c.period,
            period_counts.c.n,
            support_counts.c.category,
            support_counts.c.support,
        )
        .select_from(joined)
        .where(
            period_counts.c.metric == metric,
            period_counts.c.period >= first,
            period_counts.c.period <= last,
        )
    )
    with database.reader.connect() as connection:
        rows = connection.execute(query).all()
    for period, value, category, support in rows:
        i = position.get(period)
        if i is None:
            continue
        n[i] = value
        if category is not None and 0 <= category < k:
            counts[i, category] = support
    return n, counts


def read_reports(
    database: Database,
    metric: str,
    *,
    start: str | None,
    end: str | None,
    after: tuple[str, str] | None,
    limit: int,
) -> list[tuple[str, str, str]]:
    """Up to ``limit`` raw reports (id, period, payload JSON) of ``metric``, in (period, id) order.

    ``start``/``end`` bound the period labels (None: unbounded); ``after`` is the (period, id)
    of the last report already read. The rest of that period and the later periods are two
    seeks into the (metric, period, id) index, so a page costs the same however deep it is.
    """
    query = select(reports.c.id, reports.c.period, reports.c.payload).where(
        reports.c.metric == metric
    )
    if start is not None:
        query = query.where(reports.c.period >= start)
    if end is not None:
        query = query.where(reports.c.period <= end)
    rows: list[tuple[str, str, str]] = []
    with database.reader.connect() as connection:
        if after is not None:
            period, report_id = after
            same = query.where(reports.c.period == period, reports.c.id > report_id)
            same = same.order_by(reports.c.id).limit(limit)
            rows += [(row.id, row.period, row.payload) for row in connection.execute(same)]
            query = query.where(reports.c.period > period)
        if len(rows) < limit:
            query = query.order_by(reports.c.period, reports.c.id).limit(limit - len(rows))
            rows += [(row.id, row.period, row.payload) for row in connection.execute(query)]
    return rows
