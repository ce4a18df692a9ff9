"""The privacy account against a simulated population running the real SDK for 30 days.

Each device is its own :class:`deniable.client.Client` with its own ``state_dir``, its specs
passed in code and an injected clock, and is closed and opened again half way (the ledger
it keeps must survive). Its settings are one of several profiles (the defaults, three
reports per period, memoization, a lifetime cap, and mixes), and it either records every
metric past its budget every day, each admitted record bringing a value it has not sent
before, or for a metric memoized in two layers always the same one ("full": the worst case
the account describes), or records a seeded random handful
of random values ("casual"). After each simulated day, the eps its own ledger says it spent
(``privacy_spent()``) must lie within the account: in total within ``over_days`` of the days
elapsed, and per metric within its period's and its windows' figures.

Only the ledger matters here, not delivery, so the devices point at a loopback port where
nothing listens: their reports stay in their outboxes, which changes nothing they spend.

Two calendars. Starting on Sunday 31 January 2021 (a common year), the 30 days touch six ISO
weeks and three months, the most any 30 days can, so devices at full budget must reach the
30-day account exactly: the account is not loose. Starting on Wednesday 18 November 2026
(mid-week, mid-month, crossing into December), the full devices must spend exactly what the
ledger's rules give for the periods those days touch, counted from their labels, which for
the weekly and monthly metrics is less than the account.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from deniable.client import Client, DeviceSettings, MetricSpec, privacy_account
from deniable.client.ledger import lifetime_reports
from deniable.client.mechanisms import TwoLayers, two_layers
from deniable.client.spec import period_label
from testkit import Clock, loopback_url, spare_port

SPECS = (
    MetricSpec.boolean("dark_mode", epsilon=0.5),
    MetricSpec.categorical(
        "browser", ["chrome", "safari", "edge", "other"], epsilon=1.0, period="week"
    ),
    MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=0.7),
    MetricSpec.histogram("load_hist", [0, 100, 250, 500, 1000], epsilon=0.3, period="month"),
)
BY_NAME = {spec.name: spec for spec in SPECS}
PROFILES = (
    DeviceSettings(),
    DeviceSettings(max_reports_per_period=3),
    DeviceSettings(memoize=True),
    DeviceSettings(lifetime_epsilon=4.0),
    DeviceSettings(max_reports_per_period=2, memoize=True, lifetime_epsilon=3.0),
    DeviceSettings(max_reports_per_period=3, memoize=frozenset({"browser", "load_hist"})),
)
DAYS = 30
RESTART_AFTER = 15
"""Every device is closed after this many days and opened again on its state_dir."""
HOURS = (0, 7, 13, 23)
"""The UTC hours of a day at which a device records."""
TOLERANCE = 1e-9

ALIGNED = dt.datetime(2021, 1, 31, tzinfo=dt.UTC)
MID_MONTH = dt.datetime(2026, 11, 18, tzinfo=dt.UTC)
CALENDARS = {
    "aligned": (ALIGNED, 2, 3),
    "mid_month": (MID_MONTH, 1, 2),
}
"""Per calendar: its first day, and per profile how many full and casual devices run it
(6 x 5 + 6 x 3 = 48 devices in all)."""


@dataclass
class Device:
    """One simulated device: its settings, whether it records at full budget, its seeded
    draws, and how many reports of each metric it has had admitted (its next new value)."""

    settings: DeviceSettings
    full: bool
    rng: random.Random
    admitted: dict[str, int]

    def value(self, spec: MetricSpec) -> object:
        """The next value to record: never sent before while the domain allows (full), or a
        random one (casual). A full device repeats one value of a metric it memoizes in two
        layers: its reports are not capped by the memo, and repeating sends the most."""
        n = self.admitted[spec.name] if self.full else self.rng.randrange(1_000_000)
        if self.full and layers_of(spec, self.settings) is not None:
            n = 0
        if spec.type == "boolean":
            return n % 2 == 1
        if spec.type == "categorical":
            return spec.categories[n % spec.k]
        if spec.type == "histogram":
            return spec.edges[n % spec.k] + 1  # type: ignore[index]
        return (n * 7.3) % 5000 if self.full else self.rng.uniform(-100, 5100)

    def records_today(self, spec: MetricSpec) -> int:
        """How many times to record ``spec`` at one of today's hours."""
        if self.full:
            return self.settings.max_reports_per_period + 1
        return self.rng.choice((0, 0, 1, 1, 2, 4))


def open_client(url: str, state_dir: Path, device: Device, clock: Clock) -> Client:
    """A real SDK client for ``device`` with its settings and the simulated clock."""
    settings = device.settings
    return Client(
        url,
        state_dir=state_dir,
        metrics=SPECS,
        max_reports_per_period=settings.max_reports_per_period,
        memoize=settings.memoize,
        lifetime_epsilon=settings.lifetime_epsilon,
        clock=clock,
        flush_interval=60.0,
        persist_interval=0.1,
        timeout=0.5,
        backoff_base=5.0,
    )


def layers_of(spec: MetricSpec, settings: DeviceSettings) -> TwoLayers | None:
    """The two layers of ``spec`` on a device memoizing it (krr and brr metrics only)."""
    if not settings.memoized(spec.name) or spec.type == "numeric":
        return None
    return two_layers(spec.randomizer, settings.instantaneous_ratio or 0.0)


def spent_by_the_rules(device: Device, first: dt.date) -> dict[str, float]:
    """What a full device must have spent on each metric over any two histories after DAYS
    days from ``first``: r reports in each period the days touch (their distinct labels),
    capped by the lifetime cap, each at eps. Memoized in two layers, n > 1 reports cost
    n eps_inst, and the lifetime cap counts reports at that cost (one report at eps, whatever
    the values: issue 37)."""
    spent = {}
    cap = device.settings.lifetime_epsilon
    for spec in SPECS:
        labels = {period_label(spec.period, first + dt.timedelta(days=d)) for d in range(DAYS)}
        reports = device.settings.max_reports_per_period * len(labels)
        layers = layers_of(spec, device.settings)
        if layers is None:
            if cap is not None:
                reports = min(reports, lifetime_reports(cap, spec.epsilon))
            spent[spec.name] = reports * spec.epsilon
            continue
        if cap is not None:
            one = spec.epsilon <= cap + 1e-9
            reports = min(
                reports, max(1, lifetime_reports(cap, layers.instantaneous_epsilon)) * one
            )
        per_report = spec.epsilon if reports == 1 else layers.instantaneous_epsilon
        spent[spec.name] = reports * per_report
    return spent


def live_one_day(client: Client, device: Device, clock: Clock, day: dt.datetime) -> None:
    """Record at each of HOURS on ``day``, metrics in a shuffled order."""
    for hour in HOURS:
        clock.now = day + dt.timedelta(hours=hour, minutes=device.rng.randrange(60))
        for spec in device.rng.sample(SPECS, len(SPECS)):
            for _ in range(device.records_today(spec)):
                if client.record(spec.name, device.value(spec)):
                    device.admitted[spec.name] += 1


def check_within_the_account(client: Client, device: Device, days: int) -> dict[str, float]:
    """The ledger's spending after ``days`` days, checked against the account; returned as
    the total eps per metric."""
    account = privacy_account(SPECS, device.settings)
    assert client.privacy_account() == account
    spent = client.privacy_spent()
    totals = {name: s.total_epsilon for name, s in spent.items()}
    assert math.fsum(totals.values()) <= account.over_days(days) + TOLERANCE
    for metric in account.metrics:
        mine = spent[metric.metric]
        assert mine.period_epsilon <= metric.per_period + TOLERANCE, metric.metric
        for window, length in (("per_day", 1), ("per_7_days", 7), ("per_30_days", 30)):
            if days <= length:
                assert mine.total_epsilon <= getattr(metric, window) + TOLERANCE, metric.metric
        if metric.lifetime is not None:
            assert mine.total_epsilon <= metric.lifetime + TOLERANCE, metric.metric
    return totals


def run_device(url: str, state_dir: Path, device: Device, first: dt.datetime) -> dict[str, float]:
    """Run ``device`` for DAYS days from ``first``, checking it after each; its final totals."""
    clock = Clock(first)
    client = open_client(url, state_dir, device, clock)
    try:
        for day in range(DAYS):
            if day == RESTART_AFTER:
                client.close(timeout=0)
                client = open_client(url, state_dir, device, clock)
            live_one_day(client, device, clock, first + dt.timedelta(days=day))
            totals = check_within_the_account(client, device, day + 1)
    finally:
        client.close(timeout=0)
    return totals


@pytest.mark.parametrize("calendar", sorted(CALENDARS))
def test_no_device_spends_past_its_account_and_full_devices_reach_it(
    tmp_path: Path, calendar: str
) -> None:
    first, full_per_profile, casual_per_profile = CALENDARS[calendar]
    url = loopback_url(spare_port())
    rng = random.Random(f"privacy-account-{calendar}")
    reached = 0
    for p, settings in enumerate(PROFILES):
        for i in range(full_per_profile + casual_per_profile):
            full = i < full_per_profile
            seed = rng.randrange(2**32)
            device = Device(settings, full, random.Random(seed), dict.fromkeys(BY_NAME, 0))
            totals = run_device(url, tmp_path / f"device-{p}-{i}", device, first)
            if not full:
                continue
            account = privacy_account(SPECS, settings)
            expected = spent_by_the_rules(device, first.date())
            assert totals == pytest.approx(expected, abs=TOLERANCE), (settings, seed)
            if calendar == "aligned":
                by_metric = {m.metric: m.per_30_days for m in account.metrics}
                assert totals == pytest.approx(by_metric, abs=TOLERANCE), settings
                assert math.fsum(totals.values()) == pytest.approx(
                    account.over_days(DAYS), abs=TOLERANCE
                )
                reached += 1
    if calendar == "aligned":
        assert reached == len(PROFILES) * full_per_profile


def test_the_aligned_calendar_touches_the_most_periods() -> None:
    """31 January 2021 is a Sunday of a common year: its 30 days touch as many weeks and
    months as any 30 days can, and the mid-month calendar touches fewer."""
    for kind in ("week", "month"):
        touched = {
            name: len({period_label(kind, start + dt.timedelta(days=d)) for d in range(DAYS)})
            for name, (start, _, _) in CALENDARS.items()
        }
        account = privacy_account([MetricSpec.boolean("x", epsilon=1.0, period=kind)])  # type: ignore[arg-type]
        assert touched["aligned"] == account.over_days(DAYS) > touched["mid_month"]
