"""``deniable simulate`` of event metrics (issue 40): devices call event() or observe() over
the days of a window through the real SDK and a real collector, one report per device active
in the window, and the estimate of that window counts devices and covers the printed truth.

Every run is seeded, so each outcome is deterministic; the intervals are 95% simultaneous (a
histogram's quantiles jointly), so another seed misses a truth about once in twenty runs per
metric, not more.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pytest

from deniable.cli.localcollector import LocalCollector
from deniable.cli.simulated_events import DeviceDays, true_value, window_truth
from deniable.client import MetricSpec
from testkit import quantile_holds
from testkit.cli import run_cli as run

DATE = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).date()
"""The last day of the simulated windows: two days ago, inside the collector's window."""


@pytest.fixture(scope="module")
def collector() -> Iterator[LocalCollector]:
    with LocalCollector() as running:
        yield running


def _admin(collector: LocalCollector) -> tuple[str, ...]:
    return ("--collector", collector.url, "--token", collector.token)


def _create(collector: LocalCollector, name: str, *options: str) -> None:
    created = run(*_admin(collector), "metrics", "create", name, *options)
    assert created.exit_code == 0, created.output


def _simulate(collector: LocalCollector, name: str, *options: str) -> dict:
    result = run(
        *_admin(collector),
        "simulate",
        "--metric",
        name,
        "--date",
        str(DATE),
        "--format",
        "json",
        *options,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _estimate(collector: LocalCollector, name: str, period: str) -> dict:
    result = run(
        *_admin(collector),
        "estimate",
        name,
        "--start",
        period,
        "--end",
        period,
        "--simultaneous",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_crash_counts_and_seven_day_actives(collector: LocalCollector) -> None:
    _create(
        collector,
        "sim_crashes",
        "--type",
        "histogram",
        "--edges",
        "0,1,2,3,5,10",
        "--epsilon",
        "2",
        "--aggregate",
        "count",
    )
    crashes = _simulate(collector, "sim_crashes", "--clients", "3000", "--seed", "3")
    assert crashes["period"] == str(DATE) and crashes["window"]["first"] == str(DATE)
    assert crashes["delivered"] == crashes["devices"]  # one report per active device
    assert 0.6 * 3000 < crashes["devices"] < 0.8 * 3000  # active with chance 0.7
    estimate = _estimate(collector, "sim_crashes", crashes["period"])
    assert estimate["n"] == crashes["devices"] and estimate["counted"] == "devices"
    for entry in estimate["quantiles"]:
        assert quantile_holds(entry, crashes["truth"]["quantiles"][f"{entry['q']:g}"])
    for row in estimate["estimates"]:
        assert row["ci_low"] <= crashes["truth"]["shares"][row["category"]] <= row["ci_high"]

    _create(
        collector, "sim_used", "--boolean", "--epsilon", "2", "--aggregate", "any", "--window", "7"
    )
    used = _simulate(
        collector,
        "sim_used",
        "--clients",
        "3000",
        "--seed",
        "4",
        "--rate",
        "0.2",
        "--active",
        "0.3",
    )
    first = DATE - dt.timedelta(days=6)
    assert used["window"] == {"first": str(first), "last": str(DATE)}
    assert 1 - 0.7**7 - 0.02 < used["devices"] / 3000 < 1 - 0.7**7 + 0.02  # active on a day
    estimate = _estimate(collector, "sim_used", used["period"])
    assert estimate["n"] == used["devices"] == used["delivered"]
    assert estimate["active_devices"] == used["devices"]
    for row in estimate["estimates"]:
        assert row["ci_low"] <= used["truth"][row["category"]] <= row["ci_high"]


def test_observed_values_a_mean_and_a_mode(collector: LocalCollector) -> None:
    _create(
        collector,
        "sim_load",
        "--type",
        "numeric",
        "--lower",
        "0",
        "--upper",
        "5000",
        "--epsilon",
        "2",
        "--aggregate",
        "mean",
    )
    load = _simulate(collector, "sim_load", "--clients", "3000", "--seed", "5", "--rate", "3")
    assert load["delivered"] == load["devices"] < 3000  # no observation, no report
    estimate = _estimate(collector, "sim_load", load["period"])
    mean = estimate["mean"]
    assert estimate["n"] == load["devices"]
    assert mean["ci_low"] <= load["truth"]["mean"] <= mean["ci_high"]

    _create(collector, "sim_mode", "--categories", "a,b,c", "--epsilon", "2", "--aggregate", "mode")
    mode = _simulate(
        collector,
        "sim_mode",
        "--clients",
        "3000",
        "--seed",
        "6",
        "--distribution",
        '{"a": 6, "b": 3, "c": 1}',
    )
    estimate = _estimate(collector, "sim_mode", mode["period"])
    assert estimate["n"] == mode["devices"] == mode["delivered"]
    assert mode["truth"]["a"] > mode["truth"]["b"] > mode["truth"]["c"]
    for row in estimate["estimates"]:
        assert row["ci_low"] <= mode["truth"][row["category"]] <= row["ci_high"]


def test_a_weekly_window_is_the_last_whole_week(collector: LocalCollector) -> None:
    _create(
        collector,
        "sim_weekly",
        "--boolean",
        "--epsilon",
        "2",
        "--period",
        "week",
        "--aggregate",
        "any",
    )
    weekly = _simulate(collector, "sim_weekly", "--clients", "200", "--seed", "7")
    last = dt.date.fromisoformat(weekly["window"]["last"])
    first = dt.date.fromisoformat(weekly["window"]["first"])
    assert last.isoweekday() == 7 and (last - first).days == 6 and last <= DATE
    assert weekly["period"] == f"{first.isocalendar().year}-W{first.isocalendar().week:02d}"
    assert weekly["delivered"] == weekly["devices"]


def test_the_truth_is_computed_from_the_streams() -> None:
    spec = MetricSpec.histogram("c", [0, 1, 5], epsilon=1).with_events("count", window=7)
    devices = [
        DeviceDays((0, 3), {"c": {0: 2, 3: 1}}),
        DeviceDays((5,), {"c": {}}),  # active, no event: a zero
        DeviceDays((), {"c": {}}),  # never active: nothing
        DeviceDays((1,), {"c": {1: 9}}),  # clamped to the last edge
    ]
    assert window_truth(spec, devices, 0, 6) == [3, 0, 5]
    assert true_value("median", [[3.0, 1.0], [2.0, 8.0]]) == 2.0
    assert true_value("mode", [["b", "a"], ["a"]], ("a", "b")) == "a"
    assert true_value("mode", [["c", "b"]], ("a", "b", "c")) == "b"  # a tie: first listed
    assert true_value("mean", [[]]) is None


def test_help_documents_the_event_options() -> None:
    result = run("simulate", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for words in ("--active P", "--rate R", "event()", "observe()", "one report for the window"):
        assert words in text, words


def test_each_simulated_device_keeps_its_own_windows(collector: LocalCollector) -> None:
    from deniable.cli.api import CollectorAPI
    from deniable.cli.simulated_events import run_event_devices
    from deniable.cli.specs import spec_from_served

    spec = MetricSpec.histogram("sim_own", [0, 1, 2, 5], epsilon=2).with_events("count")
    with CollectorAPI(collector.url, collector.token) as api:
        served = spec_from_served(api.create_metric(spec.to_dict()))
    devices = [
        DeviceDays((0,), {"sim_own": {0: 3}}),  # its window of day 0 only
        DeviceDays((1,), {"sim_own": {}}),  # its window of day 1 only, a zero
        DeviceDays((), {"sim_own": {}}),  # never active: nothing
    ]
    first = DATE - dt.timedelta(days=1)
    delivery = run_event_devices(collector.url, [served], devices, first_day=first, days=2, seed=1)
    assert delivery.delivered == 2
    for day in (first, DATE):
        assert _estimate(collector, "sim_own", str(day))["n"] == 1
