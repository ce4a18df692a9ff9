"""Period ranges as users type them: labels, dates for week/month metrics, and ``--last N``.

The collector resolves labels the same way (a date names the week or month holding it), so
online and offline commands accept the same input.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .errors import CliError


def resolve_label(spec: Any, value: str | None) -> str | None:
    """A period label of the metric's kind; a date also names its week or month (as the API does)."""
    from deniable.client.spec import period_label, period_start

    if value is None:
        return None
    try:
        if period_label(spec.period, period_start(spec.period, value)) == value:
            return value
    except ValueError:
        pass
    if spec.period != "day":
        try:
            return period_label(spec.period, dt.date.fromisoformat(value))
        except ValueError:
            pass
    accepted = (
        "a day like 2026-11-21" if spec.period == "day" else f"a {spec.period} label or a date"
    )
    raise CliError(f"{value!r} is not {accepted}; metric {spec.name} is reported per {spec.period}")


def periods_back(kind: str, end: str, count: int) -> str:
    """The label ``count - 1`` periods before ``end`` (so start..end holds ``count`` periods)."""
    from deniable.client.spec import period_label, period_start

    first = period_start(kind, end)
    if kind == "day":
        return (first - dt.timedelta(days=count - 1)).isoformat()
    if kind == "week":
        return period_label(kind, first - dt.timedelta(weeks=count - 1))
    months = first.year * 12 + first.month - 1 - (count - 1)
    return period_label(kind, dt.date(months // 12, months % 12 + 1, 1))


def resolve_range(
    spec: Any, start: str | None, end: str | None, last: int | None
) -> tuple[str | None, str | None]:
    """Start and end labels; ``last`` N means the N periods ending at ``end`` (default: now)."""
    from deniable.client.spec import period_label

    start, end = resolve_label(spec, start), resolve_label(spec, end)
    if last is not None:
        if start is not None:
            raise CliError("give --start or --last, not both")
        end = end or period_label(spec.period, dt.datetime.now(dt.UTC))
        start = periods_back(spec.period, end, last)
    if start is not None and end is not None and start > end:
        raise CliError(f"start {start} is after end {end}")
    return start, end


def max_range_periods() -> int:
    """The most periods a range may cover: the collector's default ``max_range_periods``."""
    from deniable.collector.settings import Settings

    return Settings.model_fields["max_range_periods"].default


def check_range_size(kind: str, start: str, end: str) -> None:
    """Refuse a range of more periods than the collector would answer for."""
    from deniable.client.spec import period_count

    limit, count = max_range_periods(), period_count(kind, start, end)
    if count > limit:
        raise CliError(
            f"{start}..{end} covers {count:,} periods, more than the {limit:,} a range may hold;"
            " narrow it with --start/--end or --last"
        )
