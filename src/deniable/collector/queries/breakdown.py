"""Breakdowns: one metric's estimate per slice of its public dimensions (``?by=platform``),
optionally filtered (``?where=platform:ios``), read from the per-cell counts only.

A slice is one value of each ``by`` dimension (a listed value or ``other``) among the cells
``where`` keeps; its statistics are the sums of those cells' counts. The intervals hold
simultaneously over every slice and category shown (Bonferroni: each slice's estimate is
made at 1 - (1 - confidence) / slices, simultaneous over its categories; docs/STATS.md).
A slice with fewer than ``min_slice_reports`` reports is suppressed: its row says so and
carries no number, not even its count (docs/privacy.md, "Dimensions").
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from deniable.client.errors import InvalidInput
from deniable.client.spec import OTHER, MetricSpec
from deniable.estimators import (
    HistogramEstimate,
    MeanRangeEstimate,
    RangeEstimate,
    plain,
)
from deniable.estimators.choices import Method, Pooling
from deniable.estimators.differences import interval_difference, verdict
from deniable.estimators.documents import counted_document
from deniable.estimators.engine import CellStats
from deniable.estimators.heavyhitters import TextEstimate
from deniable.estimators.kinds import SliceOptions, estimator_of

from ..context import Collector
from .refusal import refuse
from .stored import StoredCounts

MAX_BY = 2
"""The most dimensions one breakdown splits by."""


@dataclass(frozen=True)
class SliceEstimate:
    """One slice of a breakdown: its dimension values, and its estimate or why it has none."""

    values: dict[str, str]
    suppressed: bool
    note: str | None
    estimate: MeanRangeEstimate | HistogramEstimate | RangeEstimate | TextEstimate | None


@dataclass(frozen=True)
class MadeSlice:
    """One slice as a breakdown makes it: its dimension values, and its estimate's document
    (None when suppressed, ``note`` saying why); answered in the shape of :class:`SliceEstimate`."""

    values: dict[str, str]
    suppressed: bool
    note: str | None
    estimate: dict[str, Any] | None


@dataclass(frozen=True)
class Difference:
    """One category's (or a mean's) difference between two slices, first minus second."""

    category: str
    difference: float
    ci_low: float
    ci_high: float
    verdict: str


@dataclass(frozen=True)
class Comparison:
    """First slice minus second, with intervals holding at once over its rows (and every
    slice interval shown) at ``confidence``: each is the widest difference the two slices'
    intervals allow, valid however the slices' reports depend on each other (a device that
    changed context reports in both), and conservative."""

    first: dict[str, str]
    second: dict[str, str]
    confidence: float
    rows: list[Difference]


@dataclass(frozen=True)
class SlicedRead:
    """What every answer by slice names first: the ``metric``, its periods ``start``..``end``,
    the ``by`` dimensions and ``where`` filters that make the slices, and the ``confidence``
    the query asked."""

    metric: str
    start: str
    end: str
    by: list[str]
    where: dict[str, str]
    confidence: float


@dataclass(frozen=True)
class BreakdownEstimate(SlicedRead):
    """A metric's estimate per slice over the periods start..end (the estimate route's answer
    to ``by`` or ``where``): ``slice_confidence`` is each slice's own level, which makes every
    interval shown hold at once at ``confidence``."""

    slice_confidence: float
    min_slice_reports: int
    slices: list[SliceEstimate]
    comparison: Comparison | None = None
    # The metric's unit, description and owner (MetricAbout's fields), last, where the
    # answer carries them.
    unit: str | None = field(default=None, kw_only=True)
    description: str | None = field(default=None, kw_only=True)
    owner: str | None = field(default=None, kw_only=True)


def parse_compare(spec: MetricSpec, by: list[str], compare: str | None) -> tuple[str, str] | None:
    """The two values of the one ``by`` dimension to compare (``ios,android``); 422 naming
    the problem."""
    if compare is None:
        return None
    first, comma, second = compare.partition(",")
    if len(by) != 1 or not comma:
        raise refuse("compare: give two values of the one by dimension, like ios,android")
    allowed = [*dict(spec.dimensions)[by[0]], OTHER]
    if first not in allowed or second not in allowed or first == second:
        raise refuse(f"compare: two different values of {by[0]} ({', '.join(allowed)})")
    return first, second


def _points(chosen: MadeSlice) -> list[tuple[str, float, float, float]]:
    """(category, estimate, ci_low, ci_high) of a slice's document (a mean: one row); 422 if
    the slice is suppressed."""
    document = chosen.estimate
    if document is None:
        raise refuse(f"compare: slice {chosen.values} is {chosen.note}; nothing to compare")
    if "mean" in document:
        mean = document["mean"]
        return [("mean", mean["estimate"], mean["ci_low"], mean["ci_high"])]
    return [
        (row["category"], row["frequency"], row["ci_low"], row["ci_high"])
        for row in document["estimates"]
    ]


def compare_slices(first: MadeSlice, second: MadeSlice, confidence: float) -> Comparison:
    """First minus second per category, from the two slices' shown intervals: they all hold
    at once at ``confidence``, so [low1 - high2, high1 - low2] covers every difference at once
    too (:func:`~deniable.estimators.differences.interval_difference`); 422 if either slice is
    suppressed."""
    rows = []
    a, b = _points(first), _points(second)
    for (category, x, low_x, high_x), (_, y, low_y, high_y) in zip(a, b, strict=True):
        if x is None or y is None:
            raise refuse("compare: a slice has no estimate to compare")
        low, high = interval_difference((low_x, high_x), (low_y, high_y))
        rows.append(Difference(category, x - y, low, high, verdict(low, high, confidence)))
    return Comparison(first.values, second.values, confidence, rows)


def parse_by(spec: MetricSpec, by: Sequence[str] | None) -> list[str]:
    """The dimensions to split by (at most :data:`MAX_BY`, each declared once); 422 naming
    the problem."""
    names = [name for name, _ in spec.dimensions]
    chosen = list(by or [])
    for name in chosen:
        if name not in names:
            raise refuse(
                f"by: {spec.name} has no dimension {name!r}"
                + (f" (its dimensions: {', '.join(names)})" if names else " (it has none)")
            )
    if len(set(chosen)) != len(chosen) or len(chosen) > MAX_BY:
        raise refuse(f"by: at most {MAX_BY} distinct dimensions")
    return chosen


def parse_where(spec: MetricSpec, where: Sequence[str] | None) -> dict[str, str]:
    """The ``name:value`` filters as a dict; 422 naming an unknown dimension or value."""
    listed = dict(spec.dimensions)
    chosen: dict[str, str] = {}
    for condition in where or []:
        name, colon, value = condition.partition(":")
        if not colon or name not in listed:
            raise refuse(
                f"where: {condition[:40]!r} is not name:value for a dimension of {spec.name}"
                f" ({', '.join(listed) or 'it has none'})"
            )
        if value != OTHER and value not in listed[name]:
            raise refuse(f"where: dimension {name} takes one of its listed values or {OTHER!r}")
        if name in chosen:
            raise refuse(f"where: dimension {name} is given twice")
        chosen[name] = value
    return chosen


def slice_count(spec: MetricSpec, by: list[str]) -> int:
    """How many slices splitting ``spec`` by ``by`` makes (values + other, multiplied)."""
    listed = dict(spec.dimensions)
    count = 1
    for name in by:
        count *= len(listed[name]) + 1
    return count


def slice_values(spec: MetricSpec, by: list[str]) -> list[dict[str, str]]:
    """Every slice's values, listed values first and ``other`` last in each dimension."""
    listed = dict(spec.dimensions)
    choices = [[*listed[name], OTHER] for name in by]
    return [dict(zip(by, combo, strict=True)) for combo in itertools.product(*choices)]


def _cell_values(spec: MetricSpec, cell: str) -> dict[str, str]:
    return dict(zip((name for name, _ in spec.dimensions), cell.split(","), strict=True))


def _sum_cells(chosen: list[CellStats], periods: int, k: int) -> CellStats:
    total = CellStats.empty(periods, k)
    for stats in chosen:
        total.n += stats.n
        total.counts += stats.counts
        total.total += stats.total
        total.total_squares += stats.total_squares
    return total


@dataclass(frozen=True)
class Slicing:
    """What an answer by slice cuts: ``spec``'s periods ``labels``, split by the dimensions
    ``by`` (checked, :func:`parse_by`) among the cells ``where`` keeps (:func:`parse_where`)."""

    spec: MetricSpec
    labels: list[str]
    by: list[str]
    where: dict[str, str]


def slice_stats(state: Collector, slicing: Slicing) -> dict[tuple[str, ...], CellStats]:
    """Each slice's statistics over the periods, read from the collector's cells."""
    return group_cells(stored_cells(state, slicing.spec, slicing.labels), slicing)


def stored_cells(state: Collector, spec: MetricSpec, labels: list[str]) -> dict[str, CellStats]:
    """The collector's cells of ``spec`` over ``labels``: packed rows, or a text metric's
    sparse sketch counts (each cell's whole sketch per period)."""
    return StoredCounts(state.database, spec, labels).cells()


def group_cells(cells: dict[str, CellStats], slicing: Slicing) -> dict[tuple[str, ...], CellStats]:
    """Each slice's statistics over the periods (keyed by its ``by`` values, every slice
    present, in :func:`slice_values` order): the sums of the cells ``where`` keeps."""
    spec, by, where = slicing.spec, slicing.by, slicing.where
    grouped: dict[tuple[str, ...], list[CellStats]] = {
        tuple(values.values()): [] for values in slice_values(spec, by)
    }
    for cell, stats in cells.items():
        values = _cell_values(spec, cell)
        if all(values[name] == value for name, value in where.items()):
            grouped[tuple(values[name] for name in by)].append(stats)
    width = spec.count_width
    periods = len(slicing.labels)
    return {key: _sum_cells(chosen, periods, width) for key, chosen in grouped.items()}


def breakdown(
    state: Collector,
    slicing: Slicing,
    *,
    confidence: float,
    method: Method,
    pooling: Pooling,
    compare: tuple[str, str] | None = None,
    cells: dict[str, CellStats] | None = None,
    candidates: list[str] | None = None,
) -> dict[str, Any]:
    """The breakdown document of the ``slicing`` (its periods bounded by the caller), with the
    difference between the two ``compare`` slices if asked; ``cells`` are those periods' cells
    if the caller has read them already."""
    return breakdown_of_cells(
        stored_cells(state, slicing.spec, slicing.labels) if cells is None else cells,
        slicing,
        minimum=state.settings.min_slice_reports,
        confidence=confidence,
        method=method,
        pooling=pooling,
        compare=compare,
        candidates=candidates,
    )


def breakdown_of_cells(
    cells: dict[str, CellStats],
    slicing: Slicing,
    *,
    minimum: int,
    confidence: float,
    method: Method,
    pooling: Pooling,
    compare: tuple[str, str] | None = None,
    candidates: list[str] | None = None,
) -> dict[str, Any]:
    """The breakdown document from each cell's statistics (the collector's, or an archive's
    re-analysed), slices of fewer than ``minimum`` reports suppressed. A text metric's slices
    are each one period's heavy hitters (``labels`` one label; ``candidates`` scored instead
    if given), each run at alpha / (slices shown). Each kind's estimator
    (:mod:`deniable.estimators.kinds`) makes a slice's accumulator and its document."""
    spec, labels, by = slicing.spec, slicing.labels, slicing.by
    wanted = slice_values(spec, by)
    sums = group_cells(cells, slicing)
    shown = [key for key, stats in sums.items() if int(stats.n.sum()) >= minimum]
    level = 1 - (1 - confidence) / max(1, len(shown))
    first, last = labels[0], labels[-1]
    kind = estimator_of(spec)
    options = SliceOptions(level, method, pooling, len(shown), candidates)
    slices: list[MadeSlice] = []
    for values in wanted:
        key = tuple(values.values())
        if key not in shown:
            note = f"suppressed, fewer than {minimum:,} reports"
            slices.append(MadeSlice(values, True, note, None))
            continue
        accumulator = kind.from_cell(spec, sums[key], labels)
        try:
            document = counted_document(
                spec, kind.slice_document(spec, accumulator, (first, last), options)
            )
        except InvalidInput as exc:
            raise refuse(f"metric {spec.name}: {exc}") from None
        slices.append(MadeSlice(values, False, None, document))
    comparison = None
    if compare is not None:
        named = {row.values[by[0]]: row for row in slices}
        comparison = compare_slices(named[compare[0]], named[compare[1]], confidence)
    document = plain(
        BreakdownEstimate(
            spec.name, first, last, by, slicing.where, confidence, level, minimum, [], comparison
        )
    )
    # each slice's estimate is a document already: not walked again (it cost as much as making it)
    document["slices"] = [
        {
            "values": row.values,
            "suppressed": row.suppressed,
            "note": row.note,
            "estimate": row.estimate,
        }
        for row in slices
    ]
    return document
