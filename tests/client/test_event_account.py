"""The privacy account of event metrics (issue 40): one report per window whatever
``max_reports_per_period``, with the window and its figures (an :class:`EventMetricAccount`)
for event metrics only. tests/client/test_event_account_exact.py checks the figures by exact
enumeration."""

from __future__ import annotations

import pytest

from deniable.client import DeviceSettings, privacy_account
from deniable.client.account import EventMetricAccount, MetricAccount
from deniable.client.mechanisms import two_layers
from testkit.privacy_events import ACTIVES, EVENTS, PLAIN, WEEKLY, by_name


@pytest.mark.parametrize("reports", [1, 3])
def test_an_event_metric_sends_one_report_per_window_whatever_the_settings(reports: int) -> None:
    account = privacy_account([*PLAIN, *EVENTS], DeviceSettings(reports))
    rows = by_name(account.metrics)
    actives, crashes, weekly = rows["search_actives"], rows["crashes"], rows["used_export"]
    assert isinstance(actives, EventMetricAccount)
    assert (actives.aggregate, actives.rolling, actives.window_days) == ("any", True, 7)
    assert (crashes.aggregate, crashes.rolling, crashes.window_days) == ("count", False, 1)
    assert (weekly.rolling, weekly.window_days) == (False, 7)
    for metric in (actives, crashes, weekly):
        assert metric.reports_per_period == 1
        assert metric.per_window == metric.epsilon == metric.per_period
    # Any T days send T reports of a rolling window (a daily metric's figures); one day's
    # events are seen by the window's 7 reports.
    assert (actives.per_day, actives.per_7_days, actives.per_30_days) == (1.0, 7.0, 30.0)
    assert actives.per_day_of_events == 7.0
    assert crashes.per_30_days == 60.0 and crashes.per_day_of_events == 2.0
    assert weekly.per_7_days == 1.0 and weekly.per_30_days == 3.0
    assert weekly.per_day_of_events == 0.5
    # Other metrics keep their own rule and class.
    assert type(rows["dark_mode"]) is MetricAccount
    assert rows["dark_mode"].reports_per_period == reports
    assert rows["dark_mode"].per_30_days == 30.0 * reports


def test_memoized_event_metrics_count_the_fresh_layer_and_state_eps_perm() -> None:
    account = privacy_account(EVENTS, DeviceSettings(memoize=True))
    rows = by_name(account.metrics)
    actives, crashes = rows["search_actives"], rows["crashes"]
    layers = two_layers(ACTIVES.randomizer, 2.0)
    assert layers is not None
    assert actives.permanent_epsilon == pytest.approx(layers.permanent_epsilon)
    assert actives.per_window == 1.0
    assert actives.per_day_of_events == pytest.approx(7 * 2.0)
    # One differing report among others that show the permanent answers: eps_inst, not eps.
    assert crashes.per_day_of_events == pytest.approx(2 * 2.0)
    unlayered = privacy_account(EVENTS, DeviceSettings(memoize=True, instantaneous_ratio=None))
    assert by_name(unlayered.metrics)["search_actives"].per_day_of_events is None
    capped = privacy_account(EVENTS, DeviceSettings(memoize=True, lifetime_epsilon=5.0))
    assert by_name(capped.metrics)["search_actives"].per_day_of_events == pytest.approx(4.0)


def test_a_lifetime_cap_below_eps_leaves_no_window_reported() -> None:
    account = privacy_account([WEEKLY], DeviceSettings(lifetime_epsilon=0.25))
    (weekly,) = account.metrics
    assert isinstance(weekly, EventMetricAccount)
    assert weekly.per_window == 0 and weekly.per_day_of_events == 0
