"""The examples run as a user runs them: ``examples/web_app.py`` against the real collector."""

from __future__ import annotations

import datetime as dt
from contextlib import closing
from pathlib import Path

import httpx

from deniable.client import MetricSpec
from testkit import ADMIN_TOKEN, real_collector
from tests.end_to_end.web_app_process import WebApp

PAGE = MetricSpec.categorical("page", ["home", "about", "other"], epsilon=1.0, mechanism="krr")


def reports_of(collector_url: str, metric: str) -> int:
    """How many reports of ``metric`` the collector holds for yesterday and today."""
    today = dt.datetime.now(dt.UTC).date()
    response = httpx.get(
        f"{collector_url}/v1/metrics/{metric}/estimate",
        params={"start": (today - dt.timedelta(days=1)).isoformat(), "end": today.isoformat()},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=60,
    )
    response.raise_for_status()
    return int(response.json()["n"])


def test_the_web_app_example_delivers_a_report_per_page_view(tmp_path: Path) -> None:
    with real_collector([PAGE], tmp_path) as url:
        with closing(WebApp(url, tmp_path / "app")) as app:
            for path in ("/", "/about", "/pricing", "/"):
                app.visit(path)
            app.wait_until(lambda: app.telemetry()["stats"]["delivered"] == 4, "not delivered")
            assert app.telemetry()["problems"] == []
        assert reports_of(url, "page") == 4
