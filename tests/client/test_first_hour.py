"""The SDK in a new user's first hour (issue 14): nothing recorded is silently lost, no guessing.

Specs given as plain dicts, values recorded before any spec arrived, a spec in code that the
collector serves differently, the budget's silent refusals, a wrong-case category, a URL
ending in ``/v1``, and ``AsyncClient``'s signature.
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
from pathlib import Path

import pytest

from deniable.client import AsyncClient, Client, InvalidInput, MetricSpec
from deniable.client.holding import MAX_HELD
from testkit import spare_port
from testkit.stub_collector import eventually, fast_client, running

CATEGORIES = ["chrome", "firefox", "safari", "other"]
BROWSER = MetricSpec.categorical("browser", CATEGORIES, epsilon=1.0, mechanism="krr")
DARK_MODE = MetricSpec.boolean("dark_mode", epsilon=1.0)
SPECS = [BROWSER, DARK_MODE]


def test_specs_may_be_passed_as_plain_dicts(tmp_path: Path) -> None:
    as_dicts = [{"name": "dark_mode", "type": "boolean", "epsilon": 1.0}, BROWSER.to_dict()]
    with running(SPECS) as stub:
        client = fast_client(stub.url, tmp_path, metrics=as_dicts)
        assert client.metrics == {"dark_mode": DARK_MODE, "browser": BROWSER}
        assert client.record("dark_mode", True)
        assert client.flush(timeout=10)
        client.close()
    assert len(stub.stored) == 1


def test_specs_of_another_kind_get_a_type_error_saying_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="MetricSpec"):
        Client(f"http://127.0.0.1:{spare_port()}", state_dir=tmp_path, metrics=["dark_mode"])  # type: ignore[list-item]


def test_values_recorded_before_any_spec_arrived_are_delivered_in_their_own_period(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = spare_port()
    moment = [dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)]
    client = fast_client(
        f"http://127.0.0.1:{port}/v1/",
        tmp_path,
        clock=lambda: moment[0],
        max_reports_per_period=5,
    )
    assert client.metrics == {}
    assert client.record("browser", "safari") is True
    assert client.record("dark_mode", True) is True
    moment[0] += dt.timedelta(days=1)
    assert client.record("browser", "chrome") is True
    assert client.stats.held == 3
    assert any(f"127.0.0.1:{port}/v1/metrics" in p for p in client.problems())
    assert client.flush(timeout=0.5) is False
    assert not list(tmp_path.glob("*held*"))
    with running(SPECS, port=port) as stub:
        assert client.flush(timeout=10)
        client.close()
    periods = sorted((r["metric"], r["period"]) for r in stub.stored.values())
    assert periods == [
        ("browser", "2026-03-01"),
        ("browser", "2026-03-02"),
        ("dark_mode", "2026-03-01"),
    ]
    stats = client.stats
    assert (stats.delivered, stats.held, stats.dropped_held) == (3, 0, 0)
    assert any(
        "ends in /v1" in r.getMessage() and f":{port}/v1/" in r.getMessage() for r in caplog.records
    )


def test_the_holding_is_bounded_and_counts_what_it_drops(tmp_path: Path) -> None:
    client = fast_client(f"http://127.0.0.1:{spare_port()}", tmp_path)
    kept = [client.record("dark_mode", i % 2 == 0) for i in range(MAX_HELD + 5)]
    assert kept == [True] * MAX_HELD + [False] * 5
    assert (client.stats.held, client.stats.dropped_held) == (MAX_HELD, 5)
    client.close(timeout=0.1)
    assert (client.stats.held, client.stats.dropped_held) == (0, MAX_HELD + 5)


def test_held_values_never_reach_disk_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mark = "zqxheldvalue"
    with caplog.at_level(logging.DEBUG):
        client = fast_client(f"http://127.0.0.1:{spare_port()}", tmp_path)
        assert client.record("secret", f"{mark}-one")
        assert client.flush(timeout=0.2) is False
        problems = client.problems()
        client.close(timeout=0.1)
    assert mark not in caplog.text and mark not in repr(problems)
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or mark.encode() not in path.read_bytes()


def test_a_spec_in_code_that_the_collector_serves_differently_is_reported_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mine = MetricSpec.categorical("browser", CATEGORIES, epsilon=0.5, mechanism="krr")
    with running(SPECS) as stub, caplog.at_level(logging.INFO, logger="deniable.client"):
        client = fast_client(stub.url, tmp_path, metrics=[mine], max_reports_per_period=2)
        assert client.record("browser", "chrome")
        assert client.record("browser", "safari")
        assert client.flush(timeout=10) is False, "flush reported success for refused reports"
        assert client.stats.dropped_rejected == 2
        assert client.stats.spec_mismatches == 1
        assert client.metrics == {"browser": mine}, "the served spec was adopted"
        problems = client.problems()
        client.close()
    assert any("browser" in p and "epsilon 0.5" in p and "epsilon 1" in p for p in problems)
    assert any("refused 2 reports" in p for p in problems)
    errors = [
        r for r in caplog.records if r.levelno == logging.ERROR and "browser" in r.getMessage()
    ]
    assert len(errors) == 1


def test_a_matching_spec_in_code_raises_no_problem(tmp_path: Path) -> None:
    with running(SPECS) as stub:
        client = fast_client(stub.url, tmp_path, metrics=SPECS)
        assert client.record("dark_mode", False)
        assert client.flush(timeout=10)
        assert eventually(lambda: stub.metric_fetches >= 1)
        assert (client.stats.spec_mismatches, client.problems()) == (0, [])
        client.close()


def test_a_collector_refusing_the_ingest_key_is_a_problem_until_it_accepts(tmp_path: Path) -> None:
    with running(SPECS, ingest_key="right") as stub:
        client = fast_client(stub.url, tmp_path, metrics=SPECS, ingest_key="wrong")
        assert client.record("dark_mode", True)
        assert client.flush(timeout=0.5) is False
        assert any("HTTP 401" in p and stub.url in p for p in client.problems())
        client.close(timeout=0.1)


def test_the_budget_says_its_rule_once_per_metric_and_period(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    moment = [dt.datetime(2026, 3, 1, tzinfo=dt.UTC)]
    url = f"http://127.0.0.1:{spare_port()}"
    with caplog.at_level(logging.WARNING, logger="deniable.client"):
        client = fast_client(url, tmp_path, metrics=SPECS, clock=lambda: moment[0])
        sent = [client.record("browser", "chrome") for _ in range(100)]
        moment[0] += dt.timedelta(days=1)
        sent += [client.record("browser", "chrome") for _ in range(3)]
        client.close(timeout=0.1)
    assert sent.count(True) == 2
    budget = [
        r.getMessage() for r in caplog.records if "max_reports_per_period=1" in r.getMessage()
    ]
    assert len(budget) == 2
    assert "browser" in budget[0] and "2026-03-01" in budget[0] and "at most 1 report" in budget[0]


def test_a_value_outside_the_categories_names_them_but_never_the_value(tmp_path: Path) -> None:
    client = fast_client(f"http://127.0.0.1:{spare_port()}", tmp_path, metrics=SPECS)
    with pytest.raises(InvalidInput) as info:
        client.record("browser", "Chrome")
    client.close(timeout=0.1)
    message = str(info.value)
    assert "Chrome" not in message
    assert "chrome, firefox, safari, other" in message


def test_async_client_has_the_typed_signature_and_docs_of_client() -> None:
    assert inspect.signature(AsyncClient) == inspect.signature(Client)
    assert inspect.signature(AsyncClient.create).parameters.keys() == (
        inspect.signature(Client).parameters.keys()
    )
    documented = inspect.getdoc(AsyncClient) or ""
    assert (inspect.getdoc(Client) or "").split("\n\n")[1] in documented
