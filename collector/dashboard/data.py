"""What the dashboard shows, read through the API's own route functions.

Every number on a page comes from the estimate and series documents the API answers
(``routes.estimates``), built by :mod:`deniable.estimators.documents`; the margins of the
overview come from the planner (:mod:`deniable.estimators.advisor`). Nothing is estimated
here a second way.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from deniable.client.errors import InvalidInput
from deniable.client.spec import MetricSpec, period_label, period_range
from deniable.estimators import margin_of_error, mean_margin
from deniable.estimators.choices import periods_back
from fastapi import Request

from ..context import collector
from ..routes.common import MetricPeriods
from ..routes.estimates import EstimateOptions, get_estimate, get_series
from ..routes.privacy import DEFAULT_RATIO, MAX_REPORTS_PER_PERIOD, get_privacy
from ..storage.queries import list_specs

OVERVIEW_PERIODS = 14
"""Periods the overview's sparklines cover."""
DEFAULT_TOP = 5
"""Categories the metric page's time series draws unless ``top`` says otherwise."""
MAX_TOP = 20
"""The most categories one time series draws."""


@dataclasses.dataclass(frozen=True)
class MetricRow:
    """One metric of the overview."""

    spec: MetricSpec
    current: int
    previous: int
    trend: list[float | None]
    leading: str | None
    margin: float | None


def last_periods(spec: MetricSpec, request: Request, count: int) -> list[str]:
    """The labels of the metric's last ``count`` periods up to the current one, oldest first."""
    current = period_label(spec.period, collector(request).today())
    return period_range(spec.period, periods_back(spec.period, current, count), current)


def estimate(
    request: Request,
    spec: MetricSpec,
    start: str | None,
    end: str | None,
    *,
    method: str | None = None,
    pooling: str = "overlap-safe",
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The API's estimate document (simultaneous intervals, the API's default method unless
    ``method`` is given); HTTPException as the API's."""
    options = EstimateOptions(confidence=confidence, method=method, simultaneous=True)  # type: ignore[arg-type]
    read = MetricPeriods(name=spec.name, start=start, end=end)
    return get_estimate(request, read, options, pooling=pooling, q=None)  # type: ignore[arg-type]


def series(
    request: Request,
    spec: MetricSpec,
    start: str | None,
    end: str | None,
    *,
    method: str | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The API's series document (simultaneous intervals, the API's default method unless
    ``method`` is given); HTTPException as the API's."""
    options = EstimateOptions(confidence=confidence, method=method, simultaneous=True)  # type: ignore[arg-type]
    return get_series(request, MetricPeriods(name=spec.name, start=start, end=end), options)


def leading_category(document: dict[str, Any]) -> str | None:
    """The category with the largest share over a series (reports-weighted), or None."""
    totals: dict[str, float] = {}
    for point in document["series"]:
        for row in point["estimates"]:
            if row["frequency"] is not None:
                totals[row["category"]] = totals.get(row["category"], 0.0) + point["n"] * max(
                    0.0, row["frequency"]
                )
    return max(totals, key=lambda c: totals[c]) if totals else None


def trend_of(document: dict[str, Any], category: str | None) -> list[float | None]:
    """Each period's share of ``category`` (or mean, for a numeric series), None without reports."""
    values: list[float | None] = []
    for point in document["series"]:
        if "mean" in point:
            values.append(point["mean"]["estimate"])
            continue
        row = next((r for r in point["estimates"] if r["category"] == category), None)
        values.append(None if row is None or row["frequency"] is None else row["frequency"])
    return values


def margin_now(spec: MetricSpec, n: int) -> float | None:
    """The planner's worst-case margin (95%, simultaneous for shares) at ``n`` reports: a share
    for categories, value units for a numeric metric; None without reports."""
    if n <= 0:
        return None
    try:
        if spec.type == "numeric":
            return mean_margin(spec.lower, spec.upper, spec.epsilon, n, mechanism=spec.mechanism)  # type: ignore[arg-type]
        return margin_of_error(
            spec.k, spec.epsilon, n, mechanism=spec.randomizer, simultaneous=True
        )
    except InvalidInput:
        return None


def overview(request: Request) -> list[MetricRow]:
    """Every registered (not archived) metric with its recent reports, trend and margin."""
    rows = []
    for spec in list_specs(collector(request).database, archived=False):
        labels = last_periods(spec, request, OVERVIEW_PERIODS)
        document = series(request, spec, labels[0], labels[-1])
        points = document["series"]
        leading = None if spec.type == "numeric" else leading_category(document)
        current = int(points[-1]["n"]) if points else 0
        previous = int(points[-2]["n"]) if len(points) > 1 else 0
        rows.append(
            MetricRow(
                spec=spec,
                current=current,
                previous=previous,
                trend=trend_of(document, leading),
                leading=leading,
                margin=margin_now(spec, current),
            )
        )
    return rows


def top_categories(document: dict[str, Any], top: int) -> list[str]:
    """The ``top`` categories with the largest shares in an estimate document, largest first."""
    rows = sorted(
        document["estimates"],
        key=lambda r: -(r["frequency"] if r["frequency"] is not None else -1.0),
    )
    return [r["category"] for r in rows[:top]]


def privacy(request: Request, values: dict[str, str]) -> dict[str, Any]:
    """The API's privacy account for the form's SDK settings (``GET /v1/privacy``'s own
    function, so the page shows its numbers); :class:`InvalidInput` naming a bad value."""
    reports_text = values["max_reports_per_period"]
    if not reports_text.isdigit() or not 1 <= int(reports_text) <= MAX_REPORTS_PER_PERIOD:
        raise InvalidInput(
            f"reports per metric and period must be a whole number from 1 to"
            f" {MAX_REPORTS_PER_PERIOD:,}"
        )
    lifetime: float | None = None
    if values["lifetime_epsilon"]:
        try:
            lifetime = float(values["lifetime_epsilon"])
        except ValueError:
            raise InvalidInput("the lifetime ε cap must be a number, or empty for none") from None
        if not (math.isfinite(lifetime) and lifetime > 0):
            raise InvalidInput("the lifetime ε cap must be a finite number above 0")
    if values["memoize"] not in ("true", "false"):
        raise InvalidInput("memoization is true (every metric) or false")
    if values["instantaneous_ratio"] not in (DEFAULT_RATIO, "none"):
        raise InvalidInput(f"the fresh layer of memoized reports is {DEFAULT_RATIO} or none")
    document = get_privacy(
        request, int(reports_text), values["memoize"], lifetime, values["instantaneous_ratio"]
    )
    return dataclasses.asdict(document)
