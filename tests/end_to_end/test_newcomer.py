"""A new user's first hour, scripted (issue 14): subprocesses, a fresh state dir, the real
collector.

The app (``examples/web_app.py``) starts while the collector is down, on a fresh state
directory and with the URL as copied from an endpoint (ending in ``/v1``); its page views are
held until the collector comes up, then every one is delivered. An app given a spec that
differs from the collector's says so: in ``problems()``, a counter and an ERROR line. The
analyst's part of the session, an estimate at k = 200, is in ``test_newcomer_estimate.py``.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from deniable.client import MetricSpec
from testkit import CollectorProcess, collector_settings, register_all, spare_port
from tests.end_to_end.test_examples import PAGE, reports_of
from tests.end_to_end.web_app_process import WebApp, metrics_file

VISITS = ("/", "/about", "/pricing", "/", "/about")


def test_values_recorded_while_the_collector_is_down_are_all_delivered(tmp_path: Path) -> None:
    server = CollectorProcess(
        collector_settings(f"sqlite:///{tmp_path}/collector.db", ingest_key=None), tmp_path
    )
    port = spare_port()
    server.start(port)
    register_all(server.url, [PAGE])
    server.stop()
    with closing(WebApp(f"{server.url}/v1", tmp_path / "fresh-state")) as app:
        for path in VISITS:
            app.visit(path)
        waiting = app.telemetry()
        assert waiting["stats"]["held"] == len(VISITS)
        assert any(f"127.0.0.1:{port}/v1/metrics" in p for p in waiting["problems"])
        server.start(port)
        try:
            app.wait_until(
                lambda: app.telemetry()["stats"]["delivered"] == len(VISITS), "not delivered"
            )
            assert app.telemetry()["problems"] == []
            assert reports_of(server.url, "page") == len(VISITS)
        finally:
            server.stop()
        output = app.close()
    assert "ends in /v1" in output


def test_a_spec_that_differs_from_the_collectors_is_reported(tmp_path: Path) -> None:
    mine = MetricSpec.categorical("page", list(PAGE.categories), epsilon=0.5, mechanism="krr")
    specs = metrics_file(tmp_path / "metrics.json", [mine.to_dict()])
    server = CollectorProcess(
        collector_settings(f"sqlite:///{tmp_path}/collector.db", ingest_key=None), tmp_path
    )
    with server:
        register_all(server.url, [PAGE])
        with closing(WebApp(server.url, tmp_path / "state", "--metrics", str(specs))) as app:
            app.visit("/")
            app.wait_until(
                lambda: app.telemetry()["stats"]["spec_mismatches"] == 1, "mismatch not seen"
            )
            problems = app.telemetry()["problems"]
            output = app.close()
    assert any("page" in p and "epsilon 0.5" in p and "epsilon 1" in p for p in problems)
    assert "ERROR deniable.client: metric page" in output
