"""The metric a query names and the period labels its start and end mean."""

from __future__ import annotations

from deniable.client.errors import InvalidInput
from deniable.client.spec import (
    MetricSpec,
    period_count,
    period_label,
    period_range,
    resolve_period,
)
from deniable.estimators import DEFAULT_PERIODS
from deniable.estimators.choices import periods_back

from ..context import Collector
from .refusal import UnknownMetric, refuse


def registered_spec(state: Collector, name: str) -> MetricSpec:
    """The registered metric ``name`` (:class:`~.refusal.UnknownMetric` if not registered)."""
    spec = state.specs.get(name)
    if spec is None:
        raise UnknownMetric(name)
    return spec


def period_of(spec: MetricSpec, value: str, which: str) -> str:
    """The period label of ``spec``'s kind that the ``which`` parameter's ``value`` names
    (:func:`~deniable.client.spec.resolve_period`); 422 naming the parameter and the metric."""
    try:
        return resolve_period(spec.period, value)
    except InvalidInput as exc:
        raise refuse(f"{which} is not valid for metric {spec.name}: {exc}") from None


def period_bounds(
    spec: MetricSpec, start: str | None, end: str | None
) -> tuple[str | None, str | None]:
    """The labels ``start`` and ``end`` name (None where not given); 422 if start is after end."""
    first = period_of(spec, start, "start") if start is not None else None
    last = period_of(spec, end, "end") if end is not None else None
    if first is not None and last is not None and first > last:
        raise refuse(f"start {first} is after end {last}")
    return first, last


def resolve_range(
    state: Collector, spec: MetricSpec, start: str | None, end: str | None
) -> list[str]:
    """The period labels from ``start`` to ``end``, oldest first: end defaults to the current
    period, start to :data:`~deniable.estimators.DEFAULT_PERIODS` periods ending at end."""
    current = period_label(spec.period, state.today())
    first, last = period_bounds(spec, start, end if end is not None else current)
    last = last or current
    try:
        first = first or periods_back(spec.period, last, DEFAULT_PERIODS)
    except OverflowError:  # before the calendar's first day
        raise refuse(
            f"start: there are not {DEFAULT_PERIODS} periods up to {last}; give start"
        ) from None
    limit = state.settings.max_range_periods
    if period_count(spec.period, first, last) > limit:
        raise refuse(f"the range covers more than {limit} periods")
    return period_range(spec.period, first, last)


def range_labels(
    state: Collector, name: str, start: str | None, end: str | None
) -> tuple[MetricSpec, list[str]]:
    """The registered metric ``name`` and the labels of its periods start..end, oldest first."""
    spec = registered_spec(state, name)
    return spec, resolve_range(state, spec, start, end)
