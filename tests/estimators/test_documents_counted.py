"""What an estimate document's n counts (issue 40): devices for one window of an event metric
that reports empty windows, reports elsewhere, nothing new for a metric of recorded values;
an ``any`` metric's devices with the event are n times the share and its interval; and the
rule's words every surface shows."""

from __future__ import annotations

from typing import Any

import pytest

from deniable.client import MetricSpec
from deniable.estimators.documents import (
    counted_document,
    counted_n,
    counted_series,
    counts_devices,
    events_text,
)
from deniable.estimators.engine import DocumentOptions, document
from deniable.estimators.results import PeriodCounts

DAY, NEXT = "2026-06-01", "2026-06-02"


class Counts:
    """A counts source over ``labels``: each period's (n, true count) of a boolean."""

    def __init__(self, periods: dict[str, tuple[int, int]]) -> None:
        self.periods = periods

    @property
    def first(self) -> str | None:
        return min(self.periods)

    @property
    def last(self) -> str | None:
        return max(self.periods)

    def counts(self) -> list[PeriodCounts]:
        return [PeriodCounts(p, n, [n - t, t]) for p, (n, t) in sorted(self.periods.items())]

    def shares(self, spec: MetricSpec, options: dict[str, Any]) -> Any:
        from deniable.estimators.kinds.categorical import counted_shares

        return counted_shares(spec, self.counts(), options)


ACTIVES = MetricSpec.boolean("actives", epsilon=1.0).with_events("any", window=7)
RECORDED = MetricSpec.boolean("recorded", epsilon=1.0)


def test_one_window_of_an_any_metric_counts_devices_and_those_with_the_event() -> None:
    found = document(ACTIVES, Counts({DAY: (5000, 2000)}), DocumentOptions())
    assert (found["counted"], found["active_devices"]) == ("devices", 5000)
    true = next(r for r in found["estimates"] if r["category"] == "true")
    devices = found["devices_with_event"]
    assert devices["estimate"] == pytest.approx(5000 * true["frequency"])
    assert devices["low"] == pytest.approx(5000 * true["ci_low"])
    assert devices["high"] == pytest.approx(5000 * true["ci_high"])
    assert counted_n(found) == "5,000 devices"


def test_more_windows_count_reports_and_recorded_values_are_unchanged() -> None:
    both = document(ACTIVES, Counts({DAY: (5000, 2000), NEXT: (5000, 2000)}), DocumentOptions())
    assert both["counted"] == "reports" and "active_devices" not in both
    assert counted_n(both) == "10,000 reports"
    plain = document(RECORDED, Counts({DAY: (5000, 2000)}), DocumentOptions())
    assert "counted" not in plain and counted_n(plain) == "5,000 reports"
    same = {"start": DAY, "end": DAY, "n": 3, "estimates": []}
    assert counted_document(RECORDED, same) is same
    assert counted_series(RECORDED, same) is same


@pytest.mark.parametrize(
    ("spec", "devices", "words"),
    [
        (ACTIVES, True, "any per device, rolling 7 days"),
        (
            MetricSpec.histogram("crashes", [0, 1, 2, 5], epsilon=1).with_events("count"),
            True,
            "count per device, calendar day",
        ),
        (
            MetricSpec.numeric("spent", lower=0, upper=9, epsilon=1, period="month").with_events(
                "sum", report_empty=True
            ),
            True,
            "sum per device, calendar month, empty windows reported",
        ),
        (
            MetricSpec.numeric("load", lower=0, upper=9, epsilon=1).with_events("mean", window=1),
            False,
            "mean per device, rolling 1 day",
        ),
        (
            MetricSpec.categorical("tab", ["a", "b"], epsilon=1, period="week").with_events("mode"),
            False,
            "mode per device, ISO week",
        ),
    ],
)
def test_devices_only_where_every_active_device_reports(
    spec: MetricSpec, devices: bool, words: str
) -> None:
    assert counts_devices(spec, DAY, DAY) is devices
    assert counts_devices(spec, DAY, NEXT) is False
    assert counts_devices(spec, None, None) is False
    row = {"category": "true", "frequency": 0.5, "ci_low": 0.25, "ci_high": 0.75}
    shaped = counted_document(spec, {"start": DAY, "end": DAY, "n": 8, "estimates": [row]})
    assert shaped["counted"] == ("devices" if devices else "reports")
    if spec is ACTIVES:
        assert shaped["devices_with_event"] == {"estimate": 4.0, "low": 2.0, "high": 6.0}
    else:
        assert "devices_with_event" not in shaped, "only an any metric has a share of true"
    assert counted_series(spec, {"series": []})["counted"] == shaped["counted"]
    assert events_text(spec) == words
    assert events_text(RECORDED) is None
