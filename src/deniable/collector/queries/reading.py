"""What every answer shares: the collector's counts and sums of a range, the metric's about
(unit, description, owner), and the estimators' refusals as the query's (422 naming the
metric)."""

from __future__ import annotations

from typing import Any

from deniable.client.errors import InvalidInput
from deniable.client.kinds import HistogramSpec
from deniable.client.spec import MetricSpec
from deniable.estimators import (
    Estimate,
    PeriodCounts,
    PeriodSums,
    check_numeric_method,
    check_quantiles,
)
from deniable.estimators.kinds import estimator_of

from ..context import Collector
from ..storage.queries import load_about, read_counts, read_sums
from .query import EstimateQuery
from .refusal import QueryRefused, refuse


def range_counts(state: Collector, spec: MetricSpec, labels: list[str]) -> list[PeriodCounts]:
    """The counts of each of the metric's periods ``labels``, in that order."""
    n, counts = read_counts(state.database, spec, labels)
    return [PeriodCounts(label, int(n[i]), counts[i].tolist()) for i, label in enumerate(labels)]


def about(state: Collector, spec: MetricSpec, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the metric's unit, description and owner as registered now."""
    return document | load_about(state.database, spec.name).as_dict()


def refused(spec: MetricSpec, exc: InvalidInput) -> QueryRefused:
    """The 422 naming the metric whose options or stored data the estimators refused."""
    return refuse(f"metric {spec.name}: {exc}")


def share_options(query: EstimateQuery) -> dict[str, Any]:
    """The options of a share estimate, the method defaulted."""
    return {
        "confidence": query.confidence,
        "method": query.shares_method(numeric=False),
        "simultaneous": query.simultaneous,
    }


def estimate_periods(spec: MetricSpec, periods: list[PeriodCounts], **options: Any) -> Estimate:
    """The estimate over ``periods`` (those without reports add nothing); 422 naming the metric
    if the estimators refuse the options or the counts."""
    try:
        return estimator_of(spec).share_estimate(spec, periods, **options)
    except InvalidInput as exc:
        raise refused(spec, exc) from None


def numeric_method(spec: MetricSpec, query: EstimateQuery) -> None:
    """422 for a numeric metric's method other than unbiased (a mean has one estimator)."""
    try:
        check_numeric_method(query.method or "unbiased")
    except InvalidInput as exc:
        raise refused(spec, exc) from None


def numeric_sums(
    state: Collector, spec: MetricSpec, labels: list[str], query: EstimateQuery
) -> list[PeriodSums]:
    """The sums of numeric ``spec``'s periods ``labels``; 422 for a method other than
    unbiased (a mean has one estimator)."""
    numeric_method(spec, query)
    return read_sums(state.database, spec, labels)


def checked_quantiles(spec: MetricSpec, q: tuple[float, ...] | None) -> tuple[float, ...]:
    """The quantiles asked for (the defaults if none); 422 unless each is in (0, 1) and the
    metric is a histogram."""
    if q and not isinstance(spec, HistogramSpec):
        raise refuse(f"q is for histogram metrics; {spec.name} is {spec.type}")
    try:
        return check_quantiles(list(q) if q is not None else None)
    except InvalidInput as exc:
        raise refused(spec, exc) from None
