"""One metric's reports of a batch, grouped per kind, and their sums per period.

Pure preparation, no database: a categorical metric's rows carry a support matrix, a text
metric's rows their sketch rows and bits (summed by :mod:`.textcells`), a numeric metric's rows
their payloads y. Each sums the rows a mask selects per period, so the writer can count only
the new reports of a batch; the rows of a metric with dimensions are grouped again by (period,
cell) (:func:`cell_rows`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import cast, overload

import numpy as np

from deniable.client.spec import MetricSpec
from deniable.estimators import support_matrix
from deniable.estimators.support import text_encoded

from ..validation import ValidReport

Counts = dict[tuple[str, str], tuple[int, np.ndarray]]
"""(metric, period) -> (reports, support sum per category)."""

Sums = dict[tuple[str, str], tuple[int, float, float]]
"""(metric, period) -> (reports, sum of y, sum of y^2) of a numeric metric."""

NO_SUPPORT = np.zeros(0, dtype=np.int64)
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


def period_codes(batch: Sequence[ValidReport], where: list[int]) -> tuple[list[str], np.ndarray]:
    """The distinct periods of the rows at ``where`` and each row's index into them."""
    index: dict[str, int] = {}
    codes = np.fromiter(
        (index.setdefault(batch[i].period, len(index)) for i in where),
        dtype=np.int64,
        count=len(where),
    )
    return list(index), codes


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


def metric_rows(batch: Sequence[ValidReport], where: list[int], spec: MetricSpec) -> MetricRows:
    """The rows of ``batch`` at positions ``where`` (all of ``spec``'s metric) as MetricRows."""
    periods, codes = period_codes(batch, where)
    return MetricRows(
        np.asarray(where, dtype=np.int64),
        periods,
        codes,
        support_matrix(spec.randomizer, [batch[i].payload for i in where]),
    )


@dataclass(frozen=True)
class TextRows:
    """One text metric's reports of a batch: their positions, periods, sketch rows
    (``chunks``: (level - 1) × rows + row) and bits as received (``encoded``: each one's
    base64 ASCII codes, reports × length); they go to ``text_pending`` by (period, cell), their
    sums later to ``text_cell_counts`` by (period, cell, sketch row) (:mod:`.textcells`)."""

    positions: np.ndarray
    periods: list[str]
    codes: np.ndarray
    chunks: np.ndarray
    encoded: np.ndarray


def text_rows(batch: Sequence[ValidReport], where: list[int], spec: MetricSpec) -> TextRows:
    """The rows of ``batch`` at positions ``where`` (all of one text metric) as TextRows."""
    periods, codes = period_codes(batch, where)
    chunks, encoded = text_encoded(spec.text_randomizer, [batch[i].payload for i in where])
    return TextRows(np.asarray(where, dtype=np.int64), periods, codes, chunks, encoded)


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
    periods, codes = period_codes(batch, where)
    payloads = cast(Iterator[float], (batch[i].payload for i in where))
    values = np.fromiter(payloads, dtype=np.float64, count=len(where))
    return NumericRows(np.asarray(where, dtype=np.int64), periods, codes, values)


def period_n(sums: Sums) -> Counts:
    """The period counts of numeric sums (no support: a numeric metric has no categories)."""
    return {key: (n, NO_SUPPORT) for key, (n, _, _) in sums.items()}


def reports_per_period(
    rows: MetricRows | TextRows, metric: str, mask: np.ndarray | None = None
) -> Counts:
    """The reports per period of the rows ``mask`` selects, with no support summed: a metric
    with dimensions keeps its support in its cells alone (``support_counts`` would repeat
    their sum, one more row per category and period for every group to lock), its totals
    being the sum of its cells."""
    codes = rows.codes if mask is None else rows.codes[mask]
    n = np.bincount(codes, minlength=len(rows.periods))
    return {(metric, rows.periods[c]): (int(n[c]), NO_SUPPORT) for c in np.flatnonzero(n)}


CELL_SEP = "\x1e"
"""Joins a period label and a cell text in the grouping labels of :func:`cell_rows`."""


@overload
def cell_rows(batch: Sequence[ValidReport], rows: MetricRows) -> MetricRows: ...


@overload
def cell_rows(batch: Sequence[ValidReport], rows: NumericRows) -> NumericRows: ...


def cell_rows(
    batch: Sequence[ValidReport], rows: MetricRows | NumericRows
) -> MetricRows | NumericRows:
    """``rows`` (one metric with dimensions) grouped by period and cell: the same positions
    and support matrix or values, with ``period + CELL_SEP + cell`` as each group's label.

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
    labels = [rows.periods[p // width] + CELL_SEP + cells[p % width] for p in pairs.tolist()]
    codes = codes.reshape(-1)
    if isinstance(rows, NumericRows):
        return NumericRows(rows.positions, labels, codes, rows.values)
    return MetricRows(rows.positions, labels, codes, rows.support)
