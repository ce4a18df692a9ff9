"""A validated batch made ready to store, in the request thread: its insert rows and, per
metric kind, its rows and sums per period (:mod:`.kindrows`).

A request thread prepares its batch (insert rows, support matrices, sums); the writer only
inserts and adds, so the serialized part of ingestion stays small. Nothing here touches the
database.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import orjson

from deniable.client.kinds import NumericSpec, TextSpec
from deniable.client.spec import MetricSpec
from deniable.client.wire import payload_text

from ..validation import ValidReport
from .kindrows import (
    Counts,
    MetricRows,
    NumericRows,
    Sums,
    TextRows,
    cell_rows,
    metric_rows,
    numeric_rows,
    period_n,
    reports_per_period,
    text_rows,
)
from .shuffled import PartArrival
from .tables import reports
from .textcells import PendingRow, TextCellRows, text_cell_rows

InsertRow = tuple[str, str, str, str, str, str]
"""A report as inserted: (id, metric, period, payload JSON, received as ISO text, cell)."""

REPORT_COLUMNS = [column.name for column in reports.columns]
"""The reports table's columns, in the order of :data:`InsertRow`."""
if REPORT_COLUMNS != ["id", "metric", "period", "payload", "received", "cell"]:
    raise RuntimeError(f"reports columns changed ({REPORT_COLUMNS}); update InsertRow")

ReportKey = tuple[str, str, str]
"""What makes a report unique: (metric, period, id), the reports table's primary key."""


def report_key(row: InsertRow) -> ReportKey:
    """The key of an insert row."""
    return row[1], row[2], row[0]


def json_rows(rows: Sequence[Any]) -> str:
    """``rows`` as compact JSON text, the one parameter a SQLite statement reads them from
    (written by orjson: strings, integers and floats, each read back by SQLite as it was)."""
    return orjson.dumps(rows, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def sqlite_insert_params(rows: Sequence[InsertRow]) -> dict[str, Any]:
    """The parameters of the SQLite insert: ids as packed bytes (every id is canonical UUID
    text, validated at the API, so all convert in one call), payloads as their UTF-8 bytes
    joined, and the rest as JSON, each row's payload as its length (a payload object inside
    a JSON text would be escaped, and SQLite would unescape it, quote by quote)."""
    payloads = [row[3].encode() for row in rows]
    return {
        "rows": json_rows(
            [
                (row[1], row[2], len(payload), row[4], row[5])
                for row, payload in zip(rows, payloads, strict=True)
            ]
        ),
        "ids": bytes.fromhex("".join([row[0] for row in rows]).replace("-", "")),
        "payloads": b"".join(payloads),
    }


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
    by period: their "period" labels are ``period + CELL_SEP + cell`` (see
    :func:`.kindrows.cell_rows`)."""
    cell_counts: Counts = field(default_factory=dict)
    """Their per-(period, cell) support sums if every report turns out new (like ``counts``:
    summed in the request thread, so the writer only adds dicts)."""
    cell_sums: Sums = field(default_factory=dict)
    """The numeric metrics' per-(period, cell) sums, likewise."""
    text_cells: dict[str, TextCellRows] = field(default_factory=dict)
    """The rows of each text metric grouped by (period, cell) (:mod:`.textcells`); a text
    metric's ``counts`` hold its period n only."""
    text_pending: list[PendingRow] = field(default_factory=list)
    """Their ``text_pending`` rows, one per (metric, period, cell), if every report turns out
    new."""
    part: PartArrival | None = None
    """The shuffled part these reports came in, if any: recorded with the distinct reports it
    stored anew in the same transaction, so a crash can never store the reports and lose the
    part's count (a part sent again would then count nothing)."""
    received_at: float | None = None
    """When the collector received the batch (epoch seconds, its clock), for ``arrivals``;
    None records no arrival."""

    @cached_property
    def sqlite_rows(self) -> dict[str, Any]:
        """The rows as SQLite inserts them in one statement (see :func:`sqlite_insert_params`).

        Only SQLite reads them, and building them costs about a third of preparing a batch,
        so they are built on first use; :func:`prepare_batch` builds them at once for SQLite,
        in the request thread rather than in the writer.
        """
        return sqlite_insert_params(self.rows)


class MetricPart(NamedTuple):
    """One metric's share of a batch, as a preparer takes it: the whole ``batch``, the
    ``metric``, the positions of its reports in the batch (``where``) and its ``spec``."""

    batch: Sequence[ValidReport]
    metric: str
    where: list[int]
    spec: MetricSpec


def prepare_batch(
    batch: Sequence[ValidReport],
    specs: Mapping[str, MetricSpec],
    received: dt.date,
    *,
    dialect: str | None = None,
    received_at: float | None = None,
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
    per_metric = {metric: len(where) for metric, where in positions.items()}
    fingerprints = {metric: specs[metric].fingerprint for metric in positions}
    prepared = PreparedBatch(
        list(batch), rows, {}, {}, per_metric, fingerprints, received_at=received_at
    )
    for metric, where in positions.items():
        spec = specs[metric]
        part = MetricPart(batch, metric, where, spec)
        _PREPARERS.get(type(spec), _prepare_categorical)(prepared, part)
    prepared.counts.update(period_n(prepared.sums))
    if dialect == "sqlite":
        _ = prepared.sqlite_rows
    return prepared


def _prepare_categorical(prepared: PreparedBatch, part: MetricPart) -> None:
    """A frequency-oracle metric (categorical, boolean, histogram): its support matrix, with
    its support summed per period, or per (period, cell) if it has dimensions."""
    batch, metric, where, spec = part
    rows = prepared.metrics[metric] = metric_rows(batch, where, spec)
    prepared.counts.update(
        reports_per_period(rows, metric) if spec.dimensions else rows.counts(metric)
    )
    if spec.dimensions:
        grouped = prepared.cells[metric] = cell_rows(batch, rows)
        prepared.cell_counts.update(grouped.counts(metric))


def _prepare_numeric(prepared: PreparedBatch, part: MetricPart) -> None:
    """A numeric metric: its payloads y, summed per period and, with dimensions, per
    (period, cell)."""
    batch, metric, where, spec = part
    rows = prepared.numeric[metric] = numeric_rows(batch, where)
    prepared.sums.update(rows.sums(metric))
    if spec.dimensions:
        grouped = prepared.cells[metric] = cell_rows(batch, rows)
        prepared.cell_sums.update(grouped.sums(metric))


def _prepare_text(prepared: PreparedBatch, part: MetricPart) -> None:
    """A text metric: its period n, and its rows by (period, cell) for ``text_cell_counts``
    (a metric without dimensions has the one cell ``""``)."""
    batch, metric, where, spec = part
    rows = prepared.metrics[metric] = text_rows(batch, where, spec)
    prepared.counts.update(reports_per_period(rows, metric))
    keys = [(batch[i].period, batch[i].cell) for i in where]
    grouped = text_cell_rows(keys, rows, spec.text_randomizer)
    prepared.text_cells[metric] = grouped
    prepared.text_pending.extend(grouped.pending(metric))


_Preparer = Callable[[PreparedBatch, MetricPart], None]
"""Adds one metric's rows and sums to the batch being prepared."""

_PREPARERS: dict[type[MetricSpec], _Preparer] = {
    NumericSpec: _prepare_numeric,
    TextSpec: _prepare_text,
}
"""The preparer of each metric kind that is not a frequency oracle's
(:func:`_prepare_categorical`), by its kind class."""
