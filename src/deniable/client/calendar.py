"""The period calendar: the day, week and month buckets reports are made in, by their labels.

A label is ``2026-11-21`` (day), ``2026-W47`` (ISO week) or ``2026-11`` (month); every
function here is pure and UTC, so the device, the collector and the CLI agree on it.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from .errors import InvalidInput

PeriodKind = Literal["day", "week", "month"]
PERIOD_KINDS: tuple[str, ...] = ("day", "week", "month")
_PERIOD_PATTERNS = {
    "day": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "week": re.compile(r"^\d{4}-W\d{2}$"),
    "month": re.compile(r"^\d{4}-\d{2}$"),
}


def _as_utc_date(moment: dt.datetime | dt.date) -> dt.date:
    """The UTC calendar day of ``moment`` (a naive datetime is taken as UTC)."""
    if isinstance(moment, dt.datetime):
        if moment.tzinfo is not None:
            moment = moment.astimezone(dt.UTC)
        return moment.date()
    return moment


def period_label(kind: str, moment: dt.datetime | dt.date) -> str:
    """The label of the ``kind`` period holding ``moment``: 2026-11-21, 2026-W47 or 2026-11."""
    day = _as_utc_date(moment)
    if kind == "day":
        return day.isoformat()
    if kind == "week":
        year, week, _ = day.isocalendar()
        return f"{year:04d}-W{week:02d}"
    if kind == "month":
        return f"{day.year:04d}-{day.month:02d}"
    raise InvalidInput("period must be one of day, week, month")


def period_start(kind: str, label: str) -> dt.date:
    """The first day of a period label; :class:`~.errors.InvalidInput` if it is not a
    well-formed label."""
    pattern = _PERIOD_PATTERNS.get(kind)
    if pattern is None:
        raise InvalidInput("period must be one of day, week, month")
    if not isinstance(label, str) or not pattern.match(label):
        raise InvalidInput(f"period {label!r} is not a {kind} label")
    try:
        if kind == "day":
            return dt.date.fromisoformat(label)
        if kind == "week":
            year, week = int(label[:4]), int(label[6:])
            return dt.date.fromisocalendar(year, week, 1)
        return dt.date(int(label[:4]), int(label[5:7]), 1)
    except ValueError:
        raise InvalidInput(f"period {label!r} is not a valid {kind}") from None


def resolve_period(kind: str, value: str) -> str:
    """The ``kind`` period label a user means by ``value``: a label of that kind, or, for week
    and month periods, a ``YYYY-MM-DD`` date inside the period.

    Raises :class:`~deniable.client.errors.InvalidInput` naming what is accepted; the one
    rule the collector's API and the CLI both apply.
    """
    try:
        if period_label(kind, period_start(kind, value)) == value:
            return value
    except ValueError:
        pass
    if kind != "day" and isinstance(value, str) and _PERIOD_PATTERNS["day"].match(value):
        try:
            return period_label(kind, dt.date.fromisoformat(value))
        except ValueError:
            pass
    accepted = "a YYYY-MM-DD date" if kind == "day" else f"a {kind} label or a YYYY-MM-DD date"
    raise InvalidInput(f"{value!r} is not {accepted}")


def next_period(kind: str, label: str) -> str:
    """The period right after ``label``."""
    start = period_start(kind, label)
    if kind == "day":
        return (start + dt.timedelta(days=1)).isoformat()
    if kind == "week":
        return period_label(kind, start + dt.timedelta(days=7))
    return period_label(kind, (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1))


def period_count(kind: str, start: str, end: str) -> int:
    """How many periods ``start``..``end`` holds (inclusive), counted without listing them."""
    first, last = period_start(kind, start), period_start(kind, end)
    if kind == "day":
        return (last - first).days + 1
    if kind == "week":
        return (last - first).days // 7 + 1
    return (last.year - first.year) * 12 + last.month - first.month + 1


def period_range(kind: str, start: str, end: str) -> list[str]:
    """Every period label from ``start`` to ``end`` inclusive, oldest first: days and weeks
    counted from the first day (90 labels stepped one by one, each parsed again, took a tenth
    of a 90-period estimate's CPU), months stepped."""
    first, last = period_start(kind, start), period_start(kind, end)
    if first > last:
        raise InvalidInput("start is after end")
    if kind == "day":
        return [
            start,
            *(
                (first + dt.timedelta(days=i)).isoformat()
                for i in range(1, (last - first).days + 1)
            ),
        ]
    if kind == "week":
        weeks = (last - first).days // 7
        return [
            start,
            *(period_label(kind, first + dt.timedelta(days=7 * i)) for i in range(1, weeks + 1)),
        ]
    labels = [start]
    while labels[-1] != end:
        labels.append(next_period(kind, labels[-1]))
    return labels
