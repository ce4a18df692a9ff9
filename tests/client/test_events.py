"""Events aggregated on the device: the rule's checks, each aggregate's window value, and the
windows a device reports (once each, only when active, never back in time), through the real
Client and its SQLite state."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from deniable.client import Client, MetricSpec
from deniable.client.errors import InvalidInput, SpecError
from deniable.client.events import MEDIAN_BINS, DayAggregate, EventRule, window_value
from deniable.client.outbox import DB_NAME
from deniable.client.windows import day_number

START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)  # a Monday
UNREACHABLE = "http://127.0.0.1:9"


def _rule(aggregate: str, **extra: object) -> EventRule:
    return EventRule.from_dict("m", {"aggregate": aggregate, **extra})


def _day(**fields: object) -> DayAggregate:
    return DayAggregate(**fields)  # type: ignore[arg-type]


class TestRule:
    def test_json_round_trip_and_fingerprint_only_when_present(self) -> None:
        plain = MetricSpec.boolean("used", epsilon=1)
        spec = plain.with_events("any", window=7)
        assert "events" not in plain.to_dict()
        assert spec.to_dict()["events"] == {"aggregate": "any", "window": 7, "report_empty": True}
        assert spec.fingerprint != plain.fingerprint
        assert MetricSpec.from_dict(spec.to_dict()) == spec

    @pytest.mark.parametrize(
        ("make", "events", "problem"),
        [
            (
                lambda: MetricSpec.boolean("b", epsilon=1),
                {"aggregate": "count"},
                "cannot aggregate",
            ),
            (
                lambda: MetricSpec.text("t", max_length=8, epsilon=4),
                {"aggregate": "any"},
                "no aggregation",
            ),
            (
                lambda: MetricSpec.boolean("b", epsilon=1),
                {"aggregate": "any", "report_empty": False},
                "must be true",
            ),
            (
                lambda: MetricSpec.numeric("n", lower=0, upper=1, epsilon=1),
                {"aggregate": "mean", "report_empty": True},
                "cannot be true",
            ),
            (
                lambda: MetricSpec.boolean("b", epsilon=1, period="week"),
                {"aggregate": "any", "window": 7},
                "must be day",
            ),
            (
                lambda: MetricSpec.boolean("b", epsilon=1),
                {"aggregate": "any", "window": 3},
                "window must be",
            ),
            (
                lambda: MetricSpec.boolean("b", epsilon=1),
                {"aggregate": "any", "every": 3},
                "no field every",
            ),
        ],
    )
    def test_a_rule_its_metric_cannot_carry_is_refused_by_name(self, make, events, problem) -> None:
        with pytest.raises(SpecError, match=problem):
            MetricSpec.from_dict({**make().to_dict(), "events": events})


class TestWindowValue:
    def test_counted_windows_report_zero_and_false(self) -> None:
        assert window_value(_rule("any"), [DayAggregate()]) is False
        assert window_value(_rule("count"), []) == 0
        assert window_value(_rule("count"), [_day(n=2), _day(n=3)]) == 5
        assert window_value(_rule("any"), [DayAggregate(), _day(n=1)]) is True

    def test_value_aggregates_over_days(self) -> None:
        days = [
            _day(n=2, total=10.0, low=3.0, high=7.0, last=7.0),
            _day(n=1, total=2.0, low=2.0, high=2.0, last=2.0),
        ]
        assert window_value(_rule("sum"), days) == 12.0
        assert window_value(_rule("mean"), days) == 4.0
        assert window_value(_rule("min"), days) == 2.0
        assert window_value(_rule("max"), days) == 7.0
        assert window_value(_rule("last"), [*days, DayAggregate()]) == 2.0
        assert window_value(_rule("mean"), [DayAggregate()]) is None
        assert window_value(_rule("sum", report_empty=True), [DayAggregate()]) == 0

    def test_median_and_mode(self) -> None:
        bins = {0: 1, 5: 1, 9: 3}
        assert window_value(_rule("median"), [_day(n=5, bins=bins)], edges=tuple(range(12))) == 9
        width = 1000 / MEDIAN_BINS
        value = window_value(_rule("median"), [_day(n=2, bins={3: 1, 7: 1})], bounds=(0.0, 1000.0))
        assert value == pytest.approx(3.5 * width)  # the lower median's bin middle
        modes = [_day(n=3, bins={2: 2, 0: 1}), _day(n=2, bins={0: 1, 1: 1})]
        assert (
            window_value(_rule("mode"), modes, categories=("a", "b", "c")) == "a"
        )  # a tie: first listed

    def test_a_saved_aggregate_round_trips_and_a_damaged_one_is_refused(self) -> None:
        day = _day(n=3, total=4.5, low=1.0, high=2.0, last="b", bins={1: 2})
        assert DayAggregate.from_json(json.loads(json.dumps(day.to_json()))) == day
        with pytest.raises(InvalidInput):
            DayAggregate.from_json([1, 2])


class Device:
    """One simulated device: a real Client over a state_dir, a clock the test moves, no
    collector (reports stay in the outbox, where the test reads them)."""

    def __init__(self, state_dir: Path, specs: list[MetricSpec]) -> None:
        """Installed the day before :data:`START` (a spec's windows start the day after it
        arrives), then open and committed on :data:`START`."""
        self.state_dir, self.specs, self.now = state_dir, specs, START - dt.timedelta(days=1)
        self.client = self._open()
        self.now = START
        self.commit()

    def _open(self) -> Client:
        return Client(
            UNREACHABLE,
            state_dir=self.state_dir,
            metrics=self.specs,
            clock=lambda: self.now,
            timeout=0.05,
            persist_interval=1.0,
        )

    def advance(self, days: float) -> None:
        self.now += dt.timedelta(days=days)

    def commit(self) -> None:
        self.client._persister.persist()

    def restart(self) -> None:
        self.client.close(timeout=0.05)
        self.client = self._open()

    def reports(self, metric: str) -> list[dict]:
        """Every report of ``metric`` in the outbox, as parsed JSON."""
        self.commit()
        with sqlite3.connect(self.state_dir / DB_NAME) as db:
            runs = [r for (r,) in db.execute("SELECT reports FROM outbox ORDER BY seq")]
        reports = [json.loads(f"[{run}]") for run in runs]
        return [r for run in reports for r in run if r["metric"] == metric]


@pytest.fixture
def specs() -> list[MetricSpec]:
    return [
        MetricSpec.histogram("crashes", edges=[0, 1, 2, 3, 5, 10], epsilon=2).with_events("count"),
        MetricSpec.boolean("used", epsilon=2).with_events("any", window=7),
        MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=2).with_events("mean"),
        MetricSpec.boolean("weekly", epsilon=2, period="week").with_events("any"),
    ]


def test_one_report_per_window_whatever_the_events(tmp_path: Path, specs) -> None:
    device = Device(tmp_path, specs)
    for _ in range(50):
        device.client.event("crashes")
    device.commit()
    assert device.reports("crashes") == []  # nothing leaves before the window closes
    device.advance(1)
    device.client.event("crashes")
    device.commit()  # the background commit of an open app marks the day active
    device.advance(1)
    labels = [r["period"] for r in device.reports("crashes")]
    assert labels == ["2026-11-30", "2026-12-01"]


def test_an_idle_active_day_reports_zero_and_an_inactive_one_nothing(tmp_path: Path, specs) -> None:
    device = Device(tmp_path, specs)
    device.advance(1)
    device.commit()  # open on 12-01 without any event: its window is still reported
    device.client.close(timeout=0.05)
    device.advance(3)  # 12-02 and 12-03 with the app closed
    device.client = device._open()
    device.advance(1)
    labels = [r["period"] for r in device.reports("crashes")]
    assert labels == ["2026-11-30", "2026-12-01", "2026-12-04"]


def test_a_window_that_closed_while_the_app_was_closed_is_reported_once_at_start(
    tmp_path: Path, specs
) -> None:
    device = Device(tmp_path, specs)
    device.client.observe("load_ms", 800.0)
    device.commit()
    device.client.close(timeout=0.05)
    device.advance(2)
    device.client = device._open()
    device.commit()
    device.restart()
    device.commit()
    assert [r["period"] for r in device.reports("load_ms")] == ["2026-11-30"]


def test_rolling_windows_start_when_the_spec_is_known_and_report_daily(
    tmp_path: Path, specs
) -> None:
    device = Device(tmp_path, specs)
    device.client.event("used")
    for _ in range(9):
        device.advance(1)
        device.commit()
    labels = [r["period"] for r in device.reports("used")]
    # the first window is the first that starts on the day the spec became known (11-30)
    assert labels == ["2026-12-06", "2026-12-07", "2026-12-08"]


def test_a_calendar_week_reports_after_it_ends(tmp_path: Path, specs) -> None:
    device = Device(tmp_path, specs)
    for _ in range(13):
        device.advance(1)
        device.commit()
    assert [r["period"] for r in device.reports("weekly")] == ["2026-W49"]


def test_time_never_goes_back(tmp_path: Path, specs) -> None:
    device = Device(tmp_path, specs)
    device.advance(1)
    device.commit()
    device.advance(-3)  # the clock is set back: events count on the newest day seen, 12-01
    device.client.observe("load_ms", 100.0)
    device.advance(4)
    device.commit()
    assert [r["period"] for r in device.reports("load_ms")] == ["2026-12-01"]


def test_a_new_spec_waits_for_its_first_whole_day(tmp_path: Path, specs) -> None:
    device = Device(tmp_path, specs[:1])
    device.client.close(timeout=0.05)
    device.specs = specs
    device.client = device._open()
    device.client.observe("load_ms", 100.0)  # the day load_ms arrived: not a whole window
    device.advance(1)
    device.client.observe("load_ms", 200.0)
    device.commit()
    device.advance(1)
    assert [r["period"] for r in device.reports("load_ms")] == ["2026-12-01"]
    assert day_number(device.now) == day_number(START) + 2


@pytest.mark.parametrize(("away", "reported"), [(31, ["2026-11-30"]), (32, [])])
def test_a_device_offline_for_weeks_reports_the_last_31_days_only(
    tmp_path: Path, specs, away: int, reported: list[str]
) -> None:
    device = Device(tmp_path, specs)
    device.client.event("crashes")
    device.client.close(timeout=0.05)
    device.advance(away)
    device.client = device._open()
    assert [r["period"] for r in device.reports("crashes")] == reported


def test_wrong_calls_are_refused_without_the_value(tmp_path: Path, specs) -> None:
    device = Device(tmp_path, specs)
    with pytest.raises(InvalidInput, match="call event") as refused:
        device.client.observe("crashes", 1234.5)
    assert "1234" not in str(refused.value)
    with pytest.raises(InvalidInput, match="call observe"):
        device.client.event("load_ms")
    with pytest.raises(InvalidInput, match="call event\\(\\) or observe"):
        device.client.record("used", True)
    with pytest.raises(InvalidInput, match="load_ms"):
        device.client.observe("load_ms", float("nan"))
    with pytest.raises(InvalidInput, match="unknown metric 'nope'"):
        device.client.event("nope")


def test_a_new_fingerprint_starts_afresh(tmp_path: Path, specs) -> None:
    device = Device(tmp_path, specs)
    for _ in range(3):
        device.client.event("crashes")
    device.commit()
    device.client.close(timeout=0.05)
    device.specs = [
        MetricSpec.histogram("crashes", edges=[0, 1, 2, 4], epsilon=2).with_events("count")
    ]
    device.client = device._open()
    device.advance(1)
    device.commit()
    device.advance(1)
    reports = device.reports("crashes")
    assert [r["fingerprint"] for r in reports] == [device.specs[0].fingerprint]
    assert reports[0]["period"] == "2026-12-01"  # the old spec's day is dropped, never mixed
