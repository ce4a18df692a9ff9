"""A text metric's dashboard page: the strings found, ranked, each interval a bar, the floor
drawn as a line, and the sentence saying what the floor means; nothing else 500s for it (the
overview, the privacy page)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from deniable.client import MetricSpec, SeededRandomness
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    RunningCollector,
    register,
    signed_in,
    viewer_collector,
)
from testkit.databases import sqlite_url


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCollector]:
    folder: Path = tmp_path_factory.mktemp("text-dashboard")
    with viewer_collector(sqlite_url(folder, "text")) as server:
        yield server


def test_the_page_ranks_the_strings_with_interval_bars_and_the_floor_line(
    running: RunningCollector,
) -> None:
    with running.client(ADMIN_TOKEN) as admin:
        spec = register(admin, MetricSpec.text("search", max_length=4, epsilon=4))
        register(admin, MetricSpec.boolean("flag", epsilon=1))
    sketch = spec.text_randomizer
    today = running.clock().date().isoformat()
    rng = SeededRandomness(3)
    reports = [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": today,
            "payload": sketch.randomize(
                sketch.encode("<b>" if i % 2 else f"{i:04d}"), 1 + (i // 2) % 4, rng
            ),
        }
        for i in range(2000)
    ]
    with running.client(INGEST_KEY) as uploader:
        for start in range(0, len(reports), 1000):
            answer = uploader.post("/v1/reports", json={"reports": reports[start : start + 1000]})
            assert answer.status_code == 202, answer.text
    with signed_in(running) as browser:
        page = browser.get("/dashboard/metrics/search")
        assert page.status_code == 200, page.text
        assert '<svg id="text-chart"' in page.text and 'class="threshold"' in page.text
        assert '<table id="text-table"' in page.text and 'id="floor-note"' in page.text
        assert "&lt;b&gt;" in page.text and "<b>" not in page.text  # escaped
        for path in ("/dashboard/", "/dashboard/privacy"):
            assert browser.get(path).status_code == 200, path
        overview = browser.get("/dashboard/").text  # its row reads the period totals only
        assert 'data-metric="search"' in overview and "floor " in overview
    with running.client(ADMIN_TOKEN) as admin:
        account = admin.get("/v1/privacy")
        assert account.status_code == 200, account.text
        rows = {row["metric"]: row for row in account.json()["metrics"]}
        assert (rows["search"]["per_period"], rows["search"]["type"]) == (4.0, "text")


def test_registration_warns_when_the_floor_is_useless(running: RunningCollector) -> None:
    with running.client(ADMIN_TOKEN) as admin:
        wide = admin.post(
            "/v1/metrics",
            json={"name": "urls", "type": "text", "max_length": 64, "epsilon": 1.0},
        )
        narrow = admin.post(
            "/v1/metrics",
            json={"name": "terms", "type": "text", "max_length": 8, "epsilon": 4.0},
        )
        bad = admin.post(
            "/v1/metrics", json={"name": "long", "type": "text", "max_length": 65, "epsilon": 1.0}
        )
    assert wide.status_code == 201, wide.text
    assert any("discovery floor at 100,000" in w for w in wide.json()["warnings"])
    assert not any("discovery floor" in w for w in narrow.json()["warnings"])
    assert bad.status_code == 422 and "max_length" in bad.json()["detail"]
