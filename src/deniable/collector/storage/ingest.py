"""Store validated batches in one transaction: new reports, their period and support counts,
and for numeric metrics their sums (n, sum of y, sum of y^2 per metric and period).

A request thread prepares its batch (insert rows, support matrices); the writer only inserts
and sums, so the serialized part of ingestion stays small.

Before it writes, the transaction checks that the database still registers every metric of the
group under the fingerprint its reports were validated against (one query, share-locking the
metrics' rows on PostgreSQL): a collector's cached spec can be stale when the database was
dropped and migrated again underneath it, and a report the current spec does not accept, or
of a metric no longer registered, must never be stored (:class:`.queries.SpecChanged`).

``INSERT ... ON CONFLICT DO NOTHING RETURNING`` tells which reports are new, so a resent
report (across batches or twice in one batch) is counted once. A report is unique by its
(metric, period, id), the reports table's primary key: a resent report always repeats all
three, and new reports land in their period's part of the key, not all over one id index. Counts are upserted
(``support = support + excluded.support``) in sorted key order, and every transaction locks
metrics (shared, by name), then reports, then period counts, then support counts, so
concurrent writers on PostgreSQL never deadlock. Numeric sums are upserted last, after the
support counts, and only by a group that holds numeric reports: a group of categorical reports
runs exactly the statements it ran before numeric metrics existed. The cells of metrics with
dimensions come last, ``cell_counts`` then a text metric's ``text_cell_counts``
(:mod:`.textcells`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from typing import Any

import numpy as np
from sqlalchemy import (
    Connection,
    LargeBinary,
    Text,
    bindparam,
    func,
    literal_column,
    select,
    text,
    true,
)
from sqlalchemy.dialects import sqlite

from deniable.client.mechanisms import Payload
from deniable.client.spec import MetricSpec
from deniable.client.wire import payload_text
from deniable.estimators import support_matrix
from deniable.estimators.support import text_support

from .engine import Database
from .packedsums import plus_stored
from .partitions import one_partition, with_partitions
from .queries import check_fingerprints
from .shuffled import PartArrival, insert_part
from .tables import (
    cell_counts,
    decimal_counts,
    id_bytes,
    numeric_sums,
    pack_counts,
    period_counts,
    reports,
    support_counts,
)
from .textcells import ChunkCounts, TextCellRows, text_cell_rows, upsert_text_cells


@dataclass(frozen=True)
class ValidReport:
    """A report that passed validation, with its payload in canonical form."""

    id: str
    metric: str
    period: str
    payload: Payload | float
    cell: str = ""
    """Its dimension values as the stored cell text (``""``: its metric has no dimensions)."""


@dataclass
class StoredBatch:
    """What a committed batch changed: new and duplicate reports, in total and per metric."""

    accepted: int = 0
    duplicates: int = 0
    accepted_by_metric: dict[str, int] = field(default_factory=dict)
    duplicates_by_metric: dict[str, int] = field(default_factory=dict)


Counts = dict[tuple[str, str], tuple[int, np.ndarray]]
"""(metric, period) -> (reports, support sum per category)."""

Sums = dict[tuple[str, str], tuple[int, float, float]]
"""(metric, period) -> (reports, sum of y, sum of y^2) of a numeric metric."""

_NO_SUPPORT = np.zeros(0, dtype=np.int64)
"""The support sums of a numeric metric's period: it has no categories."""


def period_sums(codes: np.ndarray, support: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """(code, rows, support sum per category) for each distinct code, rows grouped by code.

    A batch mostly holds one period, summed directly; otherwise the rows are sorted by code
    and each run summed by ``np.add.reduceat``: no pass over the whole matrix per period.
    """
    if len(codes) == 0:
        return []
    first = int(codes[0])
    if (codes == first).all():
        return [(first, len(codes), support.sum(axis=0, dtype=np.int64))]
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    # Cast first: reduceat casting bool to int64 element by element is twice as slow.
    sums = np.add.reduceat(support[order].astype(np.int64), starts, axis=0)
    rows = np.diff(np.append(starts, len(codes))).tolist()
    return [
        (code, n, sums[j])
        for j, (code, n) in enumerate(zip(ordered[starts].tolist(), rows, strict=True))
    ]


@dataclass(frozen=True)
class MetricRows:
    """One metric's reports of a batch: their positions, periods and support matrix.

    ``periods`` holds the batch's distinct period labels and ``codes`` each row's index into
    it, so the sums group rows by integer, not by comparing strings.
    """

    positions: np.ndarray
    periods: list[str]
    codes: np.ndarray
    support: np.ndarray

    def counts(self, metric: str, mask: np.ndarray | None = None) -> Counts:
        """Report and support sums per period, of the rows ``mask`` selects (all if None)."""
        codes, support = (
            (self.codes, self.support) if mask is None else (self.codes[mask], self.support[mask])
        )
        return {
            (metric, self.periods[code]): (n, sums) for code, n, sums in period_sums(codes, support)
        }


def _period_codes(batch: Sequence[ValidReport], where: list[int]) -> tuple[list[str], np.ndarray]:
    """The distinct periods of the rows at ``where`` and each row's index into them."""
    index: dict[str, int] = {}
    codes = np.fromiter(
        (index.setdefault(batch[i].period, len(index)) for i in where),
        dtype=np.int64,
        count=len(where),
    )
    return list(index), codes


def metric_rows(batch: Sequence[ValidReport], where: list[int], spec: MetricSpec) -> MetricRows:
    """The rows of ``batch`` at positions ``where`` (all of ``spec``'s metric) as MetricRows."""
    periods, codes = _period_codes(batch, where)
    return MetricRows(
        np.asarray(where, dtype=np.int64),
        periods,
        codes,
        support_matrix(spec.randomizer, [batch[i].payload for i in where]),
    )


@dataclass(frozen=True)
class TextRows:
    """One text metric's reports of a batch: their positions, periods and the flat count
    indexes each adds one to (its set sketch cells and its (level, row) tally), so its
    per-(level, row, cell) sums go down the counts path like any other metric's."""

    positions: np.ndarray
    periods: list[str]
    codes: np.ndarray
    indexes: list[np.ndarray]
    size: int

    def counts(self, metric: str, mask: np.ndarray | None = None) -> Counts:
        """Report and per-cell sums per period, of the rows ``mask`` selects (all if None)."""
        chosen: dict[int, list[np.ndarray]] = defaultdict(list)
        for i, code in enumerate(self.codes.tolist()):
            if mask is None or mask[i]:
                chosen[code].append(self.indexes[i])
        return {
            (metric, self.periods[code]): (
                len(rows),
                np.bincount(np.concatenate(rows), minlength=self.size).astype(np.int64),
            )
            for code, rows in chosen.items()
        }


def text_rows(batch: Sequence[ValidReport], where: list[int], spec: MetricSpec) -> TextRows:
    """The rows of ``batch`` at positions ``where`` (all of one text metric) as TextRows."""
    periods, codes = _period_codes(batch, where)
    sketch = spec.text_randomizer
    indexes = text_support(sketch, [batch[i].payload for i in where])
    return TextRows(np.asarray(where, dtype=np.int64), periods, codes, indexes, sketch.cell_count)


@dataclass(frozen=True)
class NumericRows:
    """One numeric metric's reports of a batch: their positions, periods and payloads y."""

    positions: np.ndarray
    periods: list[str]
    codes: np.ndarray
    values: np.ndarray

    def sums(self, metric: str, mask: np.ndarray | None = None) -> Sums:
        """n, sum of y and sum of y^2 per period, of the rows ``mask`` selects (all if None).

        One ``bincount`` per statistic: a pass over the rows each, whatever the periods.
        """
        codes, values = (
            (self.codes, self.values) if mask is None else (self.codes[mask], self.values[mask])
        )
        size = len(self.periods)
        n = np.bincount(codes, minlength=size)
        total = np.bincount(codes, weights=values, minlength=size)
        squares = np.bincount(codes, weights=values * values, minlength=size)
        return {
            (metric, self.periods[c]): (int(n[c]), float(total[c]), float(squares[c]))
            for c in np.flatnonzero(n).tolist()
        }


def numeric_rows(batch: Sequence[ValidReport], where: list[int]) -> NumericRows:
    """The rows of ``batch`` at positions ``where`` (all of one numeric metric) as NumericRows."""
    periods, codes = _period_codes(batch, where)
    values = np.fromiter((batch[i].payload for i in where), dtype=np.float64, count=len(where))  # type: ignore[misc]
    return NumericRows(np.asarray(where, dtype=np.int64), periods, codes, values)


_CELL = "\x1e"
"""Joins a period label and a cell text in the grouping labels of :func:`cell_rows`."""


def cell_rows(
    batch: Sequence[ValidReport], rows: MetricRows | NumericRows
) -> MetricRows | NumericRows:
    """``rows`` (one metric with dimensions) grouped by period and cell: the same positions
    and support matrix or values, with ``period + _CELL + cell`` as each group's label.

    Each row's (period, cell) is one integer, its period code times the cells seen plus
    its cell code, so only the distinct pairs build a label.
    """
    seen: dict[str, int] = {}
    cell_codes = np.fromiter(
        (seen.setdefault(batch[i].cell, len(seen)) for i in rows.positions.tolist()),
        dtype=np.int64,
        count=len(rows.positions),
    )
    width = max(len(seen), 1)
    pairs, codes = np.unique(rows.codes * width + cell_codes, return_inverse=True)
    cells = list(seen)
    labels = [rows.periods[p // width] + _CELL + cells[p % width] for p in pairs.tolist()]
    codes = codes.reshape(-1)
    if isinstance(rows, NumericRows):
        return NumericRows(rows.positions, labels, codes, rows.values)
    return MetricRows(rows.positions, labels, codes, rows.support)


CellRow = tuple[str, str, str, int, float, float, np.ndarray]
"""A cell increment: (metric, period, cell, n, sum of y, sum of y^2, support per category;
empty for a numeric metric)."""


def _cell_increments(
    batches: Sequence[PreparedBatch], new: Sequence[np.ndarray] | None
) -> list[CellRow]:
    """The cell increments of the new reports of metrics with dimensions, summed over the
    whole group (one per touched (metric, period, cell)), in sorted key order (``new`` as in
    :func:`_count_rows`)."""
    counts: Counts = {}
    sums: Sums = {}
    for b, batch in enumerate(batches):
        if new is None or new[b].all():
            _add_counts(counts, batch.cell_counts)
            _add_sums(sums, batch.cell_sums)
            continue
        for metric, group in batch.cells.items():
            mask = new[b][group.positions]
            if not mask.any():
                continue
            if isinstance(group, NumericRows):
                _add_sums(sums, group.sums(metric, mask))
            else:
                _add_counts(counts, group.counts(metric, mask))
    rows: list[CellRow] = []
    for (metric, label), (n, support) in counts.items():
        period, cell = label.split(_CELL)
        rows.append((metric, period, cell, n, 0.0, 0.0, support))
    for (metric, label), (n, y, y2) in sums.items():
        period, cell = label.split(_CELL)
        rows.append((metric, period, cell, n, y, y2, _NO_SUPPORT))
    rows.sort(key=lambda row: row[:3])
    return rows


def _upsert_cells(
    connection: Connection, database: Database, batches: Sequence[PreparedBatch], new: Any
) -> None:
    """Add the cell counts and support of the group's new reports, one row per touched
    (metric, period, cell) (after every other count, so the lock order stays reports,
    totals, cells); nothing for a group without metrics with dimensions."""
    if not any(batch.cells for batch in batches):
        return
    rows = _cell_increments(batches, new)
    if not rows:
        return
    m, p, c, n, y, y2, support = zip(*rows, strict=True)
    if database.dialect == "sqlite":
        packed = plus_stored(
            connection,
            cell_counts,
            "support",
            [row[:3] for row in rows],
            [pack_counts(counts) for counts in support],
        )
        offsets = np.cumsum([0, *map(len, packed)]).tolist()
        spans = [(offsets[i], len(blob)) for i, blob in enumerate(packed)]
        connection.execute(
            _SQLITE_CELL_UPSERT,
            {
                "rows": _dumps([(*row[:6], *span) for row, span in zip(rows, spans, strict=True)]),
                "support": b"".join(packed),
            },
        )
        return
    connection.execute(
        _PG_CELL_UPSERT,
        {
            "sep": _SEP,
            "metrics": _joined(m),
            "periods": _joined(p),
            "cells": _joined(c),
            "counts": _joined(n, ","),
            "totals": _joined(y, ","),
            "squares": _joined(y2, ","),
            "support": ",".join(decimal_counts(support)),
        },
    )


def _sqlite_cell_upsert() -> Any:
    """SQLite: the cell upsert, fed one JSON text of (metric, period, cell, n, y, y2, offset,
    length) rows and one blob of every row's packed support (cut out by offset and length,
    like the report ids of :func:`_json_source`; an empty blob cuts to NULL, read as no
    bytes): one call into SQLite per group. n and the sums are added in place; the support
    written is already the sum with the stored one (:func:`.packedsums.plus_stored`)."""
    each = func.json_each(bindparam("rows", type_=Text)).table_valued("value", "key")
    values = [func.json_extract(each.c.value, literal_column(f"'$[{i}]'")) for i in range(6)]
    offset, length = (func.json_extract(each.c.value, literal_column(f"'$[{i}]'")) for i in (6, 7))
    packed = bindparam("support", type_=LargeBinary)
    support = func.coalesce(func.substr(packed, offset + 1, length), literal_column("x''"))
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


_PG_CELL_UPSERT = text("""
INSERT INTO cell_counts AS t (metric, period, cell, n, total, total_squares, support)
SELECT * FROM unnest(
    string_to_array(:metrics, :sep),
    string_to_array(:periods, :sep),
    string_to_array(:cells, :sep),
    string_to_array(:counts, ',')::bigint[],
    string_to_array(:totals, ',')::float8[],
    string_to_array(:squares, ',')::float8[],
    string_to_array(:support, ',')::numeric[]
)
ON CONFLICT (metric, period, cell) DO UPDATE SET
    n = t.n + excluded.n,
    total = t.total + excluded.total,
    total_squares = t.total_squares + excluded.total_squares,
    support = t.support + excluded.support
""")
"""PostgreSQL: the cell upsert as one statement, each column one text parameter (as
:data:`_PG_STORE`; a row's support is its packed ``numeric``, :func:`.tables.decimal_counts`),
rows in sorted key order; adding two packed vectors is one numeric addition (a numeric
metric's support is 0)."""


def _period_n(sums: Sums) -> Counts:
    """The period counts of numeric sums (no support: a numeric metric has no categories)."""
    return {key: (n, _NO_SUPPORT) for key, (n, _, _) in sums.items()}


@dataclass(frozen=True)
class PreparedBatch:
    """A validated batch ready to store, with everything the writer needs precomputed.

    ``rows`` are insert tuples (id, metric, period, payload, received as ISO text, cell);
    ``counts`` the period and support sums and ``sums`` the numeric metrics' sums if every
    report turns out new (the usual case); ``metrics`` and ``numeric`` the rows of the
    frequency-oracle and the numeric metrics; ``fingerprints`` the spec fingerprint each
    metric's reports were validated against.
    """

    reports: list[ValidReport]
    rows: list[InsertRow]
    metrics: dict[str, MetricRows | TextRows]
    counts: Counts
    per_metric: dict[str, int]
    fingerprints: dict[str, str]
    numeric: dict[str, NumericRows] = field(default_factory=dict)
    sums: Sums = field(default_factory=dict)
    cells: dict[str, MetricRows | NumericRows] = field(default_factory=dict)
    """The rows of each metric with dimensions again, grouped by (period, cell) rather than
    by period: their "period" labels are ``period + _CELL + cell`` (see :func:`cell_rows`)."""
    cell_counts: Counts = field(default_factory=dict)
    """Their per-(period, cell) support sums if every report turns out new (like ``counts``:
    summed in the request thread, so the writer only adds dicts)."""
    cell_sums: Sums = field(default_factory=dict)
    """The numeric metrics' per-(period, cell) sums, likewise."""
    text_cells: dict[str, TextCellRows] = field(default_factory=dict)
    """The rows of each text metric with dimensions grouped by (period, cell)
    (:mod:`.textcells`); such a metric's ``counts`` hold its period n only."""
    text_cell_counts: ChunkCounts = field(default_factory=dict)
    """Their sketch counts per (period, cell, sketch row) if every report turns out new."""
    part: PartArrival | None = None
    """The shuffled part these reports came in, if any: recorded with the distinct reports it
    stored anew in the same transaction, so a crash can never store the reports and lose the
    part's count (a part sent again would then count nothing)."""

    @cached_property
    def sqlite_rows(self) -> dict[str, Any]:
        """The rows as SQLite inserts them in one statement (see :func:`_sqlite_rows`).

        Only SQLite reads them, and building them costs about a third of preparing a batch,
        so they are built on first use; :func:`prepare_batch` builds them at once for SQLite,
        in the request thread rather than in the writer.
        """
        return _sqlite_rows(self.rows)


def _dumps(rows: Sequence[Any]) -> str:
    return json.dumps(rows, separators=(",", ":"))


InsertRow = tuple[str, str, str, str, str, str]
"""A report as inserted: (id, metric, period, payload JSON, received as ISO text, cell)."""

_COLUMNS = [column.name for column in reports.columns]
if _COLUMNS != ["id", "metric", "period", "payload", "received", "cell"]:
    raise RuntimeError(f"reports columns changed ({_COLUMNS}); update InsertRow")


def _sqlite_rows(rows: Sequence[InsertRow]) -> dict[str, Any]:
    """The parameters of the SQLite insert: rows without ids as JSON, ids as packed bytes."""
    return {
        "rows": _dumps([row[1:] for row in rows]),
        "ids": b"".join(id_bytes(row[0]) for row in rows),
    }


def prepare_batch(
    batch: Sequence[ValidReport],
    specs: Mapping[str, MetricSpec],
    received: dt.date,
    *,
    dialect: str | None = None,
) -> PreparedBatch:
    """Build the insert rows, support matrices and sums (work done outside the writer).

    With ``dialect="sqlite"`` the SQLite insert's parameters are built here too; any other
    dialect never needs them (None: built on first use).
    """
    day = received.isoformat()
    rows = [(r.id, r.metric, r.period, payload_text(r.payload), day, r.cell) for r in batch]
    positions: dict[str, list[int]] = defaultdict(list)
    for i, report in enumerate(batch):
        positions[report.metric].append(i)
    metrics: dict[str, MetricRows | TextRows] = {}
    numeric: dict[str, NumericRows] = {}
    counts: Counts = {}
    sums: Sums = {}
    cells: dict[str, MetricRows | NumericRows] = {}
    cell_counts: Counts = {}
    cell_sums: Sums = {}
    text_cells: dict[str, TextCellRows] = {}
    text_cell_counts: ChunkCounts = {}
    for metric, where in positions.items():
        spec = specs[metric]
        if spec.type == "numeric":
            numeric[metric] = numeric_rows(batch, where)
            sums.update(numeric[metric].sums(metric))
            if spec.dimensions:
                cells[metric] = cell_rows(batch, numeric[metric])
                cell_sums.update(cells[metric].sums(metric))  # type: ignore[union-attr]
        elif spec.type == "text" and spec.dimensions:
            text_cells[metric] = _text_cells(batch, where, spec, metrics, counts)
            text_cell_counts.update(text_cells[metric].increments(metric))
        elif spec.type == "text":
            metrics[metric] = text_rows(batch, where, spec)
            counts.update(metrics[metric].counts(metric))
        else:
            group = metrics[metric] = metric_rows(batch, where, spec)
            counts.update(
                _reports_per_period(group, metric) if spec.dimensions else group.counts(metric)
            )
            if spec.dimensions:
                cells[metric] = cell_rows(batch, group)
                cell_counts.update(cells[metric].counts(metric))  # type: ignore[union-attr]
    counts.update(_period_n(sums))
    per_metric = {metric: len(where) for metric, where in positions.items()}
    fingerprints = {metric: specs[metric].fingerprint for metric in positions}
    prepared = PreparedBatch(
        list(batch),
        rows,
        metrics,
        counts,
        per_metric,
        fingerprints,
        numeric,
        sums,
        cells,
        cell_counts,
        cell_sums,
        text_cells,
        text_cell_counts,
    )
    if dialect == "sqlite":
        _ = prepared.sqlite_rows
    return prepared


def _text_cells(
    batch: Sequence[ValidReport],
    where: list[int],
    spec: MetricSpec,
    metrics: dict[str, MetricRows | TextRows],
    counts: Counts,
) -> TextCellRows:
    """A text metric with dimensions: its rows by (period, cell) for ``text_cell_counts``;
    its rows by period go in ``metrics`` and their period n (no support) in ``counts``."""
    rows = metrics[spec.name] = text_rows(batch, where, spec)
    counts.update(_reports_per_period(rows, spec.name))
    keys = [(batch[i].period, batch[i].cell) for i in where]
    sketch = spec.text_randomizer
    return text_cell_rows(keys, rows.positions, rows.indexes, sketch.cells, rows.size)


def _reports_per_period(
    rows: MetricRows | TextRows, metric: str, mask: np.ndarray | None = None
) -> Counts:
    """The reports per period of the rows ``mask`` selects, with no support summed: a metric
    with dimensions keeps its support in its cells alone (``support_counts`` would repeat
    their sum, one more row per category and period for every group to lock), its totals
    being the sum of its cells."""
    codes = rows.codes if mask is None else rows.codes[mask]
    n = np.bincount(codes, minlength=len(rows.periods))
    return {(metric, rows.periods[c]): (int(n[c]), _NO_SUPPORT) for c in np.flatnonzero(n)}


def _add_counts(total: Counts, more: Counts) -> None:
    for key, (n, sums) in more.items():
        if key in total:
            n0, sums0 = total[key]
            total[key] = (n0 + n, sums0 + sums)
        else:
            total[key] = (n, sums)


def _add_sums(total: Sums, more: Sums) -> None:
    for key, (n, y, y2) in more.items():
        n0, y0, y20 = total.get(key, (0, 0.0, 0.0))
        total[key] = (n0 + n, y0 + y, y20 + y2)


SumRow = tuple[str, str, int, float, float]
"""A numeric sums increment: (metric, period, n, sum of y, sum of y^2)."""


def _count_rows(
    batches: Sequence[PreparedBatch], new: Sequence[np.ndarray] | None
) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int, int]], list[SumRow]]:
    """Period-count, support-count and numeric-sum increments of the new reports, in sorted
    key order.

    ``new`` holds each batch's mask of new reports; None means every report is new. Only the
    new reports count: a resent numeric report adds nothing to the sums.
    """
    total: Counts = {}
    sums: Sums = {}
    for b, batch in enumerate(batches):
        is_new = None if new is None else new[b]
        if is_new is None or is_new.all():
            _add_counts(total, batch.counts)
            if batch.sums:
                _add_sums(sums, batch.sums)
            continue
        for metric, group in batch.metrics.items():
            mask = is_new[group.positions]
            if not mask.any():
                continue
            if metric in batch.cells or metric in batch.text_cells:
                _add_counts(total, _reports_per_period(group, metric, mask))
            else:
                _add_counts(total, group.counts(metric, mask))
        for metric, values in batch.numeric.items():
            mask = is_new[values.positions]
            if mask.any():
                more = values.sums(metric, mask)
                _add_sums(sums, more)
                _add_counts(total, _period_n(more))
    keys = sorted(total)
    n_rows = [(m, p, total[(m, p)][0]) for m, p in keys]
    support_rows = []
    for m, p in keys:
        support = total[(m, p)][1]
        nonzero = np.flatnonzero(support)
        support_rows += zip(
            repeat(m), repeat(p), nonzero.tolist(), support[nonzero].tolist(), strict=False
        )
    sum_rows = [(m, p, *sums[(m, p)]) for m, p in sorted(sums)]
    return n_rows, support_rows, sum_rows


def _json_source(columns: int, *, ids: bool = False) -> Any:
    """SQLite: ``SELECT value->>0, ... FROM json_each(:rows) WHERE 1`` over a JSON array of rows.

    With ``ids``, the first column is row i's 16-byte id cut from the packed ``:ids`` blob.
    """
    each = func.json_each(bindparam("rows", type_=Text)).table_valued("value", "key")
    values = [func.json_extract(each.c.value, literal_column(f"'$[{i}]'")) for i in range(columns)]
    if ids:
        packed = bindparam("ids", type_=LargeBinary)
        values.insert(0, func.substr(packed, each.c.key * 16 + 1, 16))
    return select(*values).select_from(each).where(true())


def _sqlite_statements() -> tuple[Any, Any, Any]:
    """SQLite: report insert, period-count and support-count upserts, each fed one JSON text.

    One statement per group means one call into SQLite, which runs without the GIL: the
    request threads' Python work never stalls it row by row as ``executemany`` would be.
    """
    insert = (
        sqlite.insert(reports)
        .from_select(_COLUMNS, _json_source(len(_COLUMNS) - 1, ids=True))
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


_SQLITE_INSERT, _SQLITE_N_UPSERT, _SQLITE_SUPPORT_UPSERT = _sqlite_statements()
_SQLITE_CELL_UPSERT = _sqlite_cell_upsert()


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


def _upsert_counts(
    connection: Connection,
    database: Database,
    n_rows: list[tuple[str, str, int]],
    support_rows: list[tuple[str, str, int, int]],
) -> None:
    if database.dialect == "sqlite":
        if n_rows:
            connection.execute(_SQLITE_N_UPSERT, {"rows": _dumps(n_rows)})
        if support_rows:
            connection.execute(_SQLITE_SUPPORT_UPSERT, {"rows": _dumps(support_rows)})
        return
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


_SQLITE_LOOKUP_CHUNK = 900


ReportKey = tuple[str, str, str]
"""What makes a report unique: (metric, period, id), the reports table's primary key."""


def report_key(row: InsertRow) -> ReportKey:
    """The key of an insert row."""
    return row[1], row[2], row[0]


def _insert_new(connection: Connection, rows: list[InsertRow]) -> set[ReportKey]:
    """SQLite: insert the rows not stored yet (rows sorted by key); return the new keys.

    The transaction holds the database's only write lock (``BEGIN IMMEDIATE``), so looking
    the keys up first (by primary key, one query per metric and period) and inserting the
    rest is exact (PostgreSQL: :data:`_PG_STORE`).
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
        for start in range(0, len(ids), _SQLITE_LOOKUP_CHUNK):
            chunk = ids[start : start + _SQLITE_LOOKUP_CHUNK]
            found = connection.execute(lookup, {"metric": metric, "period": period, "ids": chunk})
            seen.update((metric, period, report_id) for report_id in found.scalars())
    fresh = [row for row in rows if report_key(row) not in seen]
    if fresh:
        connection.execute(_SQLITE_INSERT, _sqlite_rows(fresh))
    return {report_key(row) for row in fresh}


def _sqlite_insert_if_all_new(connection: Connection, batches: Sequence[PreparedBatch]) -> bool:
    """SQLite fast path: insert every row in one statement; keep it only if all were new.

    Inside a savepoint: if fewer rows went in than were sent (a resent id, or one id twice
    in the group), the insert is rolled back and the caller takes the exact path.
    """
    total = sum(len(batch.rows) for batch in batches)
    joined = (
        "[" + ",".join(batch.sqlite_rows["rows"][1:-1] for batch in batches if batch.rows) + "]"
    )
    ids = b"".join(batch.sqlite_rows["ids"] for batch in batches)
    connection.exec_driver_sql("SAVEPOINT deniable_ingest")
    inserted = connection.execute(_SQLITE_INSERT, {"rows": joined, "ids": ids}).rowcount
    if inserted != total:
        connection.exec_driver_sql("ROLLBACK TO deniable_ingest")
    connection.exec_driver_sql("RELEASE deniable_ingest")
    return inserted == total


_SEP = "\x1f"
"""Separates the values of one column in the PostgreSQL statement's text parameters: JSON text
(payloads) escapes every control character, and ids, metric names and periods have none."""

_PG_STATEMENT = """
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
    SELECT * FROM unnest(
        string_to_array(:n_metrics, :sep),
        string_to_array(:n_periods, :sep),
        string_to_array(:n_counts, ',')::bigint[]
    )
    WHERE (SELECT n FROM tally) = :total
    ON CONFLICT (metric, period) DO UPDATE SET n = t.n + excluded.n
    RETURNING 1
), sc AS (
    INSERT INTO support_counts AS t (metric, period, category, support)
    SELECT * FROM unnest(
        string_to_array(:s_metrics, :sep),
        string_to_array(:s_periods, :sep),
        string_to_array(:s_categories, ',')::int[],
        string_to_array(:s_counts, ',')::bigint[]
    )
    WHERE (SELECT count(*) FROM pc) > 0
    ON CONFLICT (metric, period, category) DO UPDATE SET support = t.support + excluded.support
    {sc_returning}
){numeric}
SELECT n, CASE WHEN n < :total
    THEN (SELECT array_agg(metric || :sep || period || :sep || id::text) FROM new) END
FROM tally
"""

_PG_NUMERIC = """, ns AS (
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

_PG_STORE = text(_PG_STATEMENT.format(sc_returning="", numeric=""))
"""PostgreSQL: a group's whole write as one statement (one round trip before the commit).

``new`` inserts the group's distinct reports in key order and returns the new keys; if every
report of the group is new (the usual case), ``pc`` then ``sc`` upsert the counts the
request threads precomputed, in sorted key order: ``pc`` runs only once ``new`` is complete
(it reads ``tally``) and ``sc`` only once ``pc`` is (it reads ``pc``), so the statement
locks reports, then period counts, then support counts, like every other writer. Otherwise
neither upsert writes a row, the statement returns the new keys, and the caller upserts
the counts of the new reports only. Each column travels as one text parameter split by
``string_to_array`` in the database: psycopg dumps a Python list into an array literal in
Python, which cost more than the insert itself. (Were a separator ever inside a value, the
columns' arrays would differ in length, ``unnest`` would pad with NULLs and the NOT NULL
columns would refuse the whole group: nothing stored, nothing acknowledged.)
"""

_PG_STORE_NUMERIC = text(_PG_STATEMENT.format(sc_returning="RETURNING 1", numeric=_PG_NUMERIC))
"""PostgreSQL: :data:`_PG_STORE` plus ``ns``, the numeric sums, for a group holding numeric
reports. ``ns`` writes only once ``pc`` has (so only if every report is new) and ``sc`` is
complete (it reads both), so it locks its rows last, after the support counts; each sum
travels as its ``repr`` text (``str`` of a float), which ``float8`` reads back exactly. A group without numeric
reports runs :data:`_PG_STORE`, without ``sc`` returning rows nobody reads.
"""


def _joined(values: Sequence[Any], sep: str = _SEP) -> str:
    return sep.join(map(str, values))


def _pg_store(
    connection: Connection,
    database: Database,
    batches: Sequence[PreparedBatch],
    ordered: list[InsertRow],
) -> set[ReportKey] | None:
    """Insert the group's distinct reports and, if all are new, their counts (one statement).

    Returns None if every report of the group was new and its counts are stored, else the
    new keys (the counts are then not written).
    """
    total = sum(len(batch.rows) for batch in batches)
    n_rows, support_rows, sum_rows = _count_rows(batches, None)
    ids, metrics, periods, payloads, received, cells = zip(*ordered, strict=True)
    n_metrics, n_periods, n_counts = zip(*n_rows, strict=True) if n_rows else ((), (), ())
    s_metrics, s_periods, s_categories, s_counts = (
        zip(*support_rows, strict=True) if support_rows else ((), (), (), ())
    )
    params = {
        "sep": _SEP,
        "total": total,
        "ids": _joined(ids, ","),
        "metrics": _joined(metrics),
        "periods": _joined(periods),
        "payloads": _joined(payloads),
        "received": _joined(received, ","),
        "cells": _joined(cells),
        "n_metrics": _joined(n_metrics),
        "n_periods": _joined(n_periods),
        "n_counts": _joined(n_counts, ","),
        "s_metrics": _joined(s_metrics),
        "s_periods": _joined(s_periods),
        "s_categories": _joined(s_categories, ","),
        "s_counts": _joined(s_counts, ","),
    }
    statement = _PG_STORE
    if sum_rows:
        statement = _PG_STORE_NUMERIC
        u_metrics, u_periods, u_counts, u_totals, u_squares = zip(*sum_rows, strict=True)
        params.update(
            u_metrics=_joined(u_metrics),
            u_periods=_joined(u_periods),
            u_counts=_joined(u_counts, ","),
            u_totals=_joined(u_totals, ","),
            u_squares=_joined(u_squares, ","),
        )
    n, new_keys = connection.execute(one_partition(database, statement, periods), params).one()
    return None if n == total else {tuple(key.split(_SEP)) for key in new_keys or ()}  # type: ignore[misc]


def _insert(
    connection: Connection, database: Database, batches: Sequence[PreparedBatch]
) -> tuple[list[np.ndarray] | None, bool]:
    """Insert the group's new reports; each batch's mask of new reports, or None if all are,
    and whether the counts are stored already (PostgreSQL, every report new).

    Each report is inserted once, in key order across the whole group; a report is new for
    its first occurrence (in batch order) if its key was not stored before, and a duplicate
    everywhere else.
    """
    if database.dialect == "sqlite" and _sqlite_insert_if_all_new(connection, batches):
        return None, False
    first: dict[ReportKey, tuple[int, int]] = {}
    for b, batch in enumerate(batches):
        for i, row in enumerate(batch.rows):
            first.setdefault(report_key(row), (b, i))
    ordered = [batches[b].rows[i] for b, i in (first[key] for key in sorted(first))]
    if database.dialect == "sqlite":
        new_keys = _insert_new(connection, ordered)
    elif not ordered:
        new_keys = set()
    else:
        pg_new = _pg_store(connection, database, batches, ordered)
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


def _expected_fingerprints(batches: Sequence[PreparedBatch]) -> dict[str, set[str]]:
    """Every fingerprint the group's batches were validated against, by metric."""
    expected: dict[str, set[str]] = defaultdict(set)
    for batch in batches:
        for metric, fingerprint in batch.fingerprints.items():
            expected[metric].add(fingerprint)
    return expected


def store_batches(database: Database, batches: Sequence[PreparedBatch]) -> list[StoredBatch]:
    """Store several prepared batches in one committed transaction; one result per batch,
    once the partitions of their periods exist (PostgreSQL, :mod:`.partitions`)."""
    if database.dialect != "postgresql":
        return _store_group(database, batches)
    labels = {row[2] for batch in batches for row in batch.rows}
    return with_partitions(database, labels, lambda: _store_group(database, batches))


def _store_group(database: Database, batches: Sequence[PreparedBatch]) -> list[StoredBatch]:
    """Store several prepared batches in one committed transaction; one result per batch.

    Raises :class:`.queries.SpecChanged` (nothing stored) if a metric of the group is no
    longer registered under the spec its reports were validated against.
    """
    expected = _expected_fingerprints(batches)
    with database.writing(changes=expected) as connection:
        check_fingerprints(connection, expected)
        new, counted = _insert(connection, database, batches)
        if not counted:
            n_rows, support_rows, sum_rows = _count_rows(batches, new)
            _upsert_counts(connection, database, n_rows, support_rows)
            _upsert_sums(connection, database, sum_rows)
        _upsert_cells(connection, database, batches, new)
        text_cells = [(batch.text_cells, batch.text_cell_counts) for batch in batches]
        upsert_text_cells(connection, database, text_cells, new)
        for index, batch in enumerate(batches):
            if batch.part is not None:
                counted = len(batch.rows) if new is None else int(new[index].sum())
                insert_part(connection, database, batch.part, counted)
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
