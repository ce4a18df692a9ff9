"""The privacy account of event metrics, checked by exact enumeration of everything one device
sends (issue 40, Privacy; docs/STATS.md sections 13 and 14).

One device, T <= 5 days, a few event counts per day (0, 1 or 2) on the days it is active:
every history of events is enumerated, and for each the exact distribution of the whole
sequence of reports it sends, each day's report or the absence of one. A report goes out on day
d iff the device was active on a day of d's window (the SDK's rule, STATS.md section 14: a
public fact, never an event, so every history of one activity pattern has the same sends, as
the enumeration checks); its content is the window's aggregate
(:func:`deniable.client.events.window_value` over the window's days, then the metric's own
``prepare``) randomized by the metric's real mechanism
(:mod:`deniable.client.mechanisms`: brr, krr, and for memoized metrics the two layers of
:func:`~deniable.client.mechanisms.two_layers`, one permanent answer per value drawn once for
the device's whole history). Small k: a boolean ``any`` metric with brr, and a ``count``
histogram of k = 3 buckets (0, 1, 2 or more) with krr; rolling windows of 2 and 3 days and a
calendar day.

Checked against the account (:func:`deniable.client.account.privacy_account`):

* (a) over any two histories, what the reports dated in any L consecutive days reveal is at
  most the account's bound for L days, and equal to it for the worst pair with fresh reports
  (tight);
* (b) over two histories that differ in one day's events, everything sent is at most
  ``per_day_of_events``, equal to it with fresh reports once T >= the window;
* (c) memoized (two layers), all histories whose aggregate never changes: at most
  ``permanent_epsilon`` (eps_perm) over the T days.

Probabilities are floats from the mechanisms; the tolerance is 1e-9 on log ratios of order 1.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from functools import reduce

import numpy as np
import pytest

from deniable.client import MetricSpec
from deniable.client.account import DeviceSettings, EventMetricAccount, privacy_account
from deniable.client.events import DayAggregate, EventRule, window_value
from deniable.client.mechanisms import KRR, two_layers

TIGHT = 1e-9
EPSILON = 1.0
RATIO = 2.0
COUNTS = (0, 1, 2)
"""The events a device may log on an active day."""


def spec_for(aggregate: str, window: int, rolling: bool) -> MetricSpec:
    """A daily boolean ``any`` metric (brr) or a ``count`` histogram of buckets 0, 1, 2+
    (krr, k = 3), its events aggregated over a rolling window of ``window`` days or over the
    calendar day. Windows of 2 and 3 days are built as rules directly: a spec's JSON form
    takes 1, 7 or 28, and the account holds for any N."""
    if aggregate == "any":
        base = MetricSpec.boolean("m", epsilon=EPSILON)
    else:
        base = MetricSpec.histogram("m", [0, 1, 2, 3], epsilon=EPSILON, mechanism="krr")
    return replace(base, events=EventRule(aggregate, window, rolling, True))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Device:
    """One device's event metric, whether it memoizes it (two layers at :data:`RATIO`), and
    ``skips_empty``: a device that breaks the sending rule and reports only windows with an
    event (what STATS.md section 13 forbids), to show the enumeration sees sends."""

    spec: MetricSpec
    memoized: bool
    skips_empty: bool = False

    @property
    def rule(self) -> EventRule:
        """The metric's event rule."""
        assert self.spec.events is not None
        return self.spec.events

    @property
    def days(self) -> int:
        """How many days one window covers (1 for the calendar day)."""
        return self.rule.window if self.rule.rolling else 1

    @property
    def mechanism(self) -> KRR:
        """The metric's frequency oracle: brr (k = 2) or krr."""
        oracle = self.spec.randomizer
        assert isinstance(oracle, KRR)
        return oracle

    def window(self, day: int) -> slice:
        """The days (0-based, clipped to the history) of the window reported on ``day``."""
        return slice(max(0, day - self.days + 1), day + 1)

    def sent(self, history: tuple[int, ...], active: tuple[bool, ...]) -> list[int]:
        """The days a report goes out: those with an active day in their window (the SDK's
        rule, docs/STATS.md section 14), whatever the events."""
        return [
            d
            for d in range(len(active))
            if any(active[self.window(d)])
            and (not self.skips_empty or sum(history[self.window(d)]))
        ]

    def values(self, history: tuple[int, ...], sent: list[int]) -> list[int]:
        """What each sent report carries before randomization: its window's aggregate
        (:func:`window_value`), as the metric's mechanism takes it."""
        out = []
        for d in sent:
            value = window_value(self.rule, [DayAggregate(n=n) for n in history[self.window(d)]])
            assert value is not None  # any and count report empty windows
            out.append(self.spec.prepare(value))
        return out

    def distribution(self, history: tuple[int, ...], active: tuple[bool, ...]) -> np.ndarray:
        """The exact law of everything sent over the days of ``history``: an array with one
        axis per day, of length k + 1 (the report's answer, or the last: no report)."""
        sent = self.sent(history, active)
        values = dict(zip(sent, self.values(history, sent), strict=True))
        k = self.mechanism.k
        if not self.memoized:
            return _law(self.mechanism, values, len(history))
        layers = two_layers(self.mechanism, RATIO)
        assert layers is not None
        total = np.zeros((k + 1,) * len(history))
        # One permanent answer per value, drawn once: sum over every table of answers.
        for table in itertools.product(range(k), repeat=k):
            weight = math.prod(_krr_row(layers.permanent, u)[table[u]] for u in range(k))
            answers = {d: table[v] for d, v in values.items()}
            total += weight * _law(layers.instantaneous, answers, len(history))
        return total


def _krr_row(mechanism: KRR, value: int) -> np.ndarray:
    """P(answer | value) of k-ary randomized response (brr is k = 2): p on the value, q
    elsewhere."""
    row = np.full(mechanism.k, mechanism.q)
    row[value] = mechanism.p
    return row


def _law(mechanism: KRR, values: dict[int, int], days: int) -> np.ndarray:
    """The law of ``days`` days where a report of ``values[d]`` randomized by ``mechanism``
    goes out on each day d in ``values`` and nothing on the others (the last index)."""
    rows = []
    for day in range(days):
        row = np.zeros(mechanism.k + 1)
        if day in values:
            row[:-1] = _krr_row(mechanism, values[day])
        else:
            row[-1] = 1.0
        rows.append(row)
    return reduce(np.multiply.outer, rows)


def largest_log_ratio(laws: list[np.ndarray]) -> float:
    """The largest ln P_a(y) / P_b(y) over every ordered pair of laws and every output y
    (``inf`` where one can send y and another cannot)."""
    table = np.stack([law.ravel() for law in laws])
    table = table[:, table.max(axis=0) > 0]
    with np.errstate(divide="ignore"):
        logs = np.log(table)
    return float((logs.max(axis=0) - logs.min(axis=0)).max())


def marginal(law: np.ndarray, start: int, length: int) -> np.ndarray:
    """The law of what is sent on days start .. start + length - 1."""
    others = tuple(d for d in range(law.ndim) if not start <= d < start + length)
    return law.sum(axis=others) if others else law


def histories(active: tuple[bool, ...]) -> list[tuple[int, ...]]:
    """Every history of event counts: any of :data:`COUNTS` on an active day, none on an
    inactive one (``event()`` needs an open client, which marks the day active)."""
    return list(itertools.product(*[COUNTS if a else (0,) for a in active]))


def neighbours(history: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
    """The histories that differ from ``history`` in one day's events only, with that day."""
    found = []
    for day, count in enumerate(history):
        for other in COUNTS:
            if other > count:
                found.append((day, (*history[:day], other, *history[day + 1 :])))
    return found


@dataclass
class Found:
    """The exact figures one case found."""

    over_all: float
    one_day: float
    unchanged: float | None


def enumerate_case(device: Device, days: int, active: tuple[bool, ...]) -> Found:
    """Every check of one case (module docstring), returning the exact figures."""
    settings = DeviceSettings(3, device.memoized, None, RATIO)
    account = privacy_account([device.spec], settings)
    figures = account.metrics[0]
    assert isinstance(figures, EventMetricAccount)
    assert figures.reports_per_period == 1 and figures.per_window == EPSILON

    every = histories(active)
    laws = {h: device.distribution(h, active) for h in every}
    for law in laws.values():
        assert math.isclose(float(law.sum()), 1.0, abs_tol=1e-12)
    # Whether each day's report goes out is the same for every history (activity alone).
    sent_days = device.sent(every[0], active)
    for law in laws.values():
        silent = [float(marginal(law, d, 1)[-1]) for d in range(days)]
        expected = [0.0 if d in sent_days else 1.0 for d in range(days)]
        assert silent == pytest.approx(expected, abs=1e-12)
    sent = len(sent_days)

    # (a) Any L consecutive days, over any two histories: at most the account's L days.
    for length in range(1, days + 1):
        claimed = account.over_days(length)
        for start in range(days - length + 1):
            window = largest_log_ratio([marginal(law, start, length) for law in laws.values()])
            assert window <= claimed + TIGHT, (length, start, window, claimed)
            if length == 1:
                assert figures.per_day is not None and figures.per_period is not None
                assert window <= min(figures.per_day, figures.per_period) + TIGHT
            reports = len([d for d in sent_days if start <= d < start + length])
            if not device.memoized and reports == length:
                assert window == pytest.approx(claimed, abs=TIGHT), (length, start)
    over_all = largest_log_ratio(list(laws.values()))
    assert over_all <= account.over_days(days) + TIGHT
    assert figures.per_7_days is not None  # T <= 5 days lie within 7
    assert over_all <= figures.per_7_days + TIGHT
    if not device.memoized:
        assert over_all == pytest.approx(sent * EPSILON, abs=TIGHT)

    # (b) One day's events: everything sent, over every pair of neighbouring histories.
    one_day = 0.0
    for history in every:
        for day, other in neighbours(history):
            if not active[day]:
                continue
            pair = largest_log_ratio([laws[history], laws[other]])
            one_day = max(one_day, pair)
    assert figures.per_day_of_events is not None
    assert one_day <= figures.per_day_of_events + TIGHT
    if not device.memoized and all(active) and days >= device.days:
        assert one_day == pytest.approx(figures.per_day_of_events, abs=TIGHT)
        assert one_day == pytest.approx(device.days * EPSILON, abs=TIGHT)

    # (c) Memoized: an aggregate that never changes reveals at most eps_perm.
    unchanged = None
    if device.memoized:
        steady = [law for h, law in laws.items() if len(set(device.values(h, sent_days))) == 1]
        unchanged = largest_log_ratio(steady)
        assert figures.permanent_epsilon is not None
        assert unchanged <= figures.permanent_epsilon + TIGHT
        assert figures.per_value_lifetime is not None
        assert unchanged <= figures.per_value_lifetime + TIGHT
    return Found(over_all, one_day, unchanged)


CASES = [
    (aggregate, window, rolling, memoized)
    for aggregate in ("any", "count")
    for window, rolling in ((2, True), (3, True), (1, False))
    for memoized in (False, True)
]


@pytest.mark.parametrize(("aggregate", "window", "rolling", "memoized"), CASES)
@pytest.mark.parametrize("days", [2, 3, 5])
def test_every_history_of_an_active_device_stays_within_the_account(
    aggregate: str, window: int, rolling: bool, memoized: bool, days: int
) -> None:
    device = Device(spec_for(aggregate, window, rolling), memoized)
    found = enumerate_case(device, days, (True,) * days)
    if memoized:
        assert found.unchanged is not None
        # Not vacuous: the reports of one unchanged aggregate reveal more than one report.
        assert found.unchanged > (EPSILON if days >= 3 else 0)


@pytest.mark.parametrize(
    ("aggregate", "window", "memoized"), [("any", 3, False), ("count", 2, True)]
)
def test_windows_without_an_active_day_send_nothing_whatever_the_events(
    aggregate: str, window: int, memoized: bool
) -> None:
    """Every activity pattern of 4 days: the days a report goes out depend on activity
    alone, and the account holds for the reports that do."""
    device = Device(spec_for(aggregate, window, True), memoized)
    for active in itertools.product((False, True), repeat=4):
        if any(active):
            enumerate_case(device, 4, active)


def test_a_device_that_reports_only_windows_with_an_event_is_not_covered() -> None:
    """Whether a report is sent is itself an output (STATS.md section 13): a device that
    skipped its empty windows would tell them apart from the others with certainty, which no
    ε bounds, so the enumeration counts sends, not only contents."""
    device = Device(spec_for("any", 2, True), memoized=False, skips_empty=True)
    laws = [device.distribution(h, (True,) * 3) for h in histories((True,) * 3)]
    assert largest_log_ratio(laws) == math.inf


def test_the_figures_of_the_issue() -> None:
    """The exact figures at eps 1, T = 5 days, a window of 3 days (docs/privacy.md quotes
    them): fresh reports spend 5 over the 5 days and 3 on one day's events, exactly the
    account; memoized (fresh layer 2 eps), the account's 10 and 6 are upper bounds, and an
    unchanged aggregate stays below eps_perm."""
    fresh = enumerate_case(Device(spec_for("any", 3, True), False), 5, (True,) * 5)
    assert fresh.over_all == pytest.approx(5.0, abs=TIGHT)
    assert fresh.one_day == pytest.approx(3.0, abs=TIGHT)
    memo = enumerate_case(Device(spec_for("any", 3, True), True), 5, (True,) * 5)
    layers = two_layers(spec_for("any", 3, True).randomizer, RATIO)
    assert layers is not None
    assert memo.over_all < 10.0 and memo.one_day < 6.0
    assert memo.unchanged is not None and EPSILON < memo.unchanged < layers.permanent_epsilon
    # The figures docs/privacy.md's table prints (to its digits).
    assert (memo.over_all, memo.one_day) == pytest.approx((4.7536, 4.7536), abs=5e-5)
    assert memo.unchanged == pytest.approx(1.4074, abs=5e-5)
    calendar = enumerate_case(Device(spec_for("any", 1, False), True), 5, (True,) * 5)
    # One differing report among reports that show the permanent answers: above eps.
    assert EPSILON < calendar.one_day == pytest.approx(1.968, abs=5e-4)
