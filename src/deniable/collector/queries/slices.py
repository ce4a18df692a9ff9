"""A series by slice (``/series?where=platform:ios``, ``/series?by=platform``): one breakdown
per period, so that a slice's trend exists beside the whole population's.

The cells of every period are read at once (one statement), then each period is estimated
on its own from its cells (:func:`.breakdown.breakdown` over that one period): its intervals hold at once over its categories and the slices shown in that period,
and a slice with fewer than ``min_slice_reports`` reports in that period is suppressed there
(no number, not its count), even if it is shown in others. Work is bounded before it starts:
slices × periods × categories at most ``max_series_cells``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deniable.client.kinds import NumericSpec, TextSpec
from deniable.client.spec import MetricSpec
from deniable.estimators.engine import CellStats

from ..context import Collector
from ..storage.queries import read_cells
from .breakdown import (
    SlicedRead,
    SliceEstimate,
    Slicing,
    breakdown,
    parse_by,
    parse_where,
    slice_count,
)
from .query import EstimateQuery
from .refusal import refuse


@dataclass(frozen=True)
class SlicePoint:
    """One period of a series by slice: its slices' estimates (or why each has none), each
    made at ``slice_confidence``, which makes every interval of the period hold at once."""

    period: str
    slice_confidence: float
    slices: list[SliceEstimate]


@dataclass(frozen=True)
class SliceSeries(SlicedRead):
    """The series route's answer to ``by`` or ``where``: a breakdown per period of start..end,
    oldest first, periods without reports included (every slice of theirs suppressed)."""

    method: str
    min_slice_reports: int
    series: list[SlicePoint]
    # The metric's unit, description and owner (MetricAbout's fields), last, where the
    # answer carries them.
    unit: str | None = field(default=None, kw_only=True)
    description: str | None = field(default=None, kw_only=True)
    owner: str | None = field(default=None, kw_only=True)


def slice_series(
    state: Collector, spec: MetricSpec, labels: list[str], query: EstimateQuery
) -> dict[str, Any]:
    """The series by slice of ``spec`` over ``labels`` (the query's ``by``, ``where``,
    confidence and method); 422 naming the problem (a bad ``by`` or ``where``, or past
    ``DENIABLE_MAX_SERIES_CELLS``)."""
    confidence, method = query.confidence, query.shares_method(isinstance(spec, NumericSpec))
    if isinstance(spec, TextSpec):
        raise refuse(
            f"metric {spec.name} is text: a series by slice is not built for it; ask the"
            " estimate by slice (by, where) of each period",
        )
    dims, kept = parse_by(spec, query.by), parse_where(spec, query.where)
    slices = slice_count(spec, dims)
    k = 1 if isinstance(spec, NumericSpec) else spec.k
    limit = state.settings.max_series_cells
    if slices * len(labels) * k > limit:
        raise refuse(
            f"the series would cover {slices:,} slices × {len(labels):,} periods ×"
            f" {k:,} categories, more than the limit of {limit:,} cells"
            " (DENIABLE_MAX_SERIES_CELLS): ask for fewer periods or fewer dimensions",
        )
    cells = read_cells(state.database, spec, labels)
    points = []
    for i, label in enumerate(labels):
        period = {cell: _period(stats, i) for cell, stats in cells.items()}
        document = breakdown(
            state,
            Slicing(spec, [label], dims, kept),
            confidence=confidence,
            method=method,
            pooling="overlap-safe",
            cells=period,
        )
        points.append(
            {
                "period": label,
                "slice_confidence": document["slice_confidence"],
                "slices": document["slices"],
            }
        )
    return {
        "metric": spec.name,
        "start": labels[0],
        "end": labels[-1],
        "by": dims,
        "where": kept,
        "confidence": confidence,
        "method": method,
        "min_slice_reports": state.settings.min_slice_reports,
        "series": points,
    }


def _period(stats: CellStats, i: int) -> CellStats:
    """One cell's statistics in the ``i``-th period of a read alone."""
    return CellStats(
        stats.n[i : i + 1],
        stats.counts[i : i + 1],
        stats.total[i : i + 1],
        stats.total_squares[i : i + 1],
    )
