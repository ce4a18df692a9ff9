"""The privacy account: windows counted by brute force, rules checked against a real ledger.

Expectations come from the calendar (every start date of several years, leap years and 2100
included) and from :class:`deniable.client.ledger.Ledger` itself, driven at full budget by a
device that brings a new value with every record; never from figures typed in here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import math
from pathlib import Path

import pytest

from deniable.client import (
    SDK_DEFAULTS,
    AsyncClient,
    Client,
    DeviceSettings,
    InvalidInput,
    MetricSpec,
    max_periods_touched,
    privacy_account,
)
from deniable.client.ledger import Ledger, ReportCost, lifetime_reports, report_cost
from deniable.client.mechanisms import two_layers
from deniable.client.spec import period_label
from testkit import loopback_url, spare_port

BRUTE_FORCE_YEARS = (1999, 2000, 2001, 2023, 2024, 2025, 2099, 2100, 2101)
"""Start years of the brute force: leap years (2000, 2024), common ones, and 2100 (no leap)."""
LONGEST_WINDOW = 100


def touched_by_brute_force(kind: str) -> dict[int, int]:
    """For each window length up to LONGEST_WINDOW, the most ``kind`` periods it touches,
    over every start date of BRUTE_FORCE_YEARS."""
    most = dict.fromkeys(range(1, LONGEST_WINDOW + 1), 0)
    for year in BRUTE_FORCE_YEARS:
        start = dt.date(year, 1, 1)
        while start.year == year:
            labels: set[str] = set()
            for length in range(1, LONGEST_WINDOW + 1):
                labels.add(period_label(kind, start + dt.timedelta(days=length - 1)))
                most[length] = max(most[length], len(labels))
            start += dt.timedelta(days=1)
    return most


@pytest.mark.parametrize("kind", ["day", "week", "month"])
def test_max_periods_touched_matches_every_start_date(kind: str) -> None:
    assert {d: max_periods_touched(kind, d) for d in range(1, LONGEST_WINDOW + 1)} == (
        touched_by_brute_force(kind)
    )


def test_max_periods_touched_refuses_what_is_not_a_window() -> None:
    for days in (0, -1, 1.5, True):
        with pytest.raises(InvalidInput):
            max_periods_touched("day", days)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        max_periods_touched("year", 30)


# --- the rules, against a real ledger --------------------------------------------------------

BOOL = MetricSpec.boolean("dark_mode", epsilon=1.0)
BROWSER = MetricSpec.categorical("browser", ["a", "b", "c", "d", "e"], epsilon=0.7, period="week")
LOAD = MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=0.3)
HIST = MetricSpec.histogram("load_hist", [0, 1, 2, 3, 4], epsilon=0.1, period="month")
SPECS = (BOOL, BROWSER, LOAD, HIST)

LONG_LIFE = 800
"""Days a long-lived device records: past every lifetime cap of :data:`SETTINGS`."""

SETTINGS = [
    DeviceSettings(),
    DeviceSettings(max_reports_per_period=3),
    DeviceSettings(memoize=True),
    DeviceSettings(max_reports_per_period=4, memoize=frozenset({"browser", "load_ms"})),
    DeviceSettings(lifetime_epsilon=2.0),
    DeviceSettings(max_reports_per_period=2, memoize=True, lifetime_epsilon=2.0),
    DeviceSettings(max_reports_per_period=3, lifetime_epsilon=0.95),
]


def settings_id(settings: DeviceSettings) -> str:
    """A test id that is the same in every process (a frozenset's repr follows the hash seed)."""
    memoize = settings.memoize
    shown = sorted(memoize) if isinstance(memoize, frozenset) else memoize
    return repr(settings).replace(repr(memoize), repr(shown))


class LedgerDevice:
    """A device as the ledger sees it, recording every metric at full budget, each record a
    value it never recorded before (so a memo gains an entry whenever it can)."""

    def __init__(self, settings: DeviceSettings) -> None:
        self.settings = settings
        self.ledger = Ledger(
            b"secret",
            max_reports_per_period=settings.max_reports_per_period,
            lifetime_epsilon=settings.lifetime_epsilon,
        )
        self.admitted: dict[str, int] = {}

    def live(self, day: dt.date) -> None:
        """Record every metric as often as the budget lets it on ``day``."""
        for spec in SPECS:
            cost = self.cost(spec)
            period = period_label(spec.period, day)
            for _ in range(self.settings.max_reports_per_period + 1):
                if not self.ledger.admit(spec.name, period, cost):
                    continue
                n = self.admitted[spec.name] = self.admitted.get(spec.name, 0) + 1
                if not cost.memoized:
                    continue
                value: int | float = n / 1e6 if spec.type == "numeric" else n % spec.k
                key = self.ledger.memo_key(spec.name, spec.fingerprint, value)
                if self.ledger.memoized(key) is None:
                    self.ledger.remember(spec.name, key, 0)

    def cost(self, spec: MetricSpec) -> ReportCost:
        """The cost rule the SDK's recorder applies to ``spec`` with these settings."""
        memoized = self.settings.memoized(spec.name)
        return report_cost(spec, memoized, self.settings.instantaneous_ratio)[0]

    def spent(self, day: dt.date) -> dict[str, tuple[float, float]]:
        """(period eps, total eps) per metric over any two histories, as of ``day``."""
        result = {}
        for spec in SPECS:
            period = period_label(spec.period, day)
            spent = self.ledger.spent(spec.name, period, self.cost(spec))
            result[spec.name] = (spent.period_epsilon, spent.total_epsilon)
        return result


FIRST_START, LAST_START = dt.date(2021, 1, 1), dt.date(2021, 3, 31)
"""The start dates tried: every weekday, and month ends before a 28-day February (31 January
2021 is a Sunday in a common year, the worst start for weeks and months at once)."""


def most_spent(settings: DeviceSettings, days: int) -> tuple[dict[str, float], float]:
    """The most each metric, and all together, spend in ``days`` days from any start date
    from FIRST_START to LAST_START."""
    per_metric = dict.fromkeys((s.name for s in SPECS), 0.0)
    together = 0.0
    start = FIRST_START
    while start <= LAST_START:
        device = LedgerDevice(settings)
        for offset in range(days):
            device.live(start + dt.timedelta(days=offset))
        spent = device.spent(start + dt.timedelta(days=days - 1))
        for name, (_, total) in spent.items():
            per_metric[name] = max(per_metric[name], total)
        together = max(together, math.fsum(total for _, total in spent.values()))
        start += dt.timedelta(days=1)
    return per_metric, together


@pytest.mark.parametrize("settings", SETTINGS, ids=settings_id)
@pytest.mark.parametrize(
    ("window", "days"), [("per_day", 1), ("per_7_days", 7), ("per_30_days", 30)]
)
def test_each_window_is_the_most_a_full_budget_device_spends(
    settings: DeviceSettings, window: str, days: int
) -> None:
    account = privacy_account(SPECS, settings)
    per_metric, together = most_spent(settings, days)
    for metric in account.metrics:
        assert getattr(metric, window) == pytest.approx(per_metric[metric.metric], abs=1e-12)
    assert getattr(account.totals, window) == pytest.approx(together, abs=1e-12)
    assert account.over_days(days) == pytest.approx(together, abs=1e-12)


@pytest.mark.parametrize("settings", SETTINGS, ids=settings_id)
def test_per_period_and_lifetime_match_a_long_lived_device(settings: DeviceSettings) -> None:
    """Over 800 days every period figure is reached and never passed; a bounded lifetime is
    reached exactly, and an unbounded one grows past every window."""
    account = privacy_account(SPECS, settings)
    device = LedgerDevice(settings)
    most_in_period = dict.fromkeys((s.name for s in SPECS), 0.0)
    day = dt.date(2024, 1, 1)
    for _ in range(LONG_LIFE):
        device.live(day)
        for name, (in_period, _) in device.spent(day).items():
            most_in_period[name] = max(most_in_period[name], in_period)
        day += dt.timedelta(days=1)
    spent = device.spent(day - dt.timedelta(days=1))
    for metric in account.metrics:
        assert metric.per_period == pytest.approx(most_in_period[metric.metric], abs=1e-12)
        total = spent[metric.metric][1]
        if metric.lifetime is None:
            assert total > 2 * metric.per_30_days
        else:
            assert metric.lifetime == pytest.approx(total, abs=1e-12)
    assert (account.totals.lifetime is None) == any(m.lifetime is None for m in account.metrics)
    assert account.over_days(LONG_LIFE) >= math.fsum(total for _, total in spent.values())


def test_the_memo_caps_each_value_not_the_reports() -> None:
    """Memoized with two layers, a metric reveals at most its permanent eps per value, k values
    in all, while its reports add up their fresh layers; without layers (oue, olh, numbers)
    it is reported afresh, as unmemoized."""
    account = privacy_account(SPECS, DeviceSettings(memoize=True))
    by_name = {m.metric: m for m in account.metrics}
    unmemoized = {m.metric: m for m in privacy_account(SPECS).metrics}
    for spec in SPECS:
        mine = by_name[spec.name]
        layers = None if spec.type == "numeric" else two_layers(spec.randomizer, 2.0)
        if layers is None:
            assert not mine.memoized and mine == unmemoized[spec.name]
            continue
        assert mine.memoized and mine.lifetime is None and not mine.change_shows
        assert mine.permanent_epsilon == layers.permanent_epsilon
        assert mine.per_value_lifetime == pytest.approx(spec.k * layers.permanent_epsilon)
        assert mine.per_7_days == pytest.approx(
            max_periods_touched(spec.period, 7) * layers.instantaneous_epsilon
        )
    assert any(m.memoized for m in account.metrics)
    assert account.totals.lifetime is None


def test_without_the_fresh_layer_a_change_of_value_is_unbounded() -> None:
    account = privacy_account([BOOL], DeviceSettings(memoize=True, instantaneous_ratio=None))
    (mine,) = account.metrics
    assert mine.change_shows and mine.memoized
    assert mine.per_period == mine.per_day == BOOL.epsilon  # one report: the mechanism
    assert mine.per_7_days is None and mine.per_30_days is None and mine.lifetime is None
    assert mine.per_value_lifetime == BOOL.k * BOOL.epsilon
    assert account.totals.per_30_days is None and math.isinf(account.over_days(2))


@pytest.mark.parametrize(("cap", "epsilon"), [(1.0, 0.1), (0.95, 0.3), (2.0, 0.7), (3.0, 3.0)])
def test_lifetime_reports_is_where_the_ledger_stops(cap: float, epsilon: float) -> None:
    ledger = Ledger(b"s", max_reports_per_period=1, lifetime_epsilon=cap)
    admitted = sum(ledger.admit("m", f"p{i}", ReportCost(epsilon)) for i in range(100))
    assert admitted == lifetime_reports(cap, epsilon)
    assert admitted * epsilon <= cap + 1e-9 < (admitted + 1) * epsilon


@pytest.mark.parametrize(
    ("cap", "cost"),
    [
        (1.0, ReportCost(0.1)),
        (0.5, ReportCost(1.0, True, 1.41, 2.0)),
        (1.0, ReportCost(1.0, True, 1.41, 2.0)),
        (3.99, ReportCost(1.0, True, 1.41, 2.0)),
        (4.0, ReportCost(1.0, True, 1.41, 2.0)),
        (10.0, ReportCost(1.0, True, 1.41, 2.0)),
        (10.0, ReportCost(1.0, True, 1.0)),
        (0.9, ReportCost(1.0, True, 1.0)),
    ],
)
def test_a_costs_lifetime_reports_is_where_the_ledger_stops(cap: float, cost: ReportCost) -> None:
    """Issue 37: memoized or not, the cap counts reports at their cost over any two histories,
    and the ledger stops exactly where ReportCost.lifetime_reports says."""
    ledger = Ledger(b"s", max_reports_per_period=1, lifetime_epsilon=cap)
    admitted = sum(ledger.admit("m", f"p{i}", cost) for i in range(100))
    assert admitted == cost.lifetime_reports(cap)
    assert cost.histories(admitted) <= cap + 1e-9 < cost.histories(admitted + 1)


def test_the_issue_example_two_daily_metrics_spend_sixty_over_thirty_days() -> None:
    """Issue 18: two daily metrics at eps 1 with the defaults spend 30 x 2 x 1 over 30 days."""
    specs = [MetricSpec.boolean("a", epsilon=1.0), MetricSpec.boolean("b", epsilon=1.0)]
    account = privacy_account(specs)
    assert account.totals.per_30_days == 30 * 2 * 1.0 == account.over_days(30)
    assert account.totals.lifetime is None


def test_an_empty_account_spends_nothing() -> None:
    account = privacy_account([])
    assert account.over_days(30) == 0.0
    assert account.totals.per_30_days == 0.0 and account.totals.lifetime == 0.0


# --- settings -------------------------------------------------------------------------------


def test_the_sdk_defaults_come_from_one_place() -> None:
    """Client's and AsyncClient's signature defaults are DeviceSettings()'s."""
    fields = [f.name for f in dataclasses.fields(DeviceSettings)]
    for cls in (Client, AsyncClient):
        parameters = inspect.signature(cls.__init__).parameters
        assert {f: parameters[f].default for f in fields} == dataclasses.asdict(SDK_DEFAULTS)
    assert DeviceSettings() == SDK_DEFAULTS


@pytest.mark.parametrize(
    "bad",
    [
        {"max_reports_per_period": 0},
        {"max_reports_per_period": True},
        {"max_reports_per_period": 1.5},
        {"lifetime_epsilon": 0},
        {"lifetime_epsilon": math.inf},
        {"lifetime_epsilon": "1"},
        {"memoize": [1, 2]},
        {"instantaneous_ratio": 1.0},
        {"instantaneous_ratio": math.nan},
    ],
)
def test_device_settings_refuse_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        DeviceSettings(**bad)  # type: ignore[arg-type]


def test_memoize_names_are_kept_as_a_frozenset() -> None:
    assert DeviceSettings(memoize=["a", "b"]).memoize == frozenset({"a", "b"})  # type: ignore[arg-type]
    assert DeviceSettings(memoize="a").memoized("a")  # type: ignore[arg-type]
    assert not DeviceSettings(memoize="a").memoized("ab")  # type: ignore[arg-type]


def test_a_client_states_its_own_account(tmp_path: Path) -> None:
    """``Client.privacy_account()`` is the account of its installed specs and own settings."""
    url = loopback_url(spare_port())  # nothing listens: only the specs and settings matter
    with Client(
        url, state_dir=tmp_path, metrics=SPECS, max_reports_per_period=2, memoize={"browser"}
    ) as client:
        settings = DeviceSettings(max_reports_per_period=2, memoize=frozenset({"browser"}))
        assert client.settings == settings
        assert client.privacy_account() == privacy_account(SPECS, settings)
    with Client(url, state_dir=tmp_path / "defaults", metrics=[BOOL]) as client:
        assert client.settings == SDK_DEFAULTS
