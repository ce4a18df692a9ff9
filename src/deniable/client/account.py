"""The privacy account: the most eps one device can spend, per metric and for all metrics together.

From the metric specs and the SDK's settings (reports per period, memoization and its fresh
layer, lifetime cap), the account states the worst case per period, per day, per 7 days, per
30 days and over a device's lifetime, over any two histories of true values (``None``:
unbounded), and apart from it what a memoized metric reveals per value over its lifetime. An
event metric (one report per window, :mod:`.events`) also states its window, one window's eps
and what all the reports that see one day's events spend together.
Metrics compose sequentially, so totals are sums. Every figure follows the
rules :class:`~.ledger.Ledger` enforces (:meth:`~.ledger.Ledger.admit` admits, and
:meth:`~.ledger.Ledger.spent` counts), so a device's own ledger never exceeds its account and
a device that reports every metric at full budget reaches it.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import InvalidInput
from .guarantees import PureDP, compose
from .ledger import ReportCost, report_cost
from .mechanisms import DEFAULT_INSTANTANEOUS_RATIO
from .spec import PERIOD_KINDS, MetricSpec

WARNING_LEVEL_30_DAYS = 120.0
"""The 30-day total (eps, all metrics of one device) above which registration and
``deniable privacy`` warn.

It is eps 4 per day on average: the middle of the per-day budgets Apple states for one use
case (2 to 8), and what one report a day at the SDK's default ``max_epsilon`` spends. Four
daily metrics at eps 1 with the SDK defaults stay within it, a fifth crosses it; a lower level
flagged the second daily metric of the most common choice, ε 1, so it warned about nearly every
deployment and said nothing (docs/privacy.md gives the context and why this figure).
"""

WINDOWS: tuple[tuple[str, int], ...] = (("per_day", 1), ("per_7_days", 7), ("per_30_days", 30))
"""The windows the account states, as (field name, length in days)."""

MAX_LIFETIME_EPSILON = 1e6
"""The largest ``lifetime_epsilon`` accepted (per metric): far above any meaningful cap, and
it keeps the lifetime's count of reports (at least eps 0.001 each) an exact small integer."""

_MONTH_STARTS_CYCLE = 400 * 12
"""Month ends in one Gregorian cycle (400 years): the calendar repeats after it."""


@dataclass(frozen=True)
class DeviceSettings:
    """The SDK settings that bound what a device spends: reports per metric and period,
    memoization (``True`` or the metric names), the per-metric lifetime eps cap, and the
    memoized reports' fresh layer, eps_inst = ``instantaneous_ratio`` x eps (> 1; ``None``:
    none, memoized answers are sent as is and a change of value shows).

    Its defaults are the SDK's (:data:`SDK_DEFAULTS`): :class:`~.sdk.Client` takes its own
    defaults from here. ``memoize`` given as names is kept as a frozenset (a single string is
    one name, as the SDK reads it).
    """

    max_reports_per_period: int = 1
    memoize: bool | frozenset[str] = False
    lifetime_epsilon: float | None = None
    instantaneous_ratio: float | None = DEFAULT_INSTANTANEOUS_RATIO

    def __post_init__(self) -> None:
        ratio = self.instantaneous_ratio
        if ratio is not None and (
            isinstance(ratio, bool)
            or not isinstance(ratio, int | float)
            or not math.isfinite(ratio)
            or not ratio > 1
        ):
            raise InvalidInput("instantaneous_ratio must be a finite number > 1 (or None)")
        reports = self.max_reports_per_period
        if isinstance(reports, bool) or not isinstance(reports, int) or reports < 1:
            raise InvalidInput("max_reports_per_period must be an integer of at least 1")
        lifetime = self.lifetime_epsilon
        if lifetime is not None and (
            isinstance(lifetime, bool)
            or not isinstance(lifetime, int | float)
            or not math.isfinite(lifetime)
            or not 0 < lifetime <= MAX_LIFETIME_EPSILON
        ):
            raise InvalidInput(
                f"lifetime_epsilon must be a number > 0 and at most {MAX_LIFETIME_EPSILON:g}"
                " (or None)"
            )
        if not isinstance(self.memoize, bool):
            object.__setattr__(self, "memoize", memoized_names(self.memoize))

    @classmethod
    def memoizing(
        cls,
        max_reports_per_period: int,
        memoize: bool | Collection[str],
        lifetime_epsilon: float | None,
        instantaneous_ratio: float | None,
    ) -> DeviceSettings:
        """The settings with ``memoize`` given as ``True``, ``False`` or any collection of
        metric names (as the SDK takes it), checked in the constructor's order."""
        if isinstance(memoize, bool):
            return cls(max_reports_per_period, memoize, lifetime_epsilon, instantaneous_ratio)
        settings = cls(max_reports_per_period, False, lifetime_epsilon, instantaneous_ratio)
        return replace(settings, memoize=memoized_names(memoize))

    def memoized(self, metric: str) -> bool:
        """Whether a device with these settings memoizes ``metric`` (as the recorder decides)."""
        return self.memoize is True or (
            not isinstance(self.memoize, bool) and metric in self.memoize
        )


def memoized_names(memoize: object) -> frozenset[str]:
    """``memoize`` given as metric names, as a frozenset (a single string is one name);
    :class:`~.errors.InvalidInput` if it is not a collection of strings."""
    names = {memoize} if isinstance(memoize, str) else memoize
    if not isinstance(names, Collection) or not all(isinstance(n, str) for n in names):
        raise InvalidInput("memoize must be True, False or a collection of metric names")
    return frozenset(names)


SDK_DEFAULTS = DeviceSettings()
"""The SDK's defaults: one report per metric and period, no memoization, no lifetime cap (and
memoized reports, if asked, get a fresh layer at twice the metric's eps)."""


def max_periods_touched(kind: str, days: int) -> int:
    """The most periods of ``kind`` that any ``days`` consecutive UTC days can touch.

    A day period: ``days``. An ISO week: a window starting on a Sunday touches that week, then
    one more each 7 days, ``(days + 5) // 7 + 1``. A calendar month: computed exactly over
    every month end of a 400-year Gregorian cycle, since a window touches the most months when
    it starts on a month's last day (30 days touch three months from 31 January in a common
    year: January, February, 1 March).
    """
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise InvalidInput("a window is a whole number of days, at least 1")
    if kind == "day":
        return days
    if kind == "week":
        return (days + 5) // 7 + 1
    if kind != "month":
        raise InvalidInput(f"period must be one of {', '.join(PERIOD_KINDS)}")
    return _max_months_touched(days)


@functools.cache
def _max_months_touched(days: int) -> int:
    """The most calendar months ``days`` consecutive days touch, over every month end of a
    Gregorian cycle (cached: a few thousand date computations)."""
    most = 0
    for index in range(_MONTH_STARTS_CYCLE):
        year, month = 2000 + index // 12, index % 12 + 1
        following = dt.date(year + month // 12, month % 12 + 1, 1)
        last_day = following - dt.timedelta(days=1)
        end = last_day + dt.timedelta(days=days - 1)
        most = max(most, (end.year - year) * 12 + end.month - month + 1)
    return most


@dataclass(frozen=True)
class MetricAccount:
    """The most eps one device spends on one metric over any two histories of its values: per
    period, per day, per 7 and 30 days and over its lifetime (``None``: unbounded).

    A memoized metric (``memoized``: a permanent answer per value is kept) also states
    ``permanent_epsilon``, what all reports of one unchanged value reveal, and
    ``per_value_lifetime``, that over every value it can ever report (``None``: unbounded);
    ``instantaneous_epsilon`` is the fresh layer each of its reports adds, and
    ``change_shows`` says there is none and a device can send two reports or more: they
    then show whether the value changed, and only the first report of a window has a finite
    bound (a lifetime cap admits one report at most there). Unmemoized, the permanent
    figures are ``None`` and ``per_value_lifetime`` is ``lifetime``.
    """

    metric: str
    type: str
    mechanism: str
    epsilon: float
    period: str
    memoized: bool
    reports_per_period: int
    per_period: float | None
    per_day: float | None
    per_7_days: float | None
    per_30_days: float | None
    lifetime: float | None
    instantaneous_epsilon: float | None = None
    permanent_epsilon: float | None = None
    per_value_lifetime: float | None = None
    change_shows: bool = False


@dataclass(frozen=True, kw_only=True)
class EventMetricAccount(MetricAccount):
    """The account of an event metric (:mod:`.events`): one report per window whatever the
    number of events, so ``reports_per_period`` is 1 whatever the SDK's
    ``max_reports_per_period``, and the figures of :class:`MetricAccount` count one report per
    day for a rolling window, one per period for a calendar one.

    ``aggregate`` is the rule's aggregation; ``rolling`` says the window is the last
    ``window_days`` days, reported every day, else it is the metric's period (``window_days``:
    the most days one period covers, 1, 7 or 31), reported once when it ends. ``per_window``
    is the eps of one window's report (the metric's eps; 0 when a lifetime cap below it keeps
    the metric from reporting). ``per_day_of_events`` is what everything the device sends
    reveals about one day's events (two histories that differ on that day only): the
    ``window_days`` reports of a rolling window all see that day, so N eps for N days (a
    memoized metric, N eps_inst: the other reports show its permanent answers), one report's
    eps for a calendar window; ``None``: unbounded (memoized without a fresh layer).
    """

    aggregate: str
    rolling: bool
    window_days: int
    per_window: float
    per_day_of_events: float | None


@dataclass(frozen=True)
class AccountTotals:
    """The account of all metrics together (sequential composition: the sums); a figure is
    ``None`` when any metric's is unbounded."""

    per_period: float | None
    per_day: float | None
    per_7_days: float | None
    per_30_days: float | None
    lifetime: float | None
    per_value_lifetime: float | None = None


def _bounded(guarantee: PureDP | None) -> float | None:
    """A guarantee as the account states it: its figure, ``None`` for unbounded or unstated."""
    return None if guarantee is None or not guarantee.bounded else guarantee.figure


@dataclass(frozen=True)
class _Rule:
    """How one metric's spending grows: its cost rule, reports per period, its period kind,
    the most reports it can ever send (``None``: no cap) and, memoized, the most distinct
    values it can ever count (``None``: unbounded)."""

    cost: ReportCost
    reports: int
    kind: str
    cap: int | None
    values: int | None

    def capped(self, reports: int) -> int:
        """``reports``, or fewer where the lifetime cap stops them."""
        return reports if self.cap is None else min(reports, self.cap)

    def reports_in(self, days: int) -> int:
        """The most reports sent in any ``days`` consecutive days."""
        return self.capped(self.reports * max_periods_touched(self.kind, days))

    def guarantee_in(self, days: int) -> PureDP:
        """The most one device's reports reveal over any two histories in any ``days`` days."""
        return self.cost.guarantee(self.reports_in(days))


def _rule(spec: MetricSpec, settings: DeviceSettings) -> _Rule:
    """The ledger's rules for ``spec`` on a device with ``settings``.

    A lifetime cap L admits a report while the reports sent so far and this one stay within L
    over any two histories (:meth:`~.ledger.ReportCost.within`, exactly): n eps
    unmemoized; memoized, eps for one report and n eps_inst from the second on (without the
    fresh layer, one report at most). The cap counts reports, never distinct values, so
    whether a report is sent depends on no value (:meth:`~.ledger.Ledger.admit`). A memoized
    metric also counts its distinct values: at most k for a metric with k categories or
    buckets (a numeric metric's values are unbounded), and never more than its reports.
    """
    cost, _ = report_cost(spec, settings.memoized(spec.name), settings.instantaneous_ratio)
    lifetime = settings.lifetime_epsilon
    cap = None if lifetime is None else cost.lifetime_reports(lifetime)
    reports = _reports_per_period(spec, settings)
    if not cost.memoized:
        return _Rule(cost, reports, spec.period, cap, None)
    bounds = [] if spec.value_count is None else [spec.value_count]
    if cap is not None:
        bounds.append(cap)
    values = min(bounds) if bounds else None
    return _Rule(cost, reports, spec.period, cap, values)


def _reports_per_period(spec: MetricSpec, settings: DeviceSettings) -> int:
    """The most reports of ``spec`` per period: the settings' ``max_reports_per_period``, or
    one for an event metric (one report per window: a rolling window's period is a day)."""
    return 1 if spec.events is not None else settings.max_reports_per_period


def metric_account(spec: MetricSpec, settings: DeviceSettings = SDK_DEFAULTS) -> MetricAccount:
    """The most eps one device with ``settings`` spends on ``spec``, per window and lifetime.

    A window of D days holds r reports for each period it can touch
    (:func:`max_periods_touched`), with r reports per period: a weekly metric can send its
    whole week's r reports in one day. Those n reports cost n eps unmemoized, and memoized
    n eps_inst (eps for a single report), or without the fresh layer an unbounded amount from
    the second report on (:meth:`~.ledger.ReportCost.histories`). Every window is capped by
    the lifetime cap's count of reports (see :func:`_rule`). Memoized, the per-value figure is
    eps_perm per distinct value the device can report, and at most its lifetime figure.
    """
    rule = _rule(spec, settings)
    return _metric_account(spec, rule, _guarantees(rule))


def _metric_account(
    spec: MetricSpec, rule: _Rule, stated: dict[str, PureDP | None]
) -> MetricAccount:
    """:func:`metric_account` from ``spec``'s rule and the guarantees it states, already made."""
    cost = rule.cost
    common: dict[str, Any] = {
        "metric": spec.name,
        "type": spec.type,
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "period": spec.period,
        "memoized": cost.memoized,
        "reports_per_period": rule.reports,
        "instantaneous_epsilon": cost.instantaneous_epsilon,
        "permanent_epsilon": cost.permanent_epsilon if cost.memoized else None,
        "change_shows": cost.memoized
        and cost.instantaneous_epsilon is None
        and (rule.cap is None or rule.cap > 1),
        **{name: _bounded(guarantee) for name, guarantee in stated.items()},
    }
    events = spec.events
    if events is None:
        return MetricAccount(**common)
    days = events.window if events.rolling else _PERIOD_DAYS[spec.period]
    seeing = days if events.rolling else 1
    return EventMetricAccount(
        **common,
        aggregate=events.aggregate,
        rolling=events.rolling,
        window_days=days,
        per_window=cost.guarantee(rule.capped(1)).figure,
        per_day_of_events=_bounded(_day_of_events(rule, seeing)),
    )


_PERIOD_DAYS: dict[str, int] = {"day": 1, "week": 7, "month": 31}
"""The most days one period of each kind covers: a calendar window's length."""


def _day_of_events(rule: _Rule, seeing: int) -> PureDP:
    """What everything a device sends reveals about one day's events when ``seeing`` of its
    reports have that day in their window (the lifetime cap may stop some).

    Fresh reports: only those ``seeing`` reports differ between the two histories, each at
    eps. Memoized: draw every value's permanent answer once, the same in both histories; then
    only the fresh layers of those reports differ, each at eps_inst (the other reports show
    the permanent answers, so even one differing report can spend eps_inst, not eps). Without
    a fresh layer, unbounded once a device can send two reports (a change of value shows).
    """
    cost, reports = rule.cost, rule.capped(seeing)
    if not cost.memoized or (rule.cap is not None and rule.cap <= 1):
        return cost.guarantee(reports)
    if cost.fresh is None:
        return PureDP(math.inf)
    return reports * cost.fresh


_STATED = ("per_period", "per_day", "per_7_days", "per_30_days", "lifetime", "per_value_lifetime")
"""The guarantees an account states per metric and in total, by field name."""


def _guarantees(rule: _Rule) -> dict[str, PureDP | None]:
    """The guarantees :func:`metric_account` states for ``rule``, by field (``None``: not
    stated, as the lifetime without a cap), composed from its cost (see
    :func:`metric_account`)."""
    cost = rule.cost
    windows = {name: rule.guarantee_in(days) for name, days in WINDOWS}
    per_period = min(rule.reports, rule.cap) if rule.cap is not None else rule.reports
    lifetime = None if rule.cap is None else cost.guarantee(rule.cap)
    per_value: PureDP | None = lifetime
    if cost.memoized:
        per_value = None if rule.values is None else rule.values * cost.permanent
        if lifetime is not None:
            per_value = lifetime if per_value is None else min(per_value, lifetime)
    return {
        "per_period": cost.guarantee(per_period),
        **windows,
        "lifetime": lifetime,
        "per_value_lifetime": per_value,
    }


@dataclass(frozen=True)
class PrivacyAccount:
    """The worst-case eps one device spends, per metric and for all metrics together."""

    settings: DeviceSettings
    metrics: tuple[MetricAccount, ...]
    totals: AccountTotals
    _rules: tuple[_Rule, ...] = field(repr=False, compare=False)

    def over_days(self, days: int) -> float:
        """The most eps all metrics together spend over any two histories in any ``days``
        consecutive UTC days (``inf``: unbounded): their guarantees composed."""
        return compose(rule.guarantee_in(days) for rule in self._rules).figure


def _total(guarantees: list[PureDP | None]) -> float | None:
    """The composition of the metrics' guarantees as the account states it (``None`` when any
    is unbounded or unstated)."""
    if any(g is None or not g.bounded for g in guarantees):
        return None
    return compose(g for g in guarantees if g is not None).figure


def privacy_account(
    specs: Iterable[MetricSpec], settings: DeviceSettings = SDK_DEFAULTS
) -> PrivacyAccount:
    """The account of a device recording ``specs`` with ``settings`` (metrics by name)."""
    ordered = sorted(specs, key=lambda spec: spec.name)
    if len({spec.name for spec in ordered}) != len(ordered):
        raise InvalidInput("metric names must be distinct")
    rules = tuple(_rule(spec, settings) for spec in ordered)
    stated = [_guarantees(rule) for rule in rules]
    metrics = tuple(_metric_account(*each) for each in zip(ordered, rules, stated, strict=True))
    totals = AccountTotals(**{name: _total([g[name] for g in stated]) for name in _STATED})
    return PrivacyAccount(settings, metrics, totals, rules)
