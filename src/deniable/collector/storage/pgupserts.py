"""PostgreSQL: a group's reports written by COPY into their period's partition when none is
stored yet (the usual group), else with its counts in one statement; its cells in another.

The COPY text is built before the transaction opens (:func:`copy_plan`), so the transaction
only sends it. A group holding a report stored before (or twice) makes COPY fail on the key:
it is rolled back to a savepoint and the group written by :data:`STORE`, which skips the
duplicates.

Each column of :data:`STORE` travels as one text parameter split by ``string_to_array`` in the
database: psycopg dumps a Python list into an array literal in Python, which cost more than
the insert itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from psycopg import errors
from sqlalchemy import Connection, text

from .engine import Database
from .increments import CellRow, CountRow, SupportRow, count_rows
from .partitions import one_partition, partition_name, partitioned
from .pgnumeric import NumericArray
from .prepare import InsertRow, PreparedBatch, ReportKey
from .tables import period_counts, support_counts

SEP = "\x1f"
"""Separates the values of one column in the statements' text parameters: JSON text
(payloads) escapes every control character, and ids, metric names and periods have none."""

_PERIOD_COUNT_ROWS = """SELECT * FROM unnest(
        string_to_array(:n_metrics, :sep),
        string_to_array(:n_periods, :sep),
        string_to_array(:n_counts, ',')::bigint[]
    )"""
"""The period counts' rows, (metric, period, n), from the ``n_*`` text parameters of
:func:`_count_params`: the rows :data:`STORE` and :data:`_COUNTS` upsert."""

_SUPPORT_COUNT_ROWS = """SELECT * FROM unnest(
        string_to_array(:s_metrics, :sep),
        string_to_array(:s_periods, :sep),
        string_to_array(:s_categories, ',')::int[],
        string_to_array(:s_counts, ',')::bigint[]
    )"""
"""The support counts' rows, (metric, period, category, support), from the ``s_*`` text
parameters of :func:`_count_params`, likewise."""

_STATEMENT = """
WITH new AS (
    INSERT INTO reports (id, metric, period, payload, received, cell)
    SELECT i, m, p, v, r, coalesce(c, '') FROM unnest(
        string_to_array(:ids, ',')::uuid[],
        string_to_array(:metrics, :sep),
        string_to_array(:periods, :sep),
        string_to_array(:payloads, :sep),
        string_to_array(:received, ',')::date[],
        string_to_array(:cells, :sep)
    ) AS u(i, m, p, v, r, c)
    ON CONFLICT (metric, period, id) DO NOTHING
    RETURNING metric, period, id
), tally AS (
    SELECT count(*) AS n FROM new
), pc AS (
    INSERT INTO period_counts AS t (metric, period, n)
    {period_count_rows}
    WHERE (SELECT n FROM tally) = :total
    ON CONFLICT (metric, period) DO UPDATE SET n = t.n + excluded.n
    RETURNING 1
), sc AS (
    INSERT INTO support_counts AS t (metric, period, category, support)
    {support_count_rows}
    WHERE (SELECT count(*) FROM pc) > 0
    ON CONFLICT (metric, period, category) DO UPDATE SET support = t.support + excluded.support
    {sc_returning}
){numeric}
SELECT n, CASE WHEN n < :total
    THEN (SELECT array_agg(metric || :sep || period || :sep || id::text) FROM new) END
FROM tally
"""

_NUMERIC = """, ns AS (
    INSERT INTO numeric_sums AS t (metric, period, n, total, total_squares)
    SELECT * FROM unnest(
        string_to_array(:u_metrics, :sep),
        string_to_array(:u_periods, :sep),
        string_to_array(:u_counts, ',')::bigint[],
        string_to_array(:u_totals, ',')::float8[],
        string_to_array(:u_squares, ',')::float8[]
    )
    WHERE (SELECT count(*) FROM pc) > 0 AND (SELECT count(*) FROM sc) >= 0
    ON CONFLICT (metric, period) DO UPDATE SET
        n = t.n + excluded.n,
        total = t.total + excluded.total,
        total_squares = t.total_squares + excluded.total_squares
)"""


def _statement(sc_returning: str, numeric: str) -> str:
    """:data:`_STATEMENT` with the count rows, ``sc`` returning ``sc_returning`` and ending in
    ``numeric`` (the ``ns`` upsert, or nothing)."""
    return _STATEMENT.format(
        period_count_rows=_PERIOD_COUNT_ROWS,
        support_count_rows=_SUPPORT_COUNT_ROWS,
        sc_returning=sc_returning,
        numeric=numeric,
    )


STORE = text(_statement(sc_returning="", numeric=""))
"""A group's whole write as one statement (one round trip before the commit).

``new`` inserts the group's distinct reports in key order and returns the new keys; if every
report of the group is new (the usual case), ``pc`` then ``sc`` upsert the counts the
request threads precomputed, in sorted key order: ``pc`` runs only once ``new`` is complete
(it reads ``tally``) and ``sc`` only once ``pc`` is (it reads ``pc``), so the statement
locks reports, then period counts, then support counts, like every other writer. Otherwise
neither upsert writes a row, the statement returns the new keys, and the caller upserts
the counts of the new reports only. (Were a separator ever inside a value, the columns'
arrays would differ in length, ``unnest`` would pad with NULLs and the NOT NULL columns
would refuse the whole group: nothing stored, nothing acknowledged.)
"""

STORE_NUMERIC = text(_statement(sc_returning="RETURNING 1", numeric=_NUMERIC))
""":data:`STORE` plus ``ns``, the numeric sums, for a group holding numeric reports. ``ns``
writes only once ``pc`` has (so only if every report is new) and ``sc`` is complete (it reads
both), so it locks its rows last, after the support counts; each sum travels as its ``repr``
text (``str`` of a float), which ``float8`` reads back exactly. A group without numeric
reports runs :data:`STORE`, without ``sc`` returning rows nobody reads.
"""

_CELL_UPSERT = text("""
INSERT INTO cell_counts AS t (metric, period, cell, n, total, total_squares, support)
SELECT * FROM unnest(
    string_to_array(:metrics, :sep),
    string_to_array(:periods, :sep),
    string_to_array(:cells, :sep),
    string_to_array(:counts, ',')::bigint[],
    string_to_array(:totals, ',')::float8[],
    string_to_array(:squares, ',')::float8[],
    CAST(:support AS numeric[])
)
ON CONFLICT (metric, period, cell) DO UPDATE SET
    n = t.n + excluded.n,
    total = t.total + excluded.total,
    total_squares = t.total_squares + excluded.total_squares,
    support = t.support + excluded.support
""")
"""The cell upsert as one statement, each column one text parameter (as :data:`STORE`) but
the supports, one binary ``numeric[]`` of each row's packed vector (:mod:`.pgnumeric`), rows in
sorted key order; adding two packed vectors is one numeric addition (a numeric metric's
support is 0)."""


_COUNTS = text(f"""
WITH pc AS (
    INSERT INTO period_counts AS t (metric, period, n)
    {_PERIOD_COUNT_ROWS}
    ON CONFLICT (metric, period) DO UPDATE SET n = t.n + excluded.n
    RETURNING 1
)
INSERT INTO support_counts AS t (metric, period, category, support)
{_SUPPORT_COUNT_ROWS}
WHERE (SELECT count(*) FROM pc) >= 0
ON CONFLICT (metric, period, category) DO UPDATE SET support = t.support + excluded.support
""")
"""The period counts, then the support counts (it reads ``pc``, so it runs after), of a group
whose reports were all new, in one statement: the lock order of :data:`STORE`."""


@dataclass(frozen=True)
class CopyPlan:
    """A group's reports as one COPY, made before its transaction: the table it goes into
    (its one period's partition, or ``reports``), the rows as COPY text in key order, and
    the parameters of :data:`_COUNTS` for the counts they add."""

    table: str
    data: bytes
    rows: int
    counts: dict[str, Any]


def _copy_value(value: str) -> str:
    """``value`` escaped for COPY's text format (a backslash, a tab, a line break)."""
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


def copy_plan(
    database: Database,
    ordered: list[InsertRow],
    n_rows: list[CountRow],
    support_rows: list[SupportRow],
) -> CopyPlan | None:
    """The COPY of the group's distinct reports ``ordered`` (sorted by key) and its counts
    ``n_rows`` and ``support_rows``, or None if there are no reports."""
    if not ordered:
        return None
    first = ordered[0][2]
    one = all(row[2] == first for row in ordered)
    table = f'"{partition_name(first)}"' if one and partitioned(database) else "reports"
    data = "".join([f"{i}\t{m}\t{p}\t{v}\t{r}\t{c}\n" for i, m, p, v, r, c in ordered])
    plain = (
        "\\" not in data
        and "\r" not in data
        and data.count("\t") == 5 * len(ordered)
        and data.count("\n") == len(ordered)
    )
    if not plain:  # a value holds a character COPY escapes: escape each value
        data = "".join("\t".join(map(_copy_value, row)) + "\n" for row in ordered)
    return CopyPlan(table, data.encode(), len(ordered), _count_params(n_rows, support_rows))


def _count_params(n_rows: list[CountRow], support_rows: list[SupportRow]) -> dict[str, Any]:
    """The text parameters of :data:`_COUNTS` (and :data:`STORE`'s counts)."""
    n_metrics, n_periods, n_counts = zip(*n_rows, strict=True) if n_rows else ((), (), ())
    s_metrics, s_periods, s_categories, s_counts = (
        zip(*support_rows, strict=True) if support_rows else ((), (), (), ())
    )
    return {
        "sep": SEP,
        "n_metrics": _joined(n_metrics),
        "n_periods": _joined(n_periods),
        "n_counts": _joined(n_counts, ","),
        "s_metrics": _joined(s_metrics),
        "s_periods": _joined(s_periods),
        "s_categories": _joined(s_categories, ","),
        "s_counts": _joined(s_counts, ","),
    }


def write_counts(connection: Connection, plan: CopyPlan) -> None:
    """Add the planned period and support counts (one statement)."""
    connection.execute(_COUNTS, plan.counts)


def copy_all_new(connection: Connection, plan: CopyPlan) -> bool:
    """COPY the planned reports; True if all went in (every one new), else False with
    nothing of them written (a key was stored already: the caller takes :func:`store`)."""
    raw = connection.connection.driver_connection
    with raw.cursor() as cursor:
        cursor.execute("SAVEPOINT deniable_copy")
        try:
            with cursor.copy(
                f"COPY {plan.table} (id, metric, period, payload, received, cell) FROM STDIN"
            ) as copy:
                copy.write(plan.data)
        except errors.UniqueViolation:
            cursor.execute("ROLLBACK TO SAVEPOINT deniable_copy")
            cursor.execute("RELEASE SAVEPOINT deniable_copy")
            return False
        cursor.execute("RELEASE SAVEPOINT deniable_copy")
    return True


def _joined(values: Sequence[Any], sep: str = SEP) -> str:
    """``values`` as one text parameter, each as its ``str``, split by ``sep``."""
    return sep.join(map(str, values))


def store(
    connection: Connection,
    database: Database,
    batches: Sequence[PreparedBatch],
    ordered: list[InsertRow],
) -> set[ReportKey] | None:
    """Insert the group's distinct reports ``ordered`` and, if all are new, their counts (one
    statement).

    Returns None if every report of the group was new and its counts are stored, else the
    new keys (the counts are then not written).
    """
    total = sum(len(batch.rows) for batch in batches)
    n_rows, support_rows, sum_rows = count_rows(batches, None)
    ids, metrics, periods, payloads, received, cells = zip(*ordered, strict=True)
    params = {
        **_count_params(n_rows, support_rows),
        "total": total,
        "ids": _joined(ids, ","),
        "metrics": _joined(metrics),
        "periods": _joined(periods),
        "payloads": _joined(payloads),
        "received": _joined(received, ","),
        "cells": _joined(cells),
    }
    statement = STORE
    if sum_rows:
        statement = STORE_NUMERIC
        u_metrics, u_periods, u_counts, u_totals, u_squares = zip(*sum_rows, strict=True)
        params.update(
            u_metrics=_joined(u_metrics),
            u_periods=_joined(u_periods),
            u_counts=_joined(u_counts, ","),
            u_totals=_joined(u_totals, ","),
            u_squares=_joined(u_squares, ","),
        )
    n, new_keys = connection.execute(one_partition(database, statement, periods), params).one()
    if n == total:
        return None
    return {cast(ReportKey, tuple(key.split(SEP))) for key in new_keys or ()}


def upsert_counts(
    connection: Connection,
    database: Database,
    n_rows: list[CountRow],
    support_rows: list[SupportRow],
) -> None:
    """Add the period counts, then the support counts (rows in sorted key order)."""
    if n_rows:
        stmt = database.insert(period_counts)
        connection.execute(
            stmt.on_conflict_do_update(
                index_elements=["metric", "period"], set_={"n": period_counts.c.n + stmt.excluded.n}
            ),
            [{"metric": m, "period": p, "n": n} for m, p, n in n_rows],
        )
    if support_rows:
        stmt = database.insert(support_counts)
        connection.execute(
            stmt.on_conflict_do_update(
                index_elements=["metric", "period", "category"],
                set_={"support": support_counts.c.support + stmt.excluded.support},
            ),
            [
                {"metric": m, "period": p, "category": v, "support": c}
                for m, p, v, c in support_rows
            ],
        )


def upsert_cells(connection: Connection, rows: list[CellRow]) -> None:
    """Add the cell increments ``rows`` (sorted by key, at least one) in one statement."""
    m, p, c, n, y, y2, support = zip(*rows, strict=True)
    connection.execute(
        _CELL_UPSERT,
        {
            "sep": SEP,
            "metrics": _joined(m),
            "periods": _joined(p),
            "cells": _joined(c),
            "counts": _joined(n, ","),
            "totals": _joined(y, ","),
            "squares": _joined(y2, ","),
            "support": NumericArray.of_counts(support),
        },
    )
