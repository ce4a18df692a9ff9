"""What the admin read routes share: the error answers they document, the period query
parameter, the metric a path names, and the period labels a request's start and end mean.

Route modules import from here, never from one another.
"""

from __future__ import annotations

from typing import Annotated, Any

from deniable.client.errors import InvalidInput
from deniable.client.spec import MetricSpec, resolve_period
from fastapi import HTTPException, Query, Request

from ..context import Collector, collector
from ..schemas import Problem

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem},
    404: {"model": Problem},
    422: {"model": Problem},
}
"""The error answers of an admin route that reads one metric."""

PERIOD_HELP = "a period label of the metric's kind (a YYYY-MM-DD date also works for week/month)"
PeriodQuery = Annotated[str | None, Query(max_length=32, description=PERIOD_HELP)]
"""An optional ``start`` or ``end`` query parameter."""


def find_spec(request: Request, name: str) -> tuple[Collector, MetricSpec]:
    """The collector and the registered metric ``name`` (404 if not registered)."""
    state = collector(request)
    spec = state.specs.get(name)
    if spec is None:
        raise HTTPException(status_code=404, detail=f"metric {name!r} is not registered")
    return state, spec


def period_of(spec: MetricSpec, value: str, which: str) -> str:
    """The period label of ``spec``'s kind that the ``which`` parameter's ``value`` names
    (:func:`~deniable.client.spec.resolve_period`); 422 naming the parameter and the metric."""
    try:
        return resolve_period(spec.period, value)
    except InvalidInput as exc:
        raise HTTPException(
            status_code=422, detail=f"{which} is not valid for metric {spec.name}: {exc}"
        ) from None


def period_bounds(
    spec: MetricSpec, start: str | None, end: str | None
) -> tuple[str | None, str | None]:
    """The labels ``start`` and ``end`` name (None where not given); 422 if start is after end."""
    first = period_of(spec, start, "start") if start is not None else None
    last = period_of(spec, end, "end") if end is not None else None
    if first is not None and last is not None and first > last:
        raise HTTPException(status_code=422, detail=f"start {first} is after end {last}")
    return first, last
