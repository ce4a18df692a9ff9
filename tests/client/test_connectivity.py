"""A collector that goes away and comes back, or serves no metrics yet (issue 25, item 3).

Against the real collector in a thread on loopback, stopped and started again on its port:
``problems()`` says since when it is unreachable and when an upload last succeeded, and
clears once reports arrive; values held while it serves no metrics are asked for again
every few seconds (``SPEC_RETRY_SECONDS``) and count as recorded. Times come from the
client's injectable clock, and every wait polls for its condition under a generous deadline.
"""

from __future__ import annotations

import datetime as dt
import inspect
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from deniable.client import Client, MetricSpec, specsource
from deniable.client.transport import Transport
from testkit import INGEST_KEY, TEST_NOW, RunningCollector, collector_settings, register_all
from testkit.stub_collector import eventually, fast_client

DARK_MODE = MetricSpec.boolean("dark_mode", epsilon=1.0)
T0 = TEST_NOW
T1 = TEST_NOW + dt.timedelta(minutes=3)


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[RunningCollector]:
    server = RunningCollector(collector_settings(f"sqlite:///{tmp_path}/collector.db")).start()
    try:
        yield server
    finally:
        server.stop()


def test_problems_say_since_when_the_collector_is_unreachable_and_clear_once_it_is_back(
    collector: RunningCollector, tmp_path: Path
) -> None:
    register_all(collector.url, [DARK_MODE])
    moment = [T0]
    client = fast_client(
        collector.url,
        tmp_path / "state",
        metrics=[DARK_MODE],
        ingest_key=INGEST_KEY,
        clock=lambda: moment[0],
        max_reports_per_period=5,
        flush_interval=0.2,
    )
    try:
        assert client.record("dark_mode", True)
        assert client.flush(timeout=20)
        port = int(collector.url.rsplit(":", 1)[1])
        collector.stop()
        moment[0] = T1
        assert client.record("dark_mode", False)
        assert client.flush(timeout=0.5) is False
        assert eventually(lambda: any("unreachable" in p for p in client.problems()))
        (problem,) = [p for p in client.problems() if "unreachable" in p]
        assert "since 2026-11-21T12:03:00Z" in problem, problem
        assert "last successful upload: at 2026-11-21T12:00:00Z" in problem, problem
        assert collector.url in problem and "reports kept for a retry: 1;" in problem, problem
        collector.start(port)
        assert eventually(lambda: client.stats.delivered == 2, timeout=60), client.problems()
        assert eventually(lambda: client.problems() == [])
    finally:
        client.close(timeout=1)


def test_values_held_while_the_collector_serves_no_metrics_go_soon_after_registration(
    collector: RunningCollector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(specsource, "SPEC_RETRY_SECONDS", 0.2)
    client = fast_client(
        collector.url,
        tmp_path / "state",
        ingest_key=INGEST_KEY,
        clock=lambda: T0,
        max_reports_per_period=5,
        flush_interval=0.2,
    )
    try:
        assert [client.record("dark_mode", v) for v in (True, False, True)] == [True] * 3
        stats = client.stats
        assert (stats.recorded, stats.held, stats.admitted) == (3, 3, 0)
        assert any("serves none" in p and collector.url in p for p in client.problems())
        register_all(collector.url, [DARK_MODE])
        # Specs are asked for again every SPEC_RETRY_SECONDS, not after the 60 s refresh.
        assert eventually(lambda: client.stats.delivered == 3, timeout=30), client.problems()
        stats = client.stats
        assert (stats.recorded, stats.held, stats.admitted) == (3, 0, 3)
        assert client.problems() == []
    finally:
        client.close(timeout=1)


def test_the_backoff_windows_double_up_to_a_30_second_cap() -> None:
    assert inspect.signature(Client).parameters["backoff_cap"].default == 30.0
    transport = Transport(
        ["http://127.0.0.1:9"], ingest_key=None, timeout=1.0, jitter=random.Random(2026)
    )
    try:
        for failures, window in enumerate([0.5, 1, 2, 4, 8, 16, 30, 30, 30], start=1):
            delays = [transport.backoff(failures) for _ in range(400)]
            assert max(delays) <= window and max(delays) > 0.95 * window, (failures, window)
    finally:
        transport.close()
