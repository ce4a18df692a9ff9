"""Store prepared batches in one transaction: new reports, their period and support counts,
and for numeric metrics their sums (n, sum of y, sum of y^2 per metric and period).

The writer's group commit runs :func:`store_batches` on the batches the request threads
prepared (:mod:`.prepare`); the statements themselves are the dialects' own
(:mod:`.sqliteupserts`, :mod:`.pgupserts`).

Before it writes, the transaction checks that the database still registers every metric of the
group under the fingerprint its reports were validated against (one query, share-locking the
metrics' rows on PostgreSQL): a collector's cached spec can be stale when the database was
dropped and migrated again underneath it, and a report the current spec does not accept, or
of a metric no longer registered, must never be stored (:class:`.queries.SpecChanged`).

``INSERT ... ON CONFLICT DO NOTHING RETURNING`` tells which reports are new, so a resent
report (across batches or twice in one batch) is counted once. A report is unique by its
(metric, period, id), the reports table's primary key: a resent report always repeats all
three, and new reports land in their period's part of the key, not all over one id index.
Counts are upserted (``support = support + excluded.support``) in sorted key order, and every
transaction locks metrics (shared, by name), then reports, then period counts, then support
counts, so concurrent writers on PostgreSQL never deadlock. Numeric sums are upserted last,
after the support counts, and only by a group that holds numeric reports: a group of
categorical reports runs exactly the statements it ran before numeric metrics existed. The
cells of metrics with dimensions come last, ``cell_counts`` then a text metric's
``text_pending`` (:mod:`.textbacklog`); then a shuffled part's row, and last each metric's
minute in ``arrivals`` (:mod:`.arrivals`): when its new reports arrived, and how many.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import Connection

from . import pgupserts, sqliteupserts
from .arrivals import arrival_rows, upsert_arrivals
from .engine import Database
from .increments import CountRow, SumRow, SupportRow, cell_increments, count_rows
from .partitions import with_partitions
from .prepare import InsertRow, PreparedBatch, ReportKey, report_key
from .queries import check_fingerprints
from .shuffled import insert_part
from .tables import numeric_sums
from .textbacklog import TextBacklog, store_text


@dataclass
class StoredBatch:
    """What a committed batch changed: new and duplicate reports, in total and per metric."""

    accepted: int = 0
    duplicates: int = 0
    accepted_by_metric: dict[str, int] = field(default_factory=dict)
    duplicates_by_metric: dict[str, int] = field(default_factory=dict)


def store_batches(
    database: Database, batches: Sequence[PreparedBatch], backlog: TextBacklog | None = None
) -> list[StoredBatch]:
    """Store several prepared batches in one committed transaction; one result per batch,
    once the partitions of their periods exist (PostgreSQL, :mod:`.partitions`). What the
    group appended to ``text_pending`` is counted in ``backlog`` once committed."""
    if database.dialect != "postgresql":
        return _store_group(database, batches, backlog)
    labels = {row[2] for batch in batches for row in batch.rows}
    return with_partitions(database, labels, lambda: _store_group(database, batches, backlog))


def _store_group(
    database: Database, batches: Sequence[PreparedBatch], backlog: TextBacklog | None
) -> list[StoredBatch]:
    """Store several prepared batches in one committed transaction; one result per batch.

    Raises :class:`.queries.SpecChanged` (nothing stored) if a metric of the group is no
    longer registered under the spec its reports were validated against.
    """
    expected = _expected_fingerprints(batches)
    group = _Group.of(database, batches)
    with database.writing(changes=expected) as connection:
        check_fingerprints(connection, expected)
        new, counted = _insert(connection, database, batches, group)
        if new is None and not counted and group.copy is not None and group.counts is not None:
            # Every report went in by COPY: the counts planned before the transaction.
            pgupserts.write_counts(connection, group.copy)
            _upsert_sums(connection, database, group.counts[2])
        elif not counted:
            n_rows, support_rows, sum_rows = count_rows(batches, new)
            if database.dialect == "sqlite":
                sqliteupserts.upsert_counts(connection, n_rows, support_rows)
            else:
                pgupserts.upsert_counts(connection, database, n_rows, support_rows)
            _upsert_sums(connection, database, sum_rows)
        _upsert_cells(connection, database, batches, new)
        text_cells = [(batch.text_cells, batch.text_pending) for batch in batches]
        appended = store_text(connection, database, text_cells, new)
        for index, batch in enumerate(batches):
            if batch.part is not None:
                counted = len(batch.rows) if new is None else int(new[index].sum())
                insert_part(connection, database, batch.part, counted)
        upsert_arrivals(connection, database, arrival_rows(batches, new))
    if backlog is not None:
        backlog.add(appended)
    if new is None:
        return [StoredBatch(len(batch.rows), 0, dict(batch.per_metric), {}) for batch in batches]
    results = []
    for batch, is_new in zip(batches, new, strict=True):
        result = StoredBatch(accepted=int(is_new.sum()), duplicates=int((~is_new).sum()))
        for report, fresh in zip(batch.reports, is_new.tolist(), strict=True):
            target = result.accepted_by_metric if fresh else result.duplicates_by_metric
            target[report.metric] = target.get(report.metric, 0) + 1
        results.append(result)
    return results


def _expected_fingerprints(batches: Sequence[PreparedBatch]) -> dict[str, set[str]]:
    """Every fingerprint the group's batches were validated against, by metric."""
    expected: dict[str, set[str]] = defaultdict(set)
    for batch in batches:
        for metric, fingerprint in batch.fingerprints.items():
            expected[metric].add(fingerprint)
    return expected


@dataclass(frozen=True)
class _Group:
    """What PostgreSQL's write of a group needs, made before its transaction opens, so the
    transaction never waits for Python: the distinct reports in key order, and either each
    report's first place in the group (an id sent twice) or, every id distinct, their COPY
    and the counts (each report's first place is then made only if the COPY finds a report
    stored before)."""

    first: dict[ReportKey, tuple[int, int]] | None = None
    ordered: list[InsertRow] | None = None
    copy: pgupserts.CopyPlan | None = None
    counts: tuple[list[CountRow], list[SupportRow], list[SumRow]] | None = None

    @classmethod
    def of(cls, database: Database, batches: Sequence[PreparedBatch]) -> _Group:
        """The group's plan on PostgreSQL (an empty one on SQLite, which writes in one
        statement what its request threads built)."""
        if database.dialect == "sqlite":
            return cls()
        rows = [row for batch in batches for row in batch.rows]
        if len({row[0] for row in rows}) != len(rows):  # an id twice: the exact path
            first, ordered = _distinct(batches)
            return cls(first, ordered)
        ordered = sorted(rows, key=_KEY_ORDER)
        counts = count_rows(batches, None)
        copy = pgupserts.copy_plan(database, ordered, counts[0], counts[1])
        return cls(None, ordered, copy, counts)


_KEY_ORDER = operator.itemgetter(1, 2, 0)
"""An insert row's :func:`.prepare.report_key`, made in C (sorting a group by it)."""


def _distinct(
    batches: Sequence[PreparedBatch],
) -> tuple[dict[ReportKey, tuple[int, int]], list[InsertRow]]:
    """Each report's first place (batch, row) in the group, and the distinct reports in key
    order."""
    first: dict[ReportKey, tuple[int, int]] = {}
    for b, batch in enumerate(batches):
        for i, row in enumerate(batch.rows):
            first.setdefault(report_key(row), (b, i))
    return first, [batches[b].rows[i] for b, i in (first[key] for key in sorted(first))]


def _insert(
    connection: Connection, database: Database, batches: Sequence[PreparedBatch], group: _Group
) -> tuple[list[np.ndarray] | None, bool]:
    """Insert the group's new reports; each batch's mask of new reports, or None if all are,
    and whether the counts are stored already (PostgreSQL, every report new).

    Each report is inserted once, in key order across the whole group; a report is new for
    its first occurrence (in batch order) if its key was not stored before, and a duplicate
    everywhere else. On PostgreSQL a group of distinct reports is first tried by COPY.
    """
    if database.dialect == "sqlite" and sqliteupserts.insert_if_all_new(connection, batches):
        return None, False
    if group.copy is not None and pgupserts.copy_all_new(connection, group.copy):
        return None, False
    if group.first is not None and group.ordered is not None:
        first, ordered = group.first, group.ordered
    else:
        first, ordered = _distinct(batches)
    if database.dialect == "sqlite":
        new_keys = sqliteupserts.insert_new(connection, ordered)
    elif not ordered:
        new_keys = set()
    else:
        pg_new = pgupserts.store(connection, database, batches, ordered)
        if pg_new is None:
            return None, True
        new_keys = pg_new
    if len(new_keys) == sum(len(batch.rows) for batch in batches):
        return None, False
    masks = []
    for b, batch in enumerate(batches):
        keys = [report_key(row) for row in batch.rows]
        masks.append(
            np.fromiter(
                (key in new_keys and first[key] == (b, i) for i, key in enumerate(keys)),
                dtype=bool,
                count=len(keys),
            )
        )
    return masks, False


def _upsert_sums(connection: Connection, database: Database, sum_rows: list[SumRow]) -> None:
    """Add numeric sums (one row per metric and period, so a plain executemany; floats travel
    as bound doubles, exactly)."""
    if not sum_rows:
        return
    stmt = database.insert(numeric_sums)
    connection.execute(
        stmt.on_conflict_do_update(
            index_elements=["metric", "period"],
            set_={
                "n": numeric_sums.c.n + stmt.excluded.n,
                "total": numeric_sums.c.total + stmt.excluded.total,
                "total_squares": numeric_sums.c.total_squares + stmt.excluded.total_squares,
            },
        ),
        [
            {"metric": m, "period": p, "n": n, "total": y, "total_squares": y2}
            for m, p, n, y, y2 in sum_rows
        ],
    )


def _upsert_cells(
    connection: Connection,
    database: Database,
    batches: Sequence[PreparedBatch],
    new: Sequence[np.ndarray] | None,
) -> None:
    """Add the cell counts and support of the group's new reports, one row per touched
    (metric, period, cell) (after every other count, so the lock order stays reports,
    totals, cells); nothing for a group without metrics with dimensions."""
    if not any(batch.cells for batch in batches):
        return
    rows = cell_increments(batches, new)
    if not rows:
        return
    if database.dialect == "sqlite":
        sqliteupserts.upsert_cells(connection, rows)
    else:
        pgupserts.upsert_cells(connection, rows)
