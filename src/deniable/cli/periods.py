"""Period ranges as users type them: labels, dates for week/month metrics, and ``--last N``.

A label or date becomes a period by :func:`deniable.client.spec.resolve_period`, the rule the
collector applies too, so online and offline commands accept the same input; the messages here
name the metric whose period kind decided.
"""

from __future__ import annotations

import datetime as dt

from deniable.client.errors import InvalidInput
from deniable.client.spec import MetricSpec, period_count, period_label, resolve_period
from deniable.estimators.choices import periods_back


def resolve_label(spec: MetricSpec, value: str | None) -> str | None:
    """A period label of the metric's kind; a date also names its week or month (as the API does)."""
    if value is None:
        return None
    try:
        return resolve_period(spec.period, value)
    except InvalidInput:
        accepted = (
            "a day like 2026-11-21" if spec.period == "day" else f"a {spec.period} label or a date"
        )
        raise InvalidInput(
            f"{value!r} is not {accepted}; metric {spec.name} is reported per {spec.period}"
        ) from None


def resolve_range(
    spec: MetricSpec, start: str | None, end: str | None, last: int | None
) -> tuple[str | None, str | None]:
    """Start and end labels; ``last`` N means the N periods ending at ``end`` (default: now)."""
    start, end = resolve_label(spec, start), resolve_label(spec, end)
    if last is not None:
        if start is not None:
            raise InvalidInput("give --start or --last, not both")
        end = end or period_label(spec.period, dt.datetime.now(dt.UTC))
        start = periods_back(spec.period, end, last)
    if start is not None and end is not None and start > end:
        raise InvalidInput(f"start {start} is after end {end}")
    return start, end


def check_range_size(kind: str, start: str, end: str) -> None:
    """Refuse a range of more periods than the collector answers for by default
    (:data:`~deniable.collector.settings.MAX_RANGE_PERIODS`)."""
    from deniable.collector.settings import MAX_RANGE_PERIODS

    count = period_count(kind, start, end)
    if count > MAX_RANGE_PERIODS:
        raise InvalidInput(
            f"{start}..{end} covers {count:,} periods, more than the {MAX_RANGE_PERIODS:,} a"
            " range may hold; narrow it with --start/--end or --last"
        )
