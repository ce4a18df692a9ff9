"""The device's windows of events: which days it was active, each event metric's day aggregates,
and which windows are due to be reported.

Days are UTC day numbers (days since 1970-01-01). A window is due once the device's newest day
is past its last day; it is reported iff the device was active on one of its days (an SDK
client was open: the send decision depends on that public fact only, never on the events,
docs/STATS.md section 17) and it has a value (:func:`~.events.window_value`). Every
window is considered once: ``reported_through`` moves past it whether or not it was sent, and
that mark is committed with the report in one transaction, so a window is reported at most
once however the app is killed.

Time only moves forward here: an event is counted on the newest day the device has seen, so a
clock set back never adds to a window already reported.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .calendar import next_period, period_label, period_start
from .events import MAX_BACKFILL_DAYS, DayAggregate, EventRule, window_value
from .spec import MetricSpec

EPOCH = dt.date(1970, 1, 1)
ACTIVE_DAYS_KEPT = 28 + MAX_BACKFILL_DAYS + 31
"""How many days back the device remembers being active: enough for the longest window of the
oldest window still reported."""


def day_number(moment: dt.datetime | dt.date) -> int:
    """The UTC day number of ``moment`` (a naive datetime is taken as UTC)."""
    if isinstance(moment, dt.datetime):
        if moment.tzinfo is not None:
            moment = moment.astimezone(dt.UTC)
        moment = moment.date()
    return (moment - EPOCH).days


def day_date(day: int) -> dt.date:
    """The date of a day number."""
    return EPOCH + dt.timedelta(days=day)


@dataclass(frozen=True)
class Window:
    """One window of a metric: its first and last day numbers and the period label its report
    carries (the last day's, or the calendar period's)."""

    first: int
    last: int
    label: str


def window_ending(spec: MetricSpec, rule: EventRule, day: int) -> Window | None:
    """The window of ``spec`` whose last day is ``day``, or ``None`` if none ends that day (a
    calendar week or month ends on its last day only)."""
    if rule.rolling:
        return Window(day - rule.window + 1, day, period_label("day", day_date(day)))
    label = period_label(spec.period, day_date(day))
    if day_number(period_start(spec.period, next_period(spec.period, label))) != day + 1:
        return None
    return Window(day_number(period_start(spec.period, label)), day, label)


def first_window_end(spec: MetricSpec, rule: EventRule, known_from: int) -> int:
    """The last day of the first window that starts on or after ``known_from``, the first
    whole day the device had the spec: a window that began before holds events not counted
    under it, so it is never reported (it would read low)."""
    day = known_from
    while True:
        window = window_ending(spec, rule, day)
        if window is not None and window.first >= known_from:
            return day
        day += 1


@dataclass
class MetricDays:
    """One event metric's state: its fingerprint, its day aggregates and the last day of the
    last window considered (``reported_through``)."""

    fingerprint: str
    reported_through: int
    days: dict[int, DayAggregate] = field(default_factory=dict)


@dataclass
class BookDelta:
    """What changed since the last commit: day aggregates written (their JSON text; ``None``:
    deleted), metric marks (fingerprint, reported_through), active days added, and the day
    before which active days are forgotten."""

    days: dict[tuple[str, int], str | None] = field(default_factory=dict)
    marks: dict[str, tuple[str, int]] = field(default_factory=dict)
    active: set[int] = field(default_factory=set)
    forget_before: int = 0

    def __bool__(self) -> bool:
        """Whether there is anything to commit."""
        return bool(self.days or self.marks or self.active)


class WindowBook:
    """The event state of a device: active days, each event metric's days and marks.

    Not thread-safe: the recorder holds its lock around every call. ``newest`` is the newest
    day the device has seen; :meth:`due` yields the windows to report, oldest first.
    """

    def __init__(self) -> None:
        self.active: set[int] = set()
        self.metrics: dict[str, MetricDays] = {}
        self.newest = 0
        self._delta = BookDelta()
        self._dirty: set[tuple[str, int]] = set()

    # -- loading and installing ------------------------------------------------------------

    def load(
        self,
        active: Iterable[int],
        marks: Iterable[tuple[str, str, int]],
        days: Iterable[tuple[str, int, DayAggregate]],
    ) -> None:
        """The saved state (:meth:`.Outbox.load_events`)."""
        self.active = set(active)
        self.metrics = {m: MetricDays(f, through) for m, f, through in marks}
        for metric, day, aggregate in days:
            state = self.metrics.get(metric)
            if state is not None:
                state.days[day] = aggregate
        counted = (day for state in self.metrics.values() for day in state.days)
        self.newest = max([*self.active, *counted], default=0)

    def install(self, specs: Iterable[MetricSpec], today: int) -> None:
        """Start the state of each event metric not yet known (or known under another
        fingerprint: its old days are dropped) from the day after ``today``: the events of
        the day a spec arrived were not all counted under it, so its windows start the next
        day, and no window is ever partial."""
        self.see(today)
        for spec in specs:
            rule = spec.events
            if rule is None:
                continue
            state = self.metrics.get(spec.name)
            if state is not None and state.fingerprint == spec.fingerprint:
                continue
            if state is not None:
                for day in state.days:
                    self._delta.days[(spec.name, day)] = None
            through = first_window_end(spec, rule, self.newest + 1) - 1
            self.metrics[spec.name] = MetricDays(spec.fingerprint, through)
            self._delta.marks[spec.name] = (spec.fingerprint, through)

    # -- the hot path's helpers ------------------------------------------------------------

    def see(self, day: int) -> int:
        """Move the newest day forward to ``day`` (never back) and return it."""
        if day > self.newest:
            self.newest = day
        return self.newest

    def day_of(self, metric: str, day: int) -> DayAggregate:
        """``metric``'s aggregate of ``day``, made on first use (the caller marks it changed
        with :meth:`touch`)."""
        state = self.metrics[metric]
        aggregate = state.days.get(day)
        if aggregate is None:
            aggregate = state.days[day] = DayAggregate()
        return aggregate

    def mark_active(self, day: int) -> None:
        """The device was active (an SDK client open) on ``day``."""
        if day not in self.active:
            self.active.add(day)
            self._delta.active.add(day)

    # -- windows ---------------------------------------------------------------------------

    def due(self, specs: dict[str, MetricSpec]) -> Iterator[tuple[MetricSpec, Window, Any]]:
        """Each window of an installed event metric that closed before the newest day and was
        not yet considered, oldest first, with its value when it is reported (active on one of
        its days, a value, at most :data:`~.events.MAX_BACKFILL_DAYS` old); considering a
        window moves its metric's mark past it, and days no later window needs are dropped."""
        for name, state in self.metrics.items():
            spec = specs.get(name)
            if spec is None or spec.events is None or spec.fingerprint != state.fingerprint:
                continue
            rule = spec.events
            for day in range(state.reported_through + 1, self.newest):
                window = window_ending(spec, rule, day)
                state.reported_through = day
                self._delta.marks[name] = (state.fingerprint, day)
                if window is None or day < self.newest - MAX_BACKFILL_DAYS:
                    continue
                if not any(d in self.active for d in range(window.first, window.last + 1)):
                    continue
                value = window_value(
                    rule,
                    [
                        state.days[d]
                        for d in range(window.first, window.last + 1)
                        if d in state.days
                    ],
                    bounds=None
                    if spec.lower is None or spec.upper is None
                    else (spec.lower, spec.upper),
                    edges=spec.edges,
                    categories=spec.categories,
                )
                if value is not None:
                    yield spec, window, value
            self._prune(name, state, rule)
        cutoff = self.newest - ACTIVE_DAYS_KEPT
        self.active = {d for d in self.active if d >= cutoff}

    def _prune(self, name: str, state: MetricDays, rule: EventRule) -> None:
        """Drop the days no window after ``reported_through`` reads."""
        keep_from = state.reported_through + 1 - (rule.window - 1 if rule.rolling else 0)
        for day in [d for d in state.days if d < keep_from]:
            del state.days[day]
            self._dirty.discard((name, day))
            self._delta.days[(name, day)] = None

    # -- hand-off to the outbox ------------------------------------------------------------

    def touch(self, metric: str, day: int) -> None:
        """``metric``'s aggregate of ``day`` changed: save it with the next commit."""
        self._dirty.add((metric, day))

    def take_delta(self) -> BookDelta:
        """The changes since the last call, to be committed with the reports they produced."""
        delta, self._delta = self._delta, BookDelta()
        for metric, day in self._dirty:
            state = self.metrics.get(metric)
            if state is not None and day in state.days:
                delta.days[(metric, day)] = json.dumps(state.days[day].to_json())
        self._dirty = set()
        delta.forget_before = self.newest - ACTIVE_DAYS_KEPT
        return delta

    def restore_delta(self, delta: BookDelta) -> None:
        """Put back the changes of a failed commit, under anything newer."""
        for key, aggregate in delta.days.items():
            self._delta.days.setdefault(key, aggregate)
        for metric, mark in delta.marks.items():
            self._delta.marks.setdefault(metric, mark)
        self._delta.active |= delta.active
