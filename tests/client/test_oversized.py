"""413 Payload Too Large: the client splits the batch and remembers a smaller cap, never
dropping valid reports; only a report too large on its own is dropped. Over real HTTP on
loopback, against the stub collector and the real one."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deniable.client import AsyncClient, Client, MetricSpec
from testkit import ADMIN_TOKEN, TEST_NOW, RunningCollector, collector_settings, register
from testkit import INGEST_KEY as REAL_INGEST_KEY
from testkit.stub_collector import StubCollector, fast_client, running

BROWSER = MetricSpec.categorical("browser", ["chrome", "firefox", "safari", "other"], epsilon=1.0)
BIG = MetricSpec.categorical("big", [f"v{i}" for i in range(8000)], epsilon=1.0, mechanism="oue")
SPECS = [BROWSER, BIG]
REPORT_BYTES = 131
"""The wire size of one browser report (a one-digit payload); a "big" report is over 1400."""


def room_for(n: int) -> int:
    """A body limit that lets ``n`` browser reports through, not ``n + 1``."""
    return len('{"reports":[]}') + n * (REPORT_BYTES + 1) - 1


ROOM_FOR_40 = room_for(40)


def make_client(url: str, state_dir: Path, **kwargs: object) -> Client:
    options: dict[str, object] = {"metrics": SPECS, "max_reports_per_period": 1000}
    return fast_client(url, state_dir, **{**options, **kwargs})


def record_browsers(client: Client | AsyncClient, n: int) -> None:
    for i in range(n):
        assert client.record("browser", ["chrome", "safari", "other"][i % 3])


def posted(stub: StubCollector) -> list[tuple[int, list[dict[str, Any]]]]:
    """(status, reports) of each POST, in order (a status is noted just after it is sent)."""
    deadline = time.monotonic() + 2
    while len(stub.statuses) < len(stub.bodies) and time.monotonic() < deadline:
        time.sleep(0.01)
    reports = [json.loads(body)["reports"] for body in stub.bodies]
    return list(zip(stub.statuses, reports, strict=True))


def posted_counts(stub: StubCollector) -> list[tuple[int, int]]:
    """(status, number of reports) of each POST, in order."""
    return [(status, len(reports)) for status, reports in posted(stub)]


@pytest.mark.parametrize(
    "limit", [{"max_body_bytes": ROOM_FOR_40}, {"max_batch_reports": 40}], ids=["bytes", "count"]
)
def test_a_413_splits_the_batch_and_later_batches_stay_under_the_cap(
    tmp_path: Path, limit: dict[str, int]
) -> None:
    with running(SPECS, **limit) as stub:
        client = make_client(stub.url, tmp_path)
        record_browsers(client, 300)
        assert client.flush(timeout=10)
        first = posted_counts(stub)
        assert first[:4] == [(413, 300), (413, 150), (413, 75), (202, 37)]
        assert all(status == 202 and n <= 37 for status, n in first[3:])
        record_browsers(client, 300)
        assert client.flush(timeout=10)
        client.close()
    later = posted_counts(stub)[len(first) :]
    assert later and all(status == 202 and n <= 37 for status, n in later)
    assert len(stub.stored) == 600
    assert set(stub.deliveries.values()) == {1}
    refused_ids = {r["id"] for status, reports in posted(stub) if status == 413 for r in reports}
    assert len(refused_ids) == 300 and refused_ids <= set(stub.stored)
    stats = client.stats
    assert (stats.delivered, stats.dropped_rejected, stats.duplicates) == (600, 0, 0)
    assert (stats.retries, stats.queued) == (0, 0)


def test_a_report_too_large_on_its_own_is_dropped_counted_and_logged_without_content(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running(SPECS, max_body_bytes=room_for(10)) as stub:
        client = make_client(stub.url, tmp_path)
        record_browsers(client, 20)
        assert client.record("big", "v17")
        record_browsers(client, 20)
        with caplog.at_level(logging.INFO, logger="deniable.client"):
            assert client.flush(timeout=10) is False, "a dropped report is no success"
        client.close()
    assert posted_counts(stub) == [
        *[(413, 41), (413, 20), (202, 10), (202, 10)],
        *[(413, 10), (413, 5), (413, 2), (413, 1)],
        *[(202, 10), (202, 10)],
    ], "halving to the big report alone, then back to the largest batch accepted"
    refused = [reports for status, reports in posted(stub) if status == 413]
    big = refused[-1]
    assert len(big) == 1 and big[0]["metric"] == "big"
    assert len(stub.stored) == 40
    assert all(r["metric"] == "browser" for r in stub.stored.values())
    assert set(stub.deliveries.values()) == {1}
    stats = client.stats
    assert (stats.delivered, stats.dropped_rejected, stats.queued) == (40, 1, 0)
    assert "413" in caplog.text and "dropped it" in caplog.text
    assert big[0]["id"] not in caplog.text and big[0]["payload"] not in caplog.text
    assert "v17" not in caplog.text


def test_the_async_client_splits_on_413_too(tmp_path: Path) -> None:
    async def main(url: str) -> tuple[bool, int, int]:
        async with AsyncClient(
            url, state_dir=tmp_path, metrics=SPECS, max_reports_per_period=1000
        ) as client:
            record_browsers(client, 300)
            flushed = await client.flush(timeout=10)
            return flushed, client.stats.delivered, client.stats.dropped_rejected

    with running(SPECS, max_batch_reports=40) as stub:
        assert asyncio.run(main(stub.url)) == (True, 300, 0)
    assert len(stub.stored) == 300
    assert set(stub.deliveries.values()) == {1}
    assert 413 in stub.statuses and max(stub.batch_sizes) <= 40


@pytest.fixture
def small_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningCollector]:
    """The real collector (SQLite) whose operator set ``DENIABLE_MAX_BODY_BYTES`` low."""
    monkeypatch.setenv("DENIABLE_MAX_BODY_BYTES", str(ROOM_FOR_40))
    settings = collector_settings(f"sqlite:///{tmp_path / 'collector.db'}")
    assert settings.max_body_bytes == ROOM_FOR_40
    server = RunningCollector(settings).start()
    yield server
    server.stop()


def too_large_answers(server: RunningCollector) -> float:
    """How many uploads the real collector refused with 413 for their body size."""
    registry = server.app_state().telemetry.registry
    return (
        registry.get_sample_value("deniable_batches_rejected_total", {"reason": "too_large"}) or 0
    )


def test_the_real_collector_with_a_small_body_limit_gets_every_report_once(
    small_collector: RunningCollector, tmp_path: Path
) -> None:
    with small_collector.client(ADMIN_TOKEN) as admin:
        spec = register(admin, BROWSER)
        client = Client(
            small_collector.url,
            state_dir=tmp_path / "device",
            ingest_key=REAL_INGEST_KEY,
            metrics=[spec],
            max_reports_per_period=1000,
            clock=lambda: TEST_NOW,
            flush_interval=60.0,
        )
        record_browsers(client, 300)
        assert client.flush(timeout=10)
        assert too_large_answers(small_collector) == 3
        record_browsers(client, 300)
        assert client.flush(timeout=10)
        assert too_large_answers(small_collector) == 3
        client.close()
        day = TEST_NOW.date().isoformat()
        answer = admin.get(f"/v1/metrics/{spec.name}/estimate", params={"start": day, "end": day})
    assert answer.status_code == 200, answer.text
    assert answer.json()["n"] == 600
    stats = client.stats
    assert (stats.delivered, stats.dropped_rejected, stats.duplicates) == (600, 0, 0)
    assert stats.queued == 0
