"""Period comparisons (``?compare_to=previous`` or ``?compare_to=START..END``): the estimate
over start..end minus the same estimate over a baseline window, per category (or a mean),
with an interval and a verdict, for the whole population or per slice (``by``/``where``).

The statistics are :mod:`deniable.estimators.differences` (valid whatever devices report in
both windows); this module reads the two windows' counts, suppresses small slices as a
breakdown does (a slice is shown only when both windows reach the minimum) and bounds the work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.kinds import NumericSpec
from deniable.client.spec import MetricSpec, period_count, period_range
from deniable.estimators.choices import periods_back
from deniable.estimators.differences import (
    Change,
    dependence,
    row_alpha,
)
from deniable.estimators.documents import plain
from deniable.estimators.engine import CellStats
from deniable.estimators.kinds import estimator_of

from ..context import Collector
from ..storage.queries import read_counts, read_sums
from .breakdown import Slicing, slice_stats, slice_values
from .ranges import period_bounds
from .refusal import refuse

PREVIOUS = "previous"
"""``compare_to`` naming the window of as many periods just before the range."""


@dataclass(frozen=True)
class SliceChange:
    """One slice's (or the whole population's) change: its reports in each window and a row
    per category (or one, ``mean``), or why it has none (suppressed: no number at all)."""

    values: dict[str, str]
    suppressed: bool
    note: str | None
    n: int | None
    baseline_n: int | None
    rows: list[Change] | None


@dataclass(frozen=True)
class PeriodComparison:
    """The estimate over start..end minus the one over baseline_start..baseline_end, per slice
    and category; ``row_confidence`` is each row's own level, which makes every difference
    shown hold at once at ``confidence``; ``dependence`` says why devices reporting in both
    windows do not break it."""

    metric: str
    start: str
    end: str
    baseline_start: str
    baseline_end: str
    confidence: float
    row_confidence: float
    method: str
    pooling: str
    by: list[str]
    where: dict[str, str]
    min_slice_reports: int | None
    dependence: str
    slices: list[SliceChange]
    lower: float | None = None
    upper: float | None = None
    # The metric's unit, description and owner (MetricAbout's fields), last, where the
    # answer carries them.
    unit: str | None = field(default=None, kw_only=True)
    description: str | None = field(default=None, kw_only=True)
    owner: str | None = field(default=None, kw_only=True)


def baseline_labels(spec: MetricSpec, labels: list[str], compare_to: str, limit: int) -> list[str]:
    """The baseline window's labels: ``previous`` (as many periods just before ``labels``) or
    ``START..END``; 422 naming the problem (a window past ``limit`` periods, or one sharing a
    period with the range)."""
    if compare_to == PREVIOUS:
        try:
            end = periods_back(spec.period, labels[0], 2)
            return period_range(spec.period, periods_back(spec.period, end, len(labels)), end)
        except (OverflowError, ValueError):
            raise refuse(
                f"compare_to: there is no window of {len(labels)} periods before {labels[0]}"
            ) from None
    start, dots, end = compare_to.partition("..")
    if not dots or not start or not end:
        raise refuse("compare_to: give previous, or a window START..END of period labels")
    first, last = period_bounds(spec, start, end)
    assert first is not None and last is not None
    if period_count(spec.period, first, last) > limit:
        raise refuse(f"compare_to: the window covers more than {limit} periods")
    if first <= labels[-1] and labels[0] <= last:
        raise refuse(
            f"compare_to: the window {first}..{last} shares periods with the range"
            f" {labels[0]}..{labels[-1]}; compare two windows without a common period"
        )
    return period_range(spec.period, first, last)


def _whole(state: Collector, spec: MetricSpec, labels: list[str]) -> CellStats:
    """The whole population's statistics over ``labels`` (the metric's totals)."""
    if isinstance(spec, NumericSpec):
        sums = read_sums(state.database, spec, labels)
        return CellStats(
            np.array([s.n for s in sums], dtype=np.int64),
            np.zeros((len(labels), 1), dtype=np.int64),
            np.array([s.total for s in sums]),
            np.array([s.total_squares for s in sums]),
        )
    n, counts = read_counts(state.database, spec, labels)
    return CellStats(n, counts, np.zeros(len(labels)), np.zeros(len(labels)))


def _rows(
    spec: MetricSpec,
    windows: tuple[list[str], list[str]],
    stats: tuple[CellStats, CellStats],
    **options: Any,
) -> list[Change]:
    """The change rows of one slice from its two windows' statistics, as its kind has them."""
    return estimator_of(spec).changes(spec, windows, stats, **options)


def period_comparison(
    state: Collector,
    spec: MetricSpec,
    labels: list[str],
    baseline: list[str],
    by: list[str] | None,
    where: dict[str, str] | None,
    *,
    confidence: float,
    method: str,
    pooling: str,
) -> dict[str, Any]:
    """The comparison document of ``spec``'s periods ``labels`` against ``baseline`` (the work
    bounded by the caller), per slice of ``by`` among the cells ``where`` keeps, or the whole
    population when neither is given (never suppressed, as its estimate is not)."""
    sliced = by is not None or where is not None
    dims, kept = list(by or []), dict(where or {})
    if sliced:
        now = slice_stats(state, Slicing(spec, labels, dims, kept))
        then = slice_stats(state, Slicing(spec, baseline, dims, kept))
        wanted = slice_values(spec, dims)
    else:
        now, then, wanted = (
            {(): _whole(state, spec, labels)},
            {(): _whole(state, spec, baseline)},
            [{}],
        )
    minimum = state.settings.min_slice_reports if sliced else None

    def counted(key: tuple[str, ...]) -> tuple[int, int]:
        return int(now[key].n.sum()), int(then[key].n.sum())

    shown = [key for key in now if minimum is None or min(counted(key)) >= minimum]
    rows_each = 1 if isinstance(spec, NumericSpec) else spec.k
    options = {
        "confidence": confidence,
        "tests": max(1, len(shown)),
        "pooling": pooling,
        "method": method,
    }
    slices = []
    for values in wanted:
        key = tuple(values.values())
        if key not in shown:
            note = f"suppressed, fewer than {minimum:,} reports in a window"
            slices.append(SliceChange(values, True, note, None, None, None))
            continue
        try:
            rows = _rows(spec, (labels, baseline), (now[key], then[key]), **options)
        except InvalidInput as exc:
            raise refuse(f"metric {spec.name}: {exc}") from None
        slices.append(SliceChange(values, False, None, *counted(key), rows))
    level = 1.0 - row_alpha(confidence, rows_each, len(shown))
    return plain(
        PeriodComparison(
            spec.name,
            labels[0],
            labels[-1],
            baseline[0],
            baseline[-1],
            confidence,
            level,
            spec.fixed_method or method,
            pooling,
            dims,
            kept,
            minimum,
            dependence(pooling),
            slices,
            spec.lower if isinstance(spec, NumericSpec) else None,
            spec.upper if isinstance(spec, NumericSpec) else None,
        )
    )
