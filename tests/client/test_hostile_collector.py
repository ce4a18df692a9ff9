"""A hostile collector, or a hostile network before it, against the SDK (issue 12).

A small real HTTP server on loopback plays the collector: it serves a metric the device
already knows with eps 20 and a fingerprint valid for that changed spec (what a compromised
collector, or a man in the middle on plain http, would do to get near-true answers), and
answers uploads with a proxy's HTML 400 page. The device keeps the spec it accepted first,
refuses served specs above its ``max_epsilon``, and keeps reports a foreign 400 says nothing
about until the collector takes them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest

from deniable.client import AsyncClient, Client, InvalidInput, MetricSpec, specsource
from deniable.client.specsource import DEFAULT_MAX_EPSILON, SPECS_FILE
from testkit import spare_port
from testkit.hostile_server import hostile, json_answer, whole
from testkit.stub_collector import eventually, fast_client, running

CATEGORIES = ["chrome", "firefox", "safari", "other"]
BROWSER = MetricSpec.categorical("browser", CATEGORIES, epsilon=1.0, mechanism="krr")
DARK_MODE = MetricSpec.boolean("dark_mode", epsilon=0.5)
SPECS = [BROWSER, DARK_MODE]
NEAR_TRUE = MetricSpec.categorical("browser", CATEGORIES, epsilon=20.0, mechanism="krr")
"""The known metric as a hostile collector serves it: eps 20, a valid fingerprint."""
NEWCOMER = MetricSpec.boolean("newcomer", epsilon=1.0)
GREEDY = MetricSpec.boolean("greedy", epsilon=8.0)
"""A new metric above the default ``max_epsilon``."""
HOSTILE = [s.to_dict() for s in (NEAR_TRUE, DARK_MODE, NEWCOMER, GREEDY)]


def refusals(caplog: pytest.LogCaptureFixture, metric: str) -> list[logging.LogRecord]:
    """The ERROR records about refusing a served spec for ``metric``."""
    return [
        r
        for r in caplog.records
        if r.levelno == logging.ERROR and r.getMessage().startswith(f"metric {metric}: refusing")
    ]


def cached_fingerprints(state_dir: Path) -> dict[str, str]:
    """The specs a client cached in ``state_dir``, as name -> fingerprint."""
    return {s["name"]: s["fingerprint"] for s in json.loads((state_dir / SPECS_FILE).read_text())}


def test_a_changed_spec_for_a_known_metric_is_refused_and_the_accepted_one_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(specsource, "SPEC_REFRESH_SECONDS", 0.0)  # refetch on every unknown
    with running(SPECS) as stub, caplog.at_level(logging.INFO, logger="deniable.client"):
        honest = fast_client(stub.url, tmp_path)
        assert honest.metrics == {"browser": BROWSER, "dark_mode": DARK_MODE}
        honest.close()
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

        stub.served_metrics = HOSTILE
        fetches = stub.metric_fetches
        client = fast_client(stub.url, tmp_path, flush_interval=0.2, max_reports_per_period=5)
        assert eventually(lambda: "newcomer" in client.metrics), "the refresh never happened"
        deadline = time.monotonic() + 30
        while stub.metric_fetches < fetches + 4 and time.monotonic() < deadline:
            assert client.record("ghost", True) is False  # unknown: asks for a refresh
            time.sleep(0.05)
        assert stub.metric_fetches >= fetches + 4, "three refreshes after the first one"
        assert client.metrics["browser"] == BROWSER
        assert client.metrics["dark_mode"] == DARK_MODE
        assert "greedy" not in client.metrics
        assert client.stats.specs_refused == 2
        for _ in range(5):
            assert client.record("browser", "safari")
        assert client.flush(timeout=10)
        client.close()
    assert len(refusals(caplog, "browser")) == 1
    assert len(refusals(caplog, "greedy")) == 1
    assert NEAR_TRUE.fingerprint in refusals(caplog, "browser")[0].getMessage()
    stored = [r for r in stub.stored.values() if r["metric"] == "browser"]
    assert len(stored) == 5
    assert {r["fingerprint"] for r in stored} == {BROWSER.fingerprint}
    assert "safari" not in caplog.text
    assert cached_fingerprints(tmp_path) == {
        "browser": BROWSER.fingerprint,
        "dark_mode": DARK_MODE.fingerprint,
        "newcomer": NEWCOMER.fingerprint,
    }
    offline = fast_client(f"http://127.0.0.1:{spare_port()}", tmp_path)
    assert offline.metrics["browser"] == BROWSER
    offline.close(timeout=0.1)


def test_served_specs_above_max_epsilon_are_refused_unless_the_app_raises_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running(SPECS, served_metrics=HOSTILE[1:]) as stub:
        with caplog.at_level(logging.ERROR, logger="deniable.client"):
            client = fast_client(stub.url, tmp_path / "default")
        assert set(client.metrics) == {"dark_mode", "newcomer"}
        assert client.stats.specs_refused == 1
        assert client.record("greedy", True) is False
        client.close(timeout=0.1)
        assert len(refusals(caplog, "greedy")) == 1
        assert (
            f"above max_epsilon {DEFAULT_MAX_EPSILON:g}"
            in refusals(caplog, "greedy")[0].getMessage()
        )

        async def adopt() -> dict[str, MetricSpec]:
            """The asyncio client takes the same ceiling."""
            async with await AsyncClient.create(
                stub.url, state_dir=tmp_path / "raised", max_epsilon=8.0
            ) as raised:
                return raised.metrics

        assert asyncio.run(adopt())["greedy"] == GREEDY
        fetches = stub.metric_fetches
        strict = fast_client(stub.url, tmp_path / "strict", metrics=[BROWSER], max_epsilon=1.0)
        assert strict.record("browser", "chrome")
        assert strict.flush(timeout=10)
        assert strict.metrics == {"browser": BROWSER}, "a served spec was adopted"
        strict.close()
    assert stub.metric_fetches == fetches + 1, "specs in code are compared once, never adopted"
    assert [r["fingerprint"] for r in stub.stored.values()] == [BROWSER.fingerprint]


def test_the_apps_specs_in_code_must_fit_its_ceiling_and_win_over_cached_ones(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{spare_port()}"
    with pytest.raises(ValueError, match=r"metric greedy: epsilon 8 is above max_epsilon 4;"):
        Client(url, state_dir=tmp_path, metrics=[DARK_MODE, GREEDY])
    for bad in (0.0, 25.0, float("nan"), True, "4"):
        with pytest.raises(InvalidInput, match="max_epsilon must be a number in"):
            Client(url, state_dir=tmp_path, metrics=SPECS, max_epsilon=bad)
    with running(SPECS) as stub:
        fast_client(stub.url, tmp_path).close()
    assert cached_fingerprints(tmp_path)["browser"] == BROWSER.fingerprint
    finer = MetricSpec.categorical("browser", CATEGORIES, epsilon=6.0, mechanism="krr")
    with running([finer]) as stub:
        client = fast_client(stub.url, tmp_path, metrics=[finer], max_epsilon=6.0)
        assert client.record("browser", "chrome")
        assert client.flush(timeout=10)
        client.close()
    assert client.stats.specs_refused == 0
    assert [r["fingerprint"] for r in stub.stored.values()] == [finer.fingerprint]


@pytest.mark.parametrize("status", [400, 422])
def test_a_proxys_html_answer_keeps_the_reports_until_the_collector_takes_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    with running(SPECS) as stub:
        stub.proxy_status = status
        client = fast_client(stub.url, tmp_path, metrics=SPECS, max_reports_per_period=5)
        for _ in range(5):
            assert client.record("browser", "firefox")
        with caplog.at_level(logging.INFO, logger="deniable.client"):
            assert client.flush(timeout=1.0) is False
        stats = client.stats
        assert (stats.queued, stats.delivered, stats.dropped_rejected) == (5, 0, 0)
        assert stats.refused == stats.retries == stub.statuses.count(status) >= 2
        # the upload's warnings (under load the spec check in the background may also time out)
        warnings = [
            r for r in caplog.records if r.levelno == logging.WARNING and r.module == "uploader"
        ]
        assert len(warnings) == 1
        assert f"HTTP {status} (not the collector's problem document)" in warnings[0].getMessage()
        assert "firefox" not in caplog.text and "nginx" not in caplog.text
        stub.proxy_status = None
        assert client.flush(timeout=10)
        client.close()
    assert len(stub.stored) == 5
    assert set(stub.deliveries.values()) == {1}
    stats = client.stats
    assert (stats.admitted, stats.delivered, stats.dropped_rejected, stats.queued) == (5, 5, 0, 0)


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("max_epsilon", True),
        ("batch_size", True),
        ("batch_size", 10.0),
        ("max_queue", False),
        ("max_queue", "100"),
        ("timeout", True),
        ("timeout", float("inf")),
        ("flush_interval", "1"),
        ("backoff_cap", float("nan")),
        ("persist_interval", True),
    ],
)
def test_constructor_arguments_are_typed_strictly_before_the_state_dir_is_touched(
    tmp_path: Path, argument: str, value: object
) -> None:
    """A bool is not a number: ``max_epsilon=True`` is refused, not taken as 1.0 (issue 24)."""
    state_dir = tmp_path / "state"
    with pytest.raises(InvalidInput, match=f"^{argument} must be"):
        Client("http://127.0.0.1:9", state_dir=state_dir, metrics=SPECS, **{argument: value})
    assert not state_dir.exists()


GATEWAY_400 = json_answer(
    400,
    {"type": "about:blank", "title": "Bad Request", "status": 400, "detail": "invalid request"},
    media="application/problem+json",
)
"""A gateway's RFC 9457 answer: it has a ``detail``, but the collector never sent it."""


def test_a_gateways_problem_document_and_a_bad_acknowledgement_keep_the_reports(
    tmp_path: Path,
) -> None:
    """Neither a gateway's problem+json 400 nor a 202 claiming ``"duplicates": -5`` moves a
    counter: the reports stay queued until the collector acknowledges them (issue 24, item 9)."""
    scripts = {
        "/v1/metrics": whole(json_answer(200, {"metrics": [s.to_dict() for s in SPECS]})),
        "/v1/reports": whole(GATEWAY_400),
    }
    with hostile(scripts) as server:
        client = fast_client(server.url, tmp_path, metrics=SPECS, max_reports_per_period=5)
        for _ in range(5):
            assert client.record("browser", "firefox")
        assert client.flush(timeout=1.0) is False
        stats = client.stats
        assert (stats.queued, stats.delivered, stats.dropped_rejected) == (5, 0, 0)
        assert stats.refused >= 1
        assert any(
            "HTTP 400 (not the collector's problem document)" in p for p in client.problems()
        )

        server.scripts["/v1/reports"] = whole(json_answer(202, {"accepted": 5, "duplicates": -5}))
        assert client.flush(timeout=1.0) is False
        stats = client.stats
        assert (stats.queued, stats.delivered, stats.duplicates, stats.dropped_rejected) == (
            5,
            0,
            0,
            0,
        )

        server.scripts["/v1/reports"] = whole(json_answer(202, {"accepted": 3, "duplicates": 2}))
        assert client.flush(timeout=10)
        client.close()
    stats = client.stats
    assert (stats.admitted, stats.delivered, stats.duplicates) == (5, 5, 2)
    assert (stats.queued, stats.dropped_rejected, stats.dropped_queue_full) == (0, 0, 0)
