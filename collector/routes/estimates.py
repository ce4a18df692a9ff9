"""Estimates over a range of periods and per-period series, read from stored counts only."""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

import numpy as np
from deniable.client.spec import MetricSpec, period_count, period_label, period_range, period_start
from deniable.estimators import PeriodCounts, estimate
from fastapi import APIRouter, HTTPException, Query, Request

from ..auth import ADMIN
from ..context import Collector, collector
from ..schemas import EstimateOut, Problem, SeriesOut
from ..storage.queries import read_counts

router = APIRouter()

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
Confidence = Annotated[float, Query(gt=0, lt=1, description="e.g. 0.95")]
Method = Literal["unbiased", "consistent", "mle"]
Pooling = Literal["overlap-safe", "independent"]
PERIOD_HELP = "a period label of the metric's kind (a YYYY-MM-DD date also works for week/month)"
PeriodQuery = Annotated[str | None, Query(max_length=32, description=PERIOD_HELP)]


def resolve_label(spec: MetricSpec, value: str, which: str) -> str:
    """A period label from a label of the metric's kind, or a date for week/month metrics."""
    try:
        start = period_start(spec.period, value)
        if period_label(spec.period, start) == value:
            return value
    except ValueError:
        pass
    if spec.period != "day" and _DATE.match(value):
        try:
            return period_label(spec.period, dt.date.fromisoformat(value))
        except ValueError:
            pass
    accepted = "a YYYY-MM-DD date" if spec.period == "day" else f"a {spec.period} label or a date"
    raise HTTPException(status_code=422, detail=f"{which} is not {accepted} for metric {spec.name}")


def resolve_range(
    state: Collector, spec: MetricSpec, start: str | None, end: str | None
) -> list[str]:
    """The period labels from start to end (defaults: the current period), oldest first."""
    last = (
        resolve_label(spec, end, "end")
        if end is not None
        else period_label(spec.period, state.today())
    )
    first = resolve_label(spec, start, "start") if start is not None else last
    if first > last:
        raise HTTPException(status_code=422, detail=f"start {first} is after end {last}")
    limit = state.settings.max_range_periods
    if period_count(spec.period, first, last) > limit:
        raise HTTPException(status_code=422, detail=f"the range covers more than {limit} periods")
    return period_range(spec.period, first, last)


def find_spec(request: Request, name: str) -> tuple[Collector, MetricSpec]:
    """The collector and the registered metric ``name`` (404 if not registered)."""
    state = collector(request)
    spec = state.specs.get(name)
    if spec is None:
        raise HTTPException(status_code=404, detail=f"metric {name!r} is not registered")
    return state, spec


def range_counts(
    request: Request, name: str, start: str | None, end: str | None
) -> tuple[MetricSpec, list[str], np.ndarray, np.ndarray]:
    """The metric, its labels start..end, and per label n and the support counts."""
    state, spec = find_spec(request, name)
    labels = resolve_range(state, spec, start, end)
    n, counts = read_counts(state.database, spec, labels)
    return spec, labels, n, counts


def _estimate(spec: MetricSpec, periods: list[PeriodCounts], **options: Any) -> dict[str, Any]:
    try:
        return estimate(spec.randomizer, spec.categories, periods, **options).to_dict()
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=f"metric {spec.name}: {exc}") from None


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem},
    404: {"model": Problem},
    422: {"model": Problem},
}


@router.get(
    "/v1/metrics/{name}/estimate",
    dependencies=[ADMIN],
    response_model=EstimateOut,
    responses=ERRORS,
)
def get_estimate(
    name: str,
    request: Request,
    start: PeriodQuery = None,
    end: PeriodQuery = None,
    confidence: Confidence = 0.95,
    method: Method = "unbiased",
    pooling: Pooling = "overlap-safe",
    simultaneous: bool = False,
) -> dict[str, Any]:
    """The population estimate over the periods start..end, pooled as ``pooling`` says."""
    spec, labels, n, counts = range_counts(request, name, start, end)
    periods = [
        PeriodCounts(label, int(n[i]), counts[i].tolist())
        for i, label in enumerate(labels)
        if n[i] > 0
    ]
    document = _estimate(
        spec,
        periods,
        confidence=confidence,
        method=method,
        pooling=pooling,
        simultaneous=simultaneous,
    )
    return {"metric": spec.name, "start": labels[0], "end": labels[-1], **document}


@router.get(
    "/v1/metrics/{name}/series", dependencies=[ADMIN], response_model=SeriesOut, responses=ERRORS
)
def get_series(
    name: str,
    request: Request,
    start: PeriodQuery = None,
    end: PeriodQuery = None,
    confidence: Confidence = 0.95,
    method: Method = "unbiased",
    simultaneous: bool = False,
) -> dict[str, Any]:
    """One estimate per period of start..end, oldest first; periods without reports have n = 0.

    ``simultaneous`` makes each period's intervals hold for all categories at once.
    """
    spec, labels, n, counts = range_counts(request, name, start, end)
    series = []
    for i, label in enumerate(labels):
        periods = [PeriodCounts(label, int(n[i]), counts[i].tolist())] if n[i] > 0 else []
        document = _estimate(
            spec, periods, confidence=confidence, method=method, simultaneous=simultaneous
        )
        series.append({"period": label, "n": int(n[i]), "estimates": document["estimates"]})
    return {
        "metric": spec.name,
        "confidence": confidence,
        "method": method,
        "simultaneous": simultaneous,
        "series": series,
    }
