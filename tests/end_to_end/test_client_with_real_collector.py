"""The client against the real collector (``deniable serve`` on SQLite, in a subprocess):
fetched specs match, reports are accepted, a resend is de-duplicated, stale periods refused."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deniable.client import Client, MetricSpec
from testkit import ADMIN_TOKEN, real_collector, spare_port

SPECS = [
    MetricSpec.boolean("dark_mode", epsilon=0.5),
    MetricSpec.categorical("browser", ["chrome", "firefox", "safari", "other"], epsilon=1.0),
    MetricSpec.categorical("country", [f"c{i}" for i in range(40)], epsilon=1.0, mechanism="olh"),
    MetricSpec.categorical("font", [f"f{i}" for i in range(20)], epsilon=2.0, mechanism="oue"),
]
VALUES = {"dark_mode": True, "browser": "safari", "country": "c7", "font": "f3"}
INGEST_KEY = "client-tests-ingest-key"


@pytest.fixture(scope="module")
def collector_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with real_collector(SPECS, tmp_path_factory.mktemp("collector"), ingest_key=INGEST_KEY) as url:
        yield url


def n_reports(url: str, metric: str, start: str, end: str) -> int:
    response = httpx.get(
        f"{url}/v1/metrics/{metric}/estimate",
        params={"start": start, "end": end},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=60,
    )
    response.raise_for_status()
    return int(response.json()["n"])


def test_records_reach_the_real_collector_once_even_when_resent(
    collector_url: str, tmp_path: Path
) -> None:
    today = dt.datetime.now(dt.UTC)
    days = [today - dt.timedelta(days=d) for d in (3, 2, 1)]
    current = [days[0]]
    state = tmp_path / "device"
    fetching = Client(collector_url, state_dir=state, ingest_key=INGEST_KEY)
    assert {name: s.fingerprint for name, s in fetching.metrics.items()} == {
        s.name: s.fingerprint for s in SPECS
    }
    fetching.close()
    offline = Client(
        f"http://127.0.0.1:{spare_port()}", state_dir=state, clock=lambda: current[0], batch_size=5
    )
    assert set(offline.metrics) == set(VALUES)
    for day in days:
        current[0] = day
        for name, value in VALUES.items():
            assert offline.record(name, value)
    offline.close(timeout=0.0)
    shutil.copytree(state, tmp_path / "copy")
    first = Client(collector_url, state_dir=state, ingest_key=INGEST_KEY)
    assert first.flush(timeout=20)
    first.close()
    assert (first.stats.delivered, first.stats.duplicates, first.stats.dropped_rejected) == (
        12,
        0,
        0,
    )
    resend = Client(collector_url, state_dir=tmp_path / "copy", ingest_key=INGEST_KEY)
    assert resend.stats.queued == 12
    assert resend.flush(timeout=20)
    resend.close()
    assert (resend.stats.delivered, resend.stats.duplicates) == (12, 12)
    start, end = days[0].date().isoformat(), days[-1].date().isoformat()
    for name in VALUES:
        assert n_reports(collector_url, name, start, end) == 3


def test_periods_outside_the_retention_window_are_dropped_alone(
    collector_url: str, tmp_path: Path
) -> None:
    today = dt.datetime.now(dt.UTC)
    days = [today - dt.timedelta(days=d) for d in (400, 5)]
    current = [days[0]]
    client = Client(
        collector_url,
        state_dir=tmp_path,
        ingest_key=INGEST_KEY,
        metrics=SPECS,
        clock=lambda: current[0],
    )
    for day in days:
        current[0] = day
        assert client.record("browser", "chrome")
    assert client.flush(timeout=20) is False, "a report refused as too old is no success"
    client.close()
    assert (client.stats.delivered, client.stats.dropped_rejected) == (1, 1)
    day = days[1].date().isoformat()
    assert n_reports(collector_url, "browser", day, day) == 1
