"""Events aggregated on the device: a metric's event rule, a day's running aggregate, and the
value one window of days reports.

An event metric is an ordinary metric (boolean, categorical, numeric or histogram) whose spec
carries an :class:`EventRule`. The app calls ``event()`` or ``observe()`` any number of times;
the SDK keeps one small :class:`DayAggregate` per metric and day, and when a window of days
closes it turns the window's days into one value (:func:`window_value`), which goes through the
metric's mechanism like a recorded value. So one report per metric and window is sent, whatever
the number of events, and the estimators apply unchanged (docs/STATS.md section 17).

Standard library only: the SDK imports this on every device.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import InvalidInput, SpecError

Aggregate = Literal["any", "count", "sum", "min", "max", "mean", "median", "last", "mode"]
AGGREGATES: tuple[str, ...] = (
    "any",
    "count",
    "sum",
    "min",
    "max",
    "mean",
    "median",
    "last",
    "mode",
)
"""Every aggregation a spec may declare (Cobalt's list is the floor)."""

COUNTED: frozenset[str] = frozenset({"any", "count"})
"""Aggregations of bare occurrences (``event()``); the others take observed values (``observe()``)."""

MUST_REPORT_EMPTY: frozenset[str] = COUNTED
"""Aggregations whose empty window is data (nothing occurred: false, zero), so every active
device reports it: otherwise a share would be of devices that saw an event, not of devices."""

MAY_REPORT_EMPTY: frozenset[str] = COUNTED | {"sum"}
"""Aggregations with a value for an empty window (a sum of nothing is 0); the others (a mean,
a median, a mode of nothing) have none, so a device without an observation sends nothing."""

NUMBER_AGGREGATES: frozenset[str] = frozenset(
    {"count", "sum", "min", "max", "mean", "median", "last"}
)
"""The aggregations that report a number: a numeric metric (a mean over devices) or a histogram
(their distribution) takes them. ``any`` is a boolean's, ``mode`` a categorical's; each kind
declares its own in ``event_aggregates``."""

WINDOW_DAYS: tuple[int, ...] = (1, 7, 28)
"""The rolling windows a spec may declare, in days (Cobalt's). A calendar window is the
metric's period instead (a day, an ISO week or a month)."""

MAX_BACKFILL_DAYS = 31
"""How long after it closed a window is still reported: a device offline longer reports the
windows of the last 31 days at its next start and drops the older ones (docs/sdk.md)."""

MEDIAN_BINS = 1024
"""A numeric metric's median is found over this many equal bins of [lower, upper], so a day
keeps at most this many counts however many values it observed; the median is the middle of
its bin, within (upper - lower) / 2048 of the values' median. A histogram's median is found
over its own buckets, exactly."""


@dataclass(frozen=True)
class EventRule:
    """How a metric aggregates its events on the device: ``aggregate`` (:data:`AGGREGATES`),
    the window (``window`` days, :data:`WINDOW_DAYS`, when ``rolling``, reported every day
    about the last ``window`` days; otherwise the metric's period, reported when it ends),
    and ``report_empty``: whether a device that saw no event in a window reports it (always
    for ``any`` and ``count``)."""

    aggregate: Aggregate
    window: int = 1
    rolling: bool = False
    report_empty: bool = False

    @classmethod
    def from_dict(cls, metric: str, data: Any) -> EventRule:
        """The rule from its JSON form ``{"aggregate": "count", "window": 7}``: ``window``
        given as days makes a rolling window reported daily (1: each calendar day), absent or
        ``"period"`` the metric's period (a day, week or month, reported when it ends); ``report_empty`` defaults to what the aggregate
        needs (true for ``any`` and ``count``)."""
        if not isinstance(data, Mapping):
            raise SpecError(
                f"metric {metric}: events must be an object like"
                ' {"aggregate": "count", "window": 7}'
            )
        unknown = set(data) - {"aggregate", "window", "report_empty"}
        if unknown:
            raise SpecError(f"metric {metric}: events has no field {sorted(unknown)[0]}")
        aggregate = data.get("aggregate")
        if aggregate not in AGGREGATES:
            raise SpecError(
                f"metric {metric}: events.aggregate must be one of {', '.join(AGGREGATES)}"
            )
        window = data.get("window", "period")
        if window == "period":
            days, rolling = 1, False
        elif isinstance(window, int) and not isinstance(window, bool) and window in WINDOW_DAYS:
            days, rolling = window, True
        else:
            raise SpecError(
                f'metric {metric}: events.window must be "period" or one of'
                f" {', '.join(map(str, WINDOW_DAYS))} (days, rolling)"
            )
        report_empty = data.get("report_empty", aggregate in MUST_REPORT_EMPTY)
        if not isinstance(report_empty, bool):
            raise SpecError(f"metric {metric}: events.report_empty must be true or false")
        return cls(aggregate, days, rolling, report_empty)

    def check(self, metric: str, type_name: str, allowed: frozenset[str], period: str) -> None:
        """Refuse a rule its metric cannot carry (:class:`~.errors.SpecError` naming the
        problem): an aggregation outside the kind's ``allowed`` ones, a rolling window over a
        period other than a day, or an empty window that must (or cannot) be reported."""
        if self.aggregate not in allowed:
            can = ", ".join(a for a in AGGREGATES if a in allowed) or "no aggregation"
            raise SpecError(
                f"metric {metric}: a {type_name} metric cannot aggregate events by"
                f" {self.aggregate} (it can: {can})"
            )
        if self.rolling and period != "day":
            raise SpecError(
                f"metric {metric}: a rolling window of {self.window} days is reported daily,"
                " so its period must be day"
            )
        if self.aggregate in MUST_REPORT_EMPTY and not self.report_empty:
            raise SpecError(
                f"metric {metric}: events.report_empty must be true for {self.aggregate}: a"
                " window without events is data (false, zero), and without it the estimate"
                " would be a share of devices that saw an event"
            )
        if self.report_empty and self.aggregate not in MAY_REPORT_EMPTY:
            raise SpecError(
                f"metric {metric}: events.report_empty cannot be true for {self.aggregate}: a"
                " window without an observation has no value"
            )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (in the fingerprint): ``window`` is days when rolling, else
        ``"period"``."""
        return {
            "aggregate": self.aggregate,
            "window": self.window if self.rolling else "period",
            "report_empty": self.report_empty,
        }

    @property
    def counted(self) -> bool:
        """Whether the metric counts bare occurrences (``event()``), not observed values."""
        return self.aggregate in COUNTED


@dataclass
class DayAggregate:
    """One metric's running aggregate of one day: what every aggregation needs, small and
    bounded whatever the number of events.

    ``n`` counts events (or observations), ``total`` sums observed values, ``low`` and
    ``high`` are their extremes, ``last`` the latest, and ``bins`` counts per bin (a median's
    bins of [lower, upper], a mode's categories): at most :data:`MEDIAN_BINS` entries.
    """

    n: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    last: float | str | None = None
    bins: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> list[Any]:
        """A compact JSON form for the device's state file."""
        return [
            self.n,
            self.total,
            _finite_or_none(self.low),
            _finite_or_none(self.high),
            self.last,
            sorted(self.bins.items()),
        ]

    @classmethod
    def from_json(cls, raw: Any) -> DayAggregate:
        """The aggregate back from :meth:`to_json`; :class:`~.errors.InvalidInput` if it is
        not one (a damaged state file)."""
        try:
            n, total, low, high, last, bins = raw
            aggregate = cls(
                int(n),
                float(total),
                math.inf if low is None else float(low),
                -math.inf if high is None else float(high),
                last if last is None or isinstance(last, str) else float(last),
                {int(b): int(c) for b, c in bins},
            )
        except (TypeError, ValueError) as exc:
            raise InvalidInput("a saved event aggregate is malformed") from exc
        if aggregate.n < 0 or len(aggregate.bins) > MEDIAN_BINS:
            raise InvalidInput("a saved event aggregate is malformed")
        return aggregate


def _finite_or_none(number: float) -> float | None:
    """``number``, or ``None`` for an infinity (JSON has none)."""
    return number if math.isfinite(number) else None


def median_bin(value: float, lower: float, upper: float) -> int:
    """The bin of :data:`MEDIAN_BINS` equal bins of [lower, upper] that ``value`` (clamped)
    falls in."""
    share = (min(max(value, lower), upper) - lower) / (upper - lower)
    return min(int(share * MEDIAN_BINS), MEDIAN_BINS - 1)


def _lower_median(counts: Mapping[int, int]) -> int:
    """The lower median of values given as counts per bin: the first bin where the running
    count reaches half (rounded up) of the total."""
    total = sum(counts.values())
    middle = (total + 1) // 2
    running = 0
    for index in sorted(counts):
        running += counts[index]
        if running >= middle:
            return index
    raise ValueError("no values")


def window_value(
    rule: EventRule,
    days: Iterable[DayAggregate],
    *,
    bounds: tuple[float, float] | None = None,
    edges: tuple[float, ...] | None = None,
    categories: tuple[str, ...] = (),
) -> bool | float | str | None:
    """The value a window of ``days`` (oldest first) reports, or ``None`` when it reports
    nothing (no event, and an empty window is not reported).

    ``any`` is a bool, ``mode`` a category (ties go to the first listed), the others a number:
    the count of events, or the sum, minimum, maximum, mean, median or latest of the observed
    values. A median is the middle of its bin of ``bounds`` (a numeric metric) or a value in
    its bucket of ``edges`` (a histogram: the bucket's lower edge, its first bucket's first
    edge); the metric's own preparation then clamps or buckets the value.
    """
    days = list(days)
    n = sum(d.n for d in days)
    if n == 0:
        if not rule.report_empty:
            return None
        return False if rule.aggregate == "any" else 0
    aggregate = rule.aggregate
    if aggregate == "any":
        return True
    if aggregate == "count":
        return n
    if aggregate == "sum":
        return math.fsum(d.total for d in days)
    if aggregate == "mean":
        return math.fsum(d.total for d in days) / n
    if aggregate == "min":
        return min(d.low for d in days if d.n)
    if aggregate == "max":
        return max(d.high for d in days if d.n)
    if aggregate == "last":
        return next(d.last for d in reversed(days) if d.n)
    counts: dict[int, int] = {}
    for day in days:
        for index, count in day.bins.items():
            counts[index] = counts.get(index, 0) + count
    if aggregate == "mode":
        most = max(counts.values())
        return categories[min(i for i, c in counts.items() if c == most)]
    index = _lower_median(counts)
    if edges is not None:
        return edges[index]
    if bounds is None:
        raise ValueError("a numeric median needs the metric's bounds")
    lower, upper = bounds
    return lower + (index + 0.5) * (upper - lower) / MEDIAN_BINS
