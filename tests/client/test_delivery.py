"""Delivery by the client SDK: batching, retries, dedup, failover.

Over real HTTP on loopback against the stub collector, except where canned answers are all a
test needs: those drive the client through ``httpx.MockTransport`` with a function.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from deniable.client import Client, MetricSpec
from testkit import spare_port
from testkit.stub_collector import (
    StubCollector,
    accept_answer,
    fast_client,
    problem_answer,
    reports_in,
    running,
    serving_specs,
)

SPECS = [
    MetricSpec.boolean("dark_mode", epsilon=0.5),
    MetricSpec.categorical("browser", ["chrome", "firefox", "safari", "other"], epsilon=1.0),
    MetricSpec.categorical("country", [f"c{i}" for i in range(40)], epsilon=1.0, mechanism="olh"),
    MetricSpec.categorical("font", [f"f{i}" for i in range(20)], epsilon=2.0, mechanism="oue"),
]
DAY0 = dt.datetime(2026, 11, 1, 12, tzinfo=dt.UTC)
CANNED_URL = "http://collector.test"
"""The collector URL of a client whose answers come from an ``httpx.MockTransport``."""


@pytest.fixture
def collector() -> Iterator[StubCollector]:
    with running(SPECS) as stub:
        yield stub


def make_client(url: str | list[str], state_dir: Path, **kwargs: Any) -> Client:
    return fast_client(url, state_dir, **{"metrics": SPECS, **kwargs})


def record_many(client: Client, n: int) -> None:
    for i in range(n):
        assert client.record("browser", ["chrome", "safari"][i % 2])


def test_batches_hold_at_most_batch_size_reports_in_the_wire_format(
    collector: StubCollector, tmp_path: Path
) -> None:
    client = make_client(collector.url, tmp_path, batch_size=7, max_reports_per_period=100)
    record_many(client, 50)
    assert client.record("dark_mode", True)
    assert client.record("country", "c7")
    assert client.record("font", "f3")
    assert client.flush(timeout=10)
    client.close()
    assert collector.batch_sizes and max(collector.batch_sizes) <= 7
    assert sum(collector.batch_sizes) == 53 == len(collector.stored)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    fingerprints = {s.name: s.fingerprint for s in SPECS}
    for report in collector.stored.values():
        assert set(report) == {"id", "metric", "fingerprint", "period", "payload"}
        assert uuid.UUID(report["id"]).version == 4
        assert report["fingerprint"] == fingerprints[report["metric"]]
        assert report["period"] == today
    assert client.stats.delivered == 53
    assert client.stats.queued == 0


def test_503_is_retried_with_backoff_until_accepted(tmp_path: Path) -> None:
    statuses: list[int] = []
    delivered: list[str] = []

    def collector(request: httpx.Request) -> httpx.Response:
        if len(statuses) < 3:
            statuses.append(503)
            return problem_answer(503, "unavailable")
        statuses.append(202)
        delivered.extend(report["id"] for report in reports_in(request))
        return accept_answer(request)

    client = make_client(
        CANNED_URL, tmp_path, max_reports_per_period=10, transport=serving_specs(SPECS, collector)
    )
    record_many(client, 10)
    assert client.flush(timeout=10)
    client.close()
    assert len(set(delivered)) == len(delivered) == 10
    assert statuses == [503, 503, 503, 202]
    assert (client.stats.retries, client.stats.delivered, client.stats.queued) == (3, 10, 0)


def test_429_waits_at_least_retry_after(collector: StubCollector, tmp_path: Path) -> None:
    collector.fail_429 = 1
    collector.retry_after = "1"
    client = make_client(collector.url, tmp_path, max_reports_per_period=5)
    record_many(client, 5)
    assert client.flush(timeout=10)
    client.close()
    first, second = collector.post_times[:2]
    assert second - first >= 0.95
    assert len(collector.stored) == 5


def test_flush_gives_up_at_its_timeout_while_a_retry_after_is_pending(
    collector: StubCollector, tmp_path: Path
) -> None:
    collector.fail_429 = 1
    collector.retry_after = "30"
    client = make_client(collector.url, tmp_path)
    assert client.record("dark_mode", False)
    started = time.monotonic()
    assert client.flush(timeout=0.5) is False
    assert time.monotonic() - started < 2
    assert client.stats.queued == 1
    client.close(timeout=0.2)


def test_a_lost_ack_resends_the_same_ids_and_the_collector_dedups(
    collector: StubCollector, tmp_path: Path
) -> None:
    collector.drop_ack = 1
    client = make_client(collector.url, tmp_path, batch_size=4, max_reports_per_period=10)
    record_many(client, 10)
    assert client.flush(timeout=10)
    client.close()
    assert len(collector.stored) == 10
    resent = [i for i, n in collector.deliveries.items() if n > 1]
    assert len(resent) == 4
    assert all(collector.deliveries[i] == 2 for i in resent)
    stats = client.stats
    assert stats.duplicates == 4
    assert stats.delivered == 10
    assert stats.queued == 0


def test_offline_then_online_delivers_everything(tmp_path: Path) -> None:
    stub = StubCollector(SPECS, port=spare_port())
    client = make_client(stub.url, tmp_path, max_reports_per_period=20)
    record_many(client, 20)
    assert client.flush(timeout=0.3) is False
    assert client.stats.queued == 20
    stub.start()
    try:
        assert client.flush(timeout=10)
        client.close()
    finally:
        stub.stop()
    assert len(stub.stored) == 20


def test_a_week_offline_across_app_restarts_loses_nothing(tmp_path: Path) -> None:
    stub = StubCollector(SPECS, port=spare_port())
    for day in range(7):
        moment = DAY0 + dt.timedelta(days=day)
        client = make_client(stub.url, tmp_path, clock=lambda m=moment: m)
        assert client.record("dark_mode", day % 2 == 0)
        assert client.record("browser", "firefox")
        client.close(timeout=0.2)
    stub.start()
    try:
        client = make_client(stub.url, tmp_path, clock=lambda: DAY0 + dt.timedelta(days=7))
        assert client.flush(timeout=10)
        client.close()
    finally:
        stub.stop()
    periods = sorted({r["period"] for r in stub.stored.values()})
    assert len(stub.stored) == 14
    assert periods == [(DAY0 + dt.timedelta(days=d)).date().isoformat() for d in range(7)]


def test_fails_over_to_the_next_collector_url(collector: StubCollector, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{spare_port()}"
    client = make_client([dead, collector.url], tmp_path, max_reports_per_period=10)
    record_many(client, 10)
    assert client.flush(timeout=10)
    client.close()
    assert len(collector.stored) == 10


def test_a_refused_batch_is_dropped_counted_and_logged_without_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    refuse = serving_specs(SPECS, lambda request: problem_answer(422, "refused by the test"))
    client = make_client(CANNED_URL, tmp_path, max_reports_per_period=3, transport=refuse)
    record_many(client, 3)
    with caplog.at_level(logging.WARNING, logger="deniable.client"):
        assert client.flush(timeout=10) is False, "refused reports are no success"
    client.close()
    stats = client.stats
    assert stats.dropped_rejected == 3
    assert stats.queued == 0
    assert "HTTP 422" in caplog.text
    assert "safari" not in caplog.text and "chrome" not in caplog.text


def test_a_wrong_ingest_key_keeps_the_reports_until_the_right_key_delivers_them_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running(SPECS, ingest_key="new-s3cret") as stub:
        stale = make_client(stub.url, tmp_path, ingest_key="old-s3cret", max_reports_per_period=5)
        record_many(stale, 5)
        with caplog.at_level(logging.INFO, logger="deniable.client"):
            assert stale.flush(timeout=1.0) is False
            stale.close(timeout=0.2)
        stats = stale.stats
        assert (stats.queued, stats.delivered, stats.dropped_rejected) == (5, 0, 0)
        # Every refusal the client saw is a 401 the stub sent, and is retried; the last
        # exchange may be cut off by close() on a loaded machine (a timeout, not a refusal).
        assert 3 <= stats.refused <= stub.statuses.count(401)
        assert stats.refused <= stats.retries <= stats.refused + 1
        # the upload's warnings (under load the spec check in the background may also time out)
        warnings = [
            r for r in caplog.records if r.levelno == logging.WARNING and r.module == "uploader"
        ]
        assert len(warnings) == 1 and "HTTP 401" in warnings[0].getMessage()
        assert "s3cret" not in caplog.text and "wrong ingest key" not in caplog.text
        assert not stub.stored
        rotated = make_client(stub.url, tmp_path, ingest_key="new-s3cret")
        assert rotated.flush(timeout=10)
        rotated.close()
    assert len(stub.stored) == 5
    assert set(stub.deliveries.values()) == {1}
    assert (rotated.stats.delivered, rotated.stats.duplicates) == (5, 0)


def test_a_404_url_fails_over_to_the_next_url_which_delivers(
    collector: StubCollector, tmp_path: Path
) -> None:
    misrouted = f"{collector.url}/not-the-collector"
    client = make_client([misrouted, collector.url], tmp_path, max_reports_per_period=10)
    record_many(client, 10)
    assert client.flush(timeout=10)
    client.close()
    assert collector.statuses[:2] == [404, 202]
    assert len(collector.stored) == 10
    stats = client.stats
    assert (stats.delivered, stats.dropped_rejected, stats.refused, stats.retries) == (10, 0, 1, 1)


@pytest.mark.parametrize("status", [403, 405])
def test_a_proxy_refusing_the_route_keeps_the_reports(tmp_path: Path, status: int) -> None:
    refusing = [True]
    delivered: list[str] = []

    def collector(request: httpx.Request) -> httpx.Response:
        if refusing[0]:
            return problem_answer(status, "set by the test")
        delivered.extend(report["id"] for report in reports_in(request))
        return accept_answer(request)

    client = make_client(
        CANNED_URL, tmp_path, max_reports_per_period=3, transport=serving_specs(SPECS, collector)
    )
    record_many(client, 3)
    assert client.flush(timeout=0.3) is False
    assert (client.stats.queued, client.stats.dropped_rejected) == (3, 0)
    assert client.stats.refused >= 1
    refusing[0] = False
    assert client.flush(timeout=10)
    client.close()
    assert len(set(delivered)) == len(delivered) == 3
    assert (client.stats.delivered, client.stats.queued) == (3, 0)


def test_specs_are_fetched_then_cached_for_an_offline_start(
    collector: StubCollector, tmp_path: Path
) -> None:
    client = make_client(collector.url, tmp_path, metrics=None)
    assert set(client.metrics) == {s.name for s in SPECS}
    assert client.metrics["country"].fingerprint == SPECS[2].fingerprint
    client.close()
    offline = make_client(f"http://127.0.0.1:{spare_port()}", tmp_path, metrics=None)
    assert set(offline.metrics) == {s.name for s in SPECS}
    assert offline.record("font", "f1")
    assert offline.stats.queued == 1
    offline.close(timeout=0.2)


def test_a_spec_whose_served_fingerprint_differs_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    served = [s.to_dict() for s in SPECS]
    served[1]["fingerprint"] = "0123456789abcdef"
    with running(SPECS, served_metrics=served) as stub, caplog.at_level(logging.WARNING):
        client = make_client(stub.url, tmp_path, metrics=None)
        assert "browser" not in client.metrics
        assert "dark_mode" in client.metrics
        assert client.record("browser", "chrome") is False
        assert client.stats.unknown_metric == 1
        client.close(timeout=0.5)
    assert "browser" in caplog.text and "fingerprint" in caplog.text


def test_the_queue_is_bounded_dropping_the_oldest(tmp_path: Path) -> None:
    stub = StubCollector(SPECS, port=spare_port())
    moments = [DAY0 + dt.timedelta(days=d) for d in range(25)]
    now = iter(moments)
    current = [moments[0]]

    def clock() -> dt.datetime:
        return current[0]

    client = make_client(stub.url, tmp_path, clock=clock, max_queue=10)
    for moment in now:
        current[0] = moment
        assert client.record("dark_mode", True)
    assert client.flush(timeout=0.2) is False
    stats = client.stats
    assert stats.queued == 10
    assert stats.dropped_queue_full == 15
    stub.start()
    try:
        assert client.flush(timeout=10)
        client.close()
    finally:
        stub.stop()
    periods = sorted(r["period"] for r in stub.stored.values())
    assert periods == [m.date().isoformat() for m in moments[-10:]]


def _fill_while_a_batch_flies(collector: StubCollector, tmp_path: Path) -> Client:
    """A client (``max_queue`` 5, batches of 5) whose first 5 reports are held in flight by the
    stub while 5 more are committed: a full outbox, with the oldest half in flight."""
    collector.hold = threading.Event()
    client = make_client(
        collector.url,
        tmp_path,
        batch_size=5,
        max_queue=5,
        max_reports_per_period=10,
        clock=lambda: DAY0,
        timeout=60.0,
    )
    record_many(client, 5)
    deadline = time.monotonic() + 20
    while collector.held < 1 and time.monotonic() < deadline:  # a full batch wakes the uploader
        time.sleep(0.02)
    assert collector.held == 1, "the first batch is in flight"
    record_many(client, 5)
    assert client.flush(timeout=0.5) is False, "flush commits; the upload is still held"
    return client


def test_a_full_outbox_leaves_the_batch_in_flight_and_acknowledged_reports_are_delivered(
    collector: StubCollector, tmp_path: Path
) -> None:
    """Reports the collector acknowledges are never counted as dropped (issue 24): the trim for
    a full outbox neither takes the batch in flight nor counts it against ``max_queue``."""
    client = _fill_while_a_batch_flies(collector, tmp_path)
    stats = client.stats
    assert (stats.queued, stats.dropped_queue_full) == (10, 0)
    collector.hold.set()  # type: ignore[union-attr]
    assert client.flush(timeout=20)
    client.close()
    assert len(collector.stored) == 10
    stats = client.stats
    assert (stats.admitted, stats.delivered, stats.dropped_queue_full) == (10, 10, 0)
    assert (stats.dropped_rejected, stats.duplicates, stats.queued) == (0, 0, 0)


def test_a_batch_in_flight_that_fails_is_then_the_oldest_and_a_full_outbox_drops_it(
    collector: StubCollector, tmp_path: Path
) -> None:
    """Once its upload fails, the batch that flew is the oldest: the outbox trims back to
    ``max_queue`` at once, dropping it (counted once), and the newer reports are delivered."""
    client = _fill_while_a_batch_flies(collector, tmp_path)
    collector.answer_status = 503
    collector.hold.set()  # type: ignore[union-attr]
    deadline = time.monotonic() + 20
    while client.stats.dropped_queue_full < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert client.stats.dropped_queue_full == 5
    assert client.stats.queued == 5
    collector.answer_status = None
    assert client.flush(timeout=20)
    client.close()
    first = {r["id"] for r in json.loads(collector.bodies[0])["reports"]}
    assert len(first) == 5 and len(collector.stored) == 5
    assert not first & set(collector.stored), "the oldest (failed) batch was the one dropped"
    stats = client.stats
    assert (stats.admitted, stats.delivered, stats.dropped_queue_full) == (10, 5, 5)
    assert (stats.dropped_rejected, stats.duplicates, stats.queued) == (0, 0, 0)


def test_close_with_the_collector_down_neither_raises_nor_hangs(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{spare_port()}"
    client = make_client(url, tmp_path)
    assert client.record("dark_mode", True)
    started = time.monotonic()
    client.close(timeout=0.5)
    assert time.monotonic() - started < 3
    assert client.record("dark_mode", True) is False
    reopened = make_client(url, tmp_path)
    assert reopened.stats.queued == 1
    reopened.close(timeout=0.1)


def test_the_background_thread_delivers_without_flush(
    collector: StubCollector, tmp_path: Path
) -> None:
    client = make_client(collector.url, tmp_path, flush_interval=0.2, max_reports_per_period=5)
    record_many(client, 5)
    assert collector.wait_for(5, timeout=10)
    client.close()


def test_a_422_naming_some_reports_drops_only_those(
    collector: StubCollector, tmp_path: Path
) -> None:
    days = [DAY0 + dt.timedelta(days=d) for d in range(10)]
    current = [days[0]]
    client = make_client(collector.url, tmp_path, clock=lambda: current[0], batch_size=4)
    for day in days:
        current[0] = day
        assert client.record("dark_mode", True)
        assert client.record("browser", "other")
    collector.refuse_periods = {d.date().isoformat() for d in days[:3]}
    assert client.flush(timeout=10) is False, "refused reports are no success"
    client.close()
    stats = client.stats
    assert (stats.dropped_rejected, stats.delivered, stats.queued) == (6, 14, 0)
    assert sorted({r["period"] for r in collector.stored.values()}) == sorted(
        d.date().isoformat() for d in days[3:]
    )
    assert len(collector.stored) == 14
