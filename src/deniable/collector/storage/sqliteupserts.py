"""SQLite: a group's report insert and count upserts, each one statement fed one JSON text.

One statement per group means one call into SQLite, which runs without the GIL: the request
threads' Python work never stalls it row by row as ``executemany`` would. The transaction
holds the database's only write lock (``BEGIN IMMEDIATE``), so looking up which reports are
stored already and inserting the rest is exact.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    LargeBinary,
    Text,
    bindparam,
    cast,
    func,
    literal_column,
    select,
    true,
)
from sqlalchemy.dialects import sqlite

from .increments import CellRow, CountRow, SupportRow
from .packedsums import plus_stored
from .prepare import (
    REPORT_COLUMNS,
    InsertRow,
    PreparedBatch,
    ReportKey,
    json_rows,
    report_key,
    sqlite_insert_params,
)
from .sqlitejson import blob_cut, blob_spans, json_each_rows, json_items
from .tables import cell_counts, pack_counts, period_counts, reports, support_counts

LOOKUP_CHUNK = 900
"""The most report ids one lookup binds (below 999, the oldest SQLite's limit on bound
parameters)."""


def _json_source(columns: int) -> Any:
    """``SELECT value->>0, ... FROM json_each(:rows) WHERE 1`` over a JSON array of rows."""
    each = json_each_rows()
    return select(*json_items(each, range(columns))).select_from(each).where(true())


def _report_source() -> Any:
    """The reports of :func:`.prepare.sqlite_insert_params`: row i's 16-byte id cut from the
    packed ``:ids`` blob, its payload from ``:payloads`` (its length is its JSON row's third
    item; it starts where the rows before it end, a running sum), the rest from its row."""
    each = json_each_rows()
    metric, period, length, received, cell = json_items(each, range(5))
    ends = func.sum(length).over(order_by=each.c.key, rows=(None, 0))
    payload = func.substr(bindparam("payloads", type_=LargeBinary), ends - length + 1, length)
    return (
        select(
            func.substr(bindparam("ids", type_=LargeBinary), each.c.key * 16 + 1, 16),
            metric,
            period,
            cast(payload, Text),
            received,
            cell,
        )
        .select_from(each)
        .where(true())
    )


def _statements() -> tuple[Any, Any, Any]:
    """The report insert and the period-count and support-count upserts, each fed one JSON
    text."""
    insert = (
        sqlite.insert(reports)
        .from_select(REPORT_COLUMNS, _report_source())
        .on_conflict_do_nothing(index_elements=["metric", "period", "id"])
    )
    n_stmt = sqlite.insert(period_counts).from_select(["metric", "period", "n"], _json_source(3))
    n_upsert = n_stmt.on_conflict_do_update(
        index_elements=["metric", "period"], set_={"n": period_counts.c.n + n_stmt.excluded.n}
    )
    s_stmt = sqlite.insert(support_counts).from_select(
        ["metric", "period", "category", "support"], _json_source(4)
    )
    s_upsert = s_stmt.on_conflict_do_update(
        index_elements=["metric", "period", "category"],
        set_={"support": support_counts.c.support + s_stmt.excluded.support},
    )
    return insert, n_upsert, s_upsert


def _cell_upsert() -> Any:
    """The cell upsert, fed one JSON text of (metric, period, cell, n, y, y2, offset, length)
    rows and one blob of every row's packed support (cut out by offset and length, like the
    report ids of :func:`_json_source`; an empty blob cuts to NULL, read as no bytes): one
    call into SQLite per group. n and the sums are added in place; the support written is
    already the sum with the stored one (:func:`.packedsums.plus_stored`)."""
    each = json_each_rows()
    values = json_items(each, range(6))
    support = func.coalesce(blob_cut(each, "support", 6), literal_column("x''"))
    source = select(*values, support).select_from(each)
    stmt = sqlite.insert(cell_counts).from_select(
        ["metric", "period", "cell", "n", "total", "total_squares", "support"],
        source.where(true()),
    )
    return stmt.on_conflict_do_update(
        index_elements=["metric", "period", "cell"],
        set_={
            "n": cell_counts.c.n + stmt.excluded.n,
            "total": cell_counts.c.total + stmt.excluded.total,
            "total_squares": cell_counts.c.total_squares + stmt.excluded.total_squares,
            "support": stmt.excluded.support,
        },
    )


_INSERT, _N_UPSERT, _SUPPORT_UPSERT = _statements()
_CELL_UPSERT = _cell_upsert()


def insert_if_all_new(connection: Connection, batches: Sequence[PreparedBatch]) -> bool:
    """The fast path: insert every row in one statement; keep it only if all were new.

    Inside a savepoint: if fewer rows went in than were sent (a resent id, or one id twice
    in the group), the insert is rolled back and the caller takes the exact path.
    """
    total = sum(len(batch.rows) for batch in batches)
    joined = (
        "[" + ",".join(batch.sqlite_rows["rows"][1:-1] for batch in batches if batch.rows) + "]"
    )
    ids = b"".join(batch.sqlite_rows["ids"] for batch in batches)
    payloads = b"".join(batch.sqlite_rows["payloads"] for batch in batches)
    connection.exec_driver_sql("SAVEPOINT deniable_ingest")
    inserted = connection.execute(
        _INSERT, {"rows": joined, "ids": ids, "payloads": payloads}
    ).rowcount
    if inserted != total:
        connection.exec_driver_sql("ROLLBACK TO deniable_ingest")
    connection.exec_driver_sql("RELEASE deniable_ingest")
    return inserted == total


def insert_new(connection: Connection, rows: list[InsertRow]) -> set[ReportKey]:
    """Insert the rows not stored yet (rows sorted by key); return the new keys.

    The keys are looked up first (by primary key, one query per metric and period), and the
    rest inserted (PostgreSQL: :data:`.pgupserts.STORE`).
    """
    if not rows:
        return set()
    by_range: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in rows:
        by_range[(row[1], row[2])].append(row[0])
    seen: set[ReportKey] = set()
    lookup = select(reports.c.id).where(
        reports.c.metric == bindparam("metric"),
        reports.c.period == bindparam("period"),
        reports.c.id.in_(bindparam("ids", expanding=True)),
    )
    for (metric, period), ids in by_range.items():
        for start in range(0, len(ids), LOOKUP_CHUNK):
            chunk = ids[start : start + LOOKUP_CHUNK]
            found = connection.execute(lookup, {"metric": metric, "period": period, "ids": chunk})
            seen.update((metric, period, report_id) for report_id in found.scalars())
    fresh = [row for row in rows if report_key(row) not in seen]
    if fresh:
        connection.execute(_INSERT, sqlite_insert_params(fresh))
    return {report_key(row) for row in fresh}


def upsert_counts(
    connection: Connection, n_rows: list[CountRow], support_rows: list[SupportRow]
) -> None:
    """Add the period counts, then the support counts (rows in sorted key order)."""
    if n_rows:
        connection.execute(_N_UPSERT, {"rows": json_rows(n_rows)})
    if support_rows:
        connection.execute(_SUPPORT_UPSERT, {"rows": json_rows(support_rows)})


def upsert_cells(connection: Connection, rows: list[CellRow]) -> None:
    """Add the cell increments ``rows`` (sorted by key, at least one): the packed support of
    each is summed with the stored one first, then one statement writes them all."""
    packed = plus_stored(
        connection,
        cell_counts,
        "support",
        [row[:3] for row in rows],
        [pack_counts(row[6]) for row in rows],
    )
    spans = blob_spans(packed)
    connection.execute(
        _CELL_UPSERT,
        {
            "rows": json_rows([(*row[:6], *span) for row, span in zip(rows, spans, strict=True)]),
            "support": b"".join(packed),
        },
    )
