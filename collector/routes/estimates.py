"""Estimates over a range of periods and per-period series, read from stored counts only.

The documents are built by :mod:`deniable.estimators.documents`, the same builders the CLI's
offline estimates use, and their dataclasses are the response models.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any

from deniable.client.errors import InvalidInput
from deniable.client.spec import MetricSpec, period_count, period_label, period_range
from deniable.estimators import (
    Estimate,
    Method,
    PeriodCounts,
    Pooling,
    RangeEstimate,
    Series,
    estimate,
    estimate_document,
    series_document,
)
from fastapi import APIRouter, Depends, HTTPException, Query, Request

from ..context import Collector
from ..storage.queries import read_counts
from .common import MetricPeriods, MetricPeriodsQuery, find_spec, metric_read, period_bounds

router = APIRouter()

Confidence = Annotated[float, Query(gt=0, lt=1, description="e.g. 0.95")]


@dataclass
class EstimateOptions:
    """How each estimate of a read is made, as both estimate routes take it: the confidence
    level, the method, and whether the intervals hold for all categories at once.

    FastAPI fills it from the query as a dependency (:data:`EstimateOptionsQuery`).
    """

    confidence: Confidence = 0.95
    method: Method = "unbiased"
    simultaneous: bool = False


EstimateOptionsQuery = Annotated[EstimateOptions, Depends()]
"""The ``confidence``, ``method`` and ``simultaneous`` query parameters, as one object."""


def resolve_range(state: Collector, spec: MetricSpec, read: MetricPeriods) -> list[str]:
    """The period labels from start to end (defaults: the current period), oldest first."""
    current = period_label(spec.period, state.today())
    first, last = period_bounds(spec, read.start, read.end if read.end is not None else current)
    last = last or current
    first = first or last
    limit = state.settings.max_range_periods
    if period_count(spec.period, first, last) > limit:
        raise HTTPException(status_code=422, detail=f"the range covers more than {limit} periods")
    return period_range(spec.period, first, last)


def range_counts(request: Request, read: MetricPeriods) -> tuple[MetricSpec, list[PeriodCounts]]:
    """The metric and the counts of each of its periods start..end, oldest first."""
    state, spec = find_spec(request, read.name)
    labels = resolve_range(state, spec, read)
    n, counts = read_counts(state.database, spec, labels)
    periods = [PeriodCounts(label, int(n[i]), counts[i].tolist()) for i, label in enumerate(labels)]
    return spec, periods


def estimate_periods(spec: MetricSpec, periods: list[PeriodCounts], **options: Any) -> Estimate:
    """The estimate over ``periods`` (those without reports add nothing); 422 naming the metric
    if the estimators refuse the options or the counts."""
    try:
        return estimate(spec.randomizer, spec.categories, periods, **options)
    except InvalidInput as exc:
        raise HTTPException(status_code=422, detail=f"metric {spec.name}: {exc}") from None


@metric_read(router, "/v1/metrics/{name}/estimate", RangeEstimate)
def get_estimate(
    request: Request,
    read: MetricPeriodsQuery,
    options: EstimateOptionsQuery,
    pooling: Pooling = "overlap-safe",
) -> dict[str, Any]:
    """The population estimate over the periods start..end, pooled as ``pooling`` says."""
    spec, periods = range_counts(request, read)
    result = estimate_periods(spec, periods, pooling=pooling, **asdict(options))
    return estimate_document(spec.name, periods[0].period, periods[-1].period, result)


@metric_read(router, "/v1/metrics/{name}/series", Series)
def get_series(
    request: Request, read: MetricPeriodsQuery, options: EstimateOptionsQuery
) -> dict[str, Any]:
    """One estimate per period of start..end, oldest first; periods without reports have n = 0.

    ``simultaneous`` makes each period's intervals hold for all categories at once.
    """
    spec, periods = range_counts(request, read)
    chosen = asdict(options)
    points = [(period.period, estimate_periods(spec, [period], **chosen)) for period in periods]
    return series_document(spec.name, points, **chosen)
