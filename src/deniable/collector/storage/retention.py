"""Drop raw reports of old periods, optionally archiving them first, while keeping their counts.

PostgreSQL drops whole partitions (one per period label, :mod:`.partitions`): milliseconds
and a few KB of WAL per period, the space returned at once, and no statement that reads
every partition. SQLite deletes in small batches, each its own short transaction, so
ingestion never waits behind one huge delete. With an :class:`.archive.Archive`, each
(metric, period) is written to Parquet and verified before its rows go, and on SQLite its
rows then go in one DELETE, so an interrupted run never leaves part of an archived period.

The counts stay: estimates over old periods still work after their raw reports are gone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sqlalchemy import delete, func, select, tuple_

from deniable.client.spec import MetricSpec, period_label

from .archive import Archive, ArchivedPeriod, ArchiveMismatch
from .engine import Database
from .partitions import (
    drop_partition,
    forget_partitions,
    is_partitioned,
    list_partitions,
)
from .tables import period_counts, reports
from .textbacklog import fold_all

DELETE_BATCH = 5000

PERIOD_KINDS = ("day", "week", "month")


def label_kind(label: str) -> str:
    """The period kind a label is of (``2026-11-21`` day, ``2026-W47`` week, ``2026-11``
    month)."""
    if "W" in label:
        return "week"
    return "day" if label.count("-") == 2 else "month"


@dataclass
class RetentionRun:
    """What a retention run dropped (and archived first, if it archived)."""

    deleted: int = 0
    archived: list[ArchivedPeriod] = field(default_factory=list)


Progress = Callable[[ArchivedPeriod], None]


def purge_before(
    database: Database, specs: Iterable[MetricSpec], before: dt.date, batch_size: int = DELETE_BATCH
) -> int:
    """Delete the raw reports of every period that ends before ``before``; return how many.

    A period lies entirely before the date exactly when its label sorts before the label
    of the period holding the date (labels of one kind sort chronologically).
    """
    return retain(database, specs, before, batch_size=batch_size).deleted


def retain(
    database: Database,
    specs: Iterable[MetricSpec],
    before: dt.date,
    *,
    archive: Archive | None = None,
    batch_size: int = DELETE_BATCH,
    progress: Progress | None = None,
) -> RetentionRun:
    """Drop (archiving first, with ``archive``) the raw reports of every period that ends
    before ``before``."""
    by_name = {spec.name: spec for spec in specs}
    for spec in by_name.values():
        # A pending text report of a dropped period goes into its counts first (:mod:`.textbacklog`).
        fold_all(database, spec.name, period_label(spec.period, before))
    if database.dialect == "postgresql":
        with database.writer.connect() as connection:
            partitioned = is_partitioned(connection)
        if partitioned:
            return _drop_partitions(database, by_name, before, archive, progress)
    run = RetentionRun()
    for spec in by_name.values():
        cut = period_label(spec.period, before)
        if archive is None:
            run.deleted += _delete_batches(database, spec, cut, batch_size)
            continue
        for period in _stored_periods(database, spec.name, cut):
            run.deleted += _archive_and_delete(database, spec, period, archive, run, progress)
    return run


def _archive_and_delete(
    database: Database,
    spec: MetricSpec,
    period: str,
    archive: Archive,
    run: RetentionRun,
    progress: Progress | None,
) -> int:
    """SQLite: archive (metric, period) if it still has raw reports, then delete them in one
    transaction that first checks they are exactly as many as the archive verified."""
    where = (reports.c.metric == spec.name, reports.c.period == period)
    stored = select(func.count()).select_from(reports).where(*where)
    with database.reader.connect() as connection:
        if connection.execute(stored).scalar_one() == 0:
            return 0
    done = archive.store(database, spec, period)
    if progress is not None:
        progress(done)
    run.archived.append(done)
    with database.writing() as connection:
        if connection.execute(stored).scalar_one() != done.rows:
            raise ArchiveMismatch(
                f"{spec.name} {period} changed while it was archived; nothing was dropped"
            )
        return connection.execute(delete(reports).where(*where)).rowcount


def _stored_periods(database: Database, metric: str, cut: str) -> list[str]:
    """The periods before ``cut`` that ``metric`` has counts for (so may have raw reports)."""
    query = (
        select(period_counts.c.period)
        .where(period_counts.c.metric == metric, period_counts.c.period < cut)
        .order_by(period_counts.c.period)
    )
    with database.reader.connect() as connection:
        return list(connection.execute(query).scalars())


def _delete_batches(database: Database, spec: MetricSpec, cut: str, batch_size: int) -> int:
    """SQLite (and a PostgreSQL database not yet partitioned): delete ``spec``'s reports of periods before ``cut``, ``batch_size`` a time."""
    deleted = 0
    key = (reports.c.metric, reports.c.period, reports.c.id)
    victims = select(*key).where(reports.c.metric == spec.name, reports.c.period < cut)
    stmt = delete(reports).where(tuple_(*key).in_(victims.limit(batch_size)))
    while True:
        with database.writing() as connection:
            removed = connection.execute(stmt).rowcount
        deleted += removed
        if removed < batch_size:
            return deleted


def _drop_partitions(
    database: Database,
    specs: dict[str, MetricSpec],
    before: dt.date,
    archive: Archive | None,
    progress: Progress | None,
) -> RetentionRun:
    """PostgreSQL: archive (if asked) then detach and drop each partition before the cut."""
    run = RetentionRun()
    cuts = {kind: period_label(kind, before) for kind in PERIOD_KINDS}
    with database.writer.connect() as connection:
        labels = sorted(list_partitions(connection))
    for label in labels:
        if label >= cuts[label_kind(label)]:
            continue
        per_metric = select(reports.c.metric, func.count()).where(reports.c.period == label)
        with database.reader.connect() as connection:
            counts = connection.execute(per_metric.group_by(reports.c.metric)).all()
        if archive is not None:
            for metric, n in counts:
                spec = specs.get(metric)
                if spec is None:
                    raise LookupError(f"reports of unregistered metric {metric} in {label}")
                done = archive.store(database, spec, label)
                if done.rows != n:
                    raise ArchiveMismatch(
                        f"{metric} {label} changed while it was archived; nothing was dropped"
                    )
                if progress is not None:
                    progress(done)
                run.archived.append(done)
        with database.writing() as connection:
            drop_partition(connection, label)
        run.deleted += sum(n for _, n in counts)
    forget_partitions(database)
    return run
