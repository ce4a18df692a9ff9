"""The on-device privacy ledger: per-period budget, lifetime eps cap, memoization, eps spent."""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deniable.client import Client, MetricSpec, PrivacySpent, SeededRandomness
from deniable.client.mechanisms import two_layers
from deniable.client.outbox import DB_NAME
from testkit import spare_port
from testkit.stub_collector import StubCollector, fast_client, running

BOOL = MetricSpec.boolean("dark_mode", epsilon=0.5)
KRR4 = MetricSpec.categorical("browser", ["chrome", "firefox", "safari", "other"], epsilon=0.1)
OLH = MetricSpec.categorical("country", [f"c{i}" for i in range(30)], epsilon=0.5, mechanism="olh")
OUE = MetricSpec.categorical("font", [f"f{i}" for i in range(12)], epsilon=0.5, mechanism="oue")
SPECS = [BOOL, KRR4, OLH, OUE]
DAY0 = dt.datetime(2026, 10, 1, 8, tzinfo=dt.UTC)


class Clock:
    """A settable clock, so tests can move through periods."""

    def __init__(self, moment: dt.datetime = DAY0) -> None:
        self.moment = moment

    def __call__(self) -> dt.datetime:
        return self.moment

    def advance(self, days: int = 1) -> None:
        self.moment += dt.timedelta(days=days)


@pytest.fixture
def collector() -> Iterator[StubCollector]:
    with running(SPECS) as stub:
        yield stub


def make_client(url: str, state_dir: Path, **kwargs: Any) -> Client:
    return fast_client(url, state_dir, **{"metrics": SPECS, **kwargs})


def queued_payloads(state_dir: Path) -> list[str]:
    """The payloads waiting in a client's outbox, oldest first, as canonical JSON text."""
    with sqlite3.connect(state_dir / DB_NAME) as db:
        chunks = [r for (r,) in db.execute("SELECT reports FROM outbox ORDER BY seq")]
    reports = [r for chunk in chunks for r in json.loads(f"[{chunk}]")]
    return [json.dumps(r["payload"], sort_keys=True) for r in reports]


@pytest.mark.parametrize("budget", [1, 3])
def test_n_calls_in_one_period_send_at_most_the_budget(
    collector: StubCollector, tmp_path: Path, budget: int
) -> None:
    client = make_client(collector.url, tmp_path, max_reports_per_period=budget)
    outcomes = [client.record("dark_mode", i % 3 == 0) for i in range(20)]
    assert outcomes == [True] * budget + [False] * (20 - budget)
    assert client.flush(timeout=10)
    client.close()
    assert len(collector.stored) == budget
    stats = client.stats
    assert (stats.recorded, stats.admitted, stats.over_budget) == (20, budget, 20 - budget)


def test_each_new_period_opens_a_new_budget(collector: StubCollector, tmp_path: Path) -> None:
    clock = Clock()
    client = make_client(collector.url, tmp_path, clock=clock)
    for _ in range(5):
        assert client.record("browser", "safari")
        assert not client.record("browser", "safari")
        clock.advance()
    assert client.flush(timeout=10)
    client.close()
    periods = sorted(r["period"] for r in collector.stored.values())
    assert periods == [(DAY0 + dt.timedelta(days=d)).date().isoformat() for d in range(5)]


def test_weekly_metrics_are_budgeted_per_iso_week(collector: StubCollector, tmp_path: Path) -> None:
    weekly = MetricSpec.boolean("weekly_flag", epsilon=1.0, period="week")
    clock = Clock(dt.datetime(2026, 11, 16, tzinfo=dt.UTC))
    with running([weekly]) as stub:
        client = make_client(stub.url, tmp_path, metrics=[weekly], clock=clock)
        sent = []
        for _ in range(14):
            sent.append(client.record("weekly_flag", True))
            clock.advance()
        assert client.flush(timeout=10)
        client.close()
    assert sent == [True] + [False] * 6 + [True] + [False] * 6
    assert sorted(r["period"] for r in stub.stored.values()) == ["2026-W47", "2026-W48"]


def test_the_budget_survives_a_restart(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{spare_port()}"
    client = make_client(url, tmp_path)
    assert client.record("browser", "other")
    client.close(timeout=0.1)
    again = make_client(url, tmp_path)
    assert again.record("browser", "other") is False
    assert again.stats.over_budget == 1
    assert again.stats.queued == 1
    again.close(timeout=0.1)


def test_the_lifetime_cap_stops_reports_across_periods(tmp_path: Path) -> None:
    clock = Clock()
    client = make_client(
        f"http://127.0.0.1:{spare_port()}", tmp_path, clock=clock, lifetime_epsilon=1.6
    )
    sent = []
    for _ in range(6):
        sent.append(client.record("dark_mode", True))
        clock.advance()
    assert sent == [True, True, True, False, False, False]
    spent = client.privacy_spent()["dark_mode"]
    assert spent.total_epsilon == pytest.approx(1.5)
    assert spent.period_epsilon == 0
    client.close(timeout=0.1)
    reopened = make_client(
        f"http://127.0.0.1:{spare_port()}", tmp_path, clock=clock, lifetime_epsilon=1.6
    )
    clock.advance()
    assert reopened.record("dark_mode", False) is False
    reopened.close(timeout=0.1)


def test_privacy_spent_counts_eps_per_report_without_memoization(tmp_path: Path) -> None:
    clock = Clock()
    client = make_client(
        f"http://127.0.0.1:{spare_port()}", tmp_path, clock=clock, max_reports_per_period=2
    )
    for _ in range(3):
        client.record("browser", "chrome")
        client.record("browser", "chrome")
        clock.advance()
    client.record("browser", "chrome")
    spent = client.privacy_spent()
    assert spent["browser"] == PrivacySpent(
        pytest.approx(0.1), pytest.approx(0.7), pytest.approx(0.7)
    )
    assert spent["dark_mode"] == PrivacySpent(0, 0, 0)
    client.close(timeout=0.1)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.mechanism)
def test_without_the_fresh_layer_memoization_repeats_one_answer_across_30_periods(
    tmp_path: Path, spec: MetricSpec
) -> None:
    """instantaneous_ratio=None: the permanent answer is sent as is, for every mechanism; it
    reveals eps per value, and a change of value would show (unbounded over any histories)."""
    value: Any = True if spec.type == "boolean" else spec.categories[1]
    clock = Clock()
    permanent_only = {"instantaneous_ratio": None}
    with running(SPECS) as memo_stub, running(SPECS) as plain_stub:
        memo = make_client(
            memo_stub.url, tmp_path / "memo", clock=clock, memoize={spec.name}, **permanent_only
        )
        plain = make_client(plain_stub.url, tmp_path / "plain", clock=clock)
        for day in range(30):
            assert memo.record(spec.name, value)
            assert plain.record(spec.name, value)
            clock.advance()
            if day == 14:
                memo.close()
                memo = make_client(
                    memo_stub.url, tmp_path / "memo", clock=clock, memoize=True, **permanent_only
                )
        assert memo.flush(timeout=10) and plain.flush(timeout=10)
        spent = memo.privacy_spent()[spec.name]
        memo.close()
        plain.close()
    assert len(memo_stub.stored) == len(plain_stub.stored) == 30
    assert len(_distinct_payloads(memo_stub)) == 1
    assert len(_distinct_payloads(plain_stub)) > 1
    assert spent.per_value_epsilon == pytest.approx(spec.epsilon)
    assert spent.total_epsilon == math.inf
    assert len({r["period"] for r in memo_stub.stored.values()}) == 30


@pytest.mark.parametrize("spec", [BOOL, KRR4], ids=lambda s: s.mechanism)
def test_memoization_keeps_one_permanent_answer_and_randomizes_each_report_afresh(
    tmp_path: Path, spec: MetricSpec
) -> None:
    """The default: one memo entry for the value, kept across a restart; 30 reports that vary
    (the fresh layer), costing the permanent eps per value and 30 eps_inst over any two
    histories."""
    value: Any = True if spec.type == "boolean" else spec.categories[1]
    layers = two_layers(spec.randomizer, 2.0)
    assert layers is not None
    clock = Clock()
    with running(SPECS) as stub:
        memo = make_client(stub.url, tmp_path, clock=clock, memoize=True)
        for day in range(30):
            assert memo.record(spec.name, value)
            clock.advance()
            if day == 14:
                memo.close()
                memo = make_client(stub.url, tmp_path, clock=clock, memoize=True)
        assert memo.flush(timeout=10)
        spent = memo.privacy_spent()[spec.name]
        memo.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        entries = db.execute("SELECT count(*) FROM memo WHERE metric = ?", (spec.name,)).fetchone()
    assert entries == (1,)
    assert len(stub.stored) == 30 and len(_distinct_payloads(stub)) > 1
    assert spent.per_value_epsilon == pytest.approx(layers.permanent_epsilon)
    assert spent.total_epsilon == pytest.approx(30 * layers.instantaneous_epsilon)


def _distinct_payloads(collector: StubCollector) -> set[str]:
    return {json.dumps(r["payload"], sort_keys=True) for r in collector.stored.values()}


def test_memo_is_per_value_and_keyed_by_hmac_not_by_the_value(tmp_path: Path) -> None:
    clock = Clock()
    client = make_client(
        f"http://127.0.0.1:{spare_port()}",
        tmp_path,
        clock=clock,
        memoize=True,
        instantaneous_ratio=None,
    )
    for value in ["firefox"] * 3 + ["safari"] * 3 + ["firefox"] * 3:
        assert client.record("browser", value)
        clock.advance()
    spent = client.privacy_spent()["browser"]
    assert spent.per_value_epsilon == pytest.approx(2 * KRR4.epsilon)
    assert spent.period_epsilon == 0
    client.close(timeout=0.1)
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM memo WHERE metric = 'browser'")]
    payloads = queued_payloads(tmp_path)
    assert len(keys) == 2
    assert all(len(k) == 64 and int(k, 16) >= 0 for k in keys)
    assert len(payloads) == 9
    assert payloads[0] == payloads[1] == payloads[2] == payloads[6] == payloads[7] == payloads[8]
    assert payloads[3] == payloads[4] == payloads[5]


@pytest.mark.parametrize("ratio", [None, 2.0])
def test_with_memoization_the_lifetime_cap_counts_reports_whatever_the_values(
    tmp_path: Path, ratio: float | None
) -> None:
    """Issue 37: the cap counts reports sent at their cost over any two histories (eps, then
    eps_inst each from the second), never distinct values, so a device that changes value
    sends exactly as many reports as one that does not. Without the fresh layer a second
    report is unbounded: one report in all."""
    layers = two_layers(BOOL.randomizer, ratio) if ratio else None
    cap = 3 * layers.instantaneous_epsilon if layers else 2 * BOOL.epsilon
    expected = [True] * (3 if layers else 1) + [False] * (6 if layers else 8)
    for name, values in (("same", [True] * 9), ("changing", [True, False, True] * 3)):
        clock = Clock()
        client = make_client(
            f"http://127.0.0.1:{spare_port()}",
            tmp_path / name,
            clock=clock,
            memoize=True,
            instantaneous_ratio=ratio,
            lifetime_epsilon=cap,
        )
        sent = []
        for value in values:
            sent.append(client.record("dark_mode", value))
            clock.advance()
        assert sent == expected, name
        spent = client.privacy_spent()["dark_mode"]
        assert spent.total_epsilon <= cap + 1e-9
        client.close(timeout=0.1)


def test_record_is_thread_safe(collector: StubCollector, tmp_path: Path) -> None:
    client = make_client(collector.url, tmp_path, max_reports_per_period=10**6)
    budgeted = make_client(collector.url, tmp_path / "budgeted")
    admitted: list[bool] = []
    start = threading.Barrier(4)

    def work() -> None:
        start.wait()
        for _ in range(2000):
            client.record("browser", "firefox")
        admitted.append(budgeted.record("dark_mode", True))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert client.flush(timeout=20) and budgeted.flush(timeout=10)
    client.close()
    budgeted.close()
    assert client.stats.admitted == 8000
    assert sorted(admitted) == [False, False, False, True]
    assert len(collector.stored) == 8001
    assert all(n == 1 for n in collector.deliveries.values())


def test_seeded_randomness_makes_payloads_reproducible(tmp_path: Path) -> None:
    runs = []
    for run in range(2):
        client = make_client(
            f"http://127.0.0.1:{spare_port()}",
            tmp_path / str(run),
            randomness=SeededRandomness(7),
            max_reports_per_period=50,
        )
        for _ in range(50):
            client.record("country", "c3")
        client.close(timeout=0.1)
        runs.append(queued_payloads(tmp_path / str(run)))
    assert runs[0] == runs[1]
    assert len(set(runs[0])) > 1
