"""The thin estimate path (collector/fastpaths.py) answers what FastAPI's route answers: the
same status, headers and bytes for every request it takes, on a real uvicorn, with and
without the read cache and a viewer token; what it does not take goes to FastAPI.

A parameter given twice (the same value) is one the thin path leaves to FastAPI, so the pair
``?start=S&end=E`` / ``?start=S&start=S&end=E`` asks the same question of both paths.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from starlette.requests import Request

from deniable.client import MetricSpec
from deniable.collector.routes.estimates import thin_estimate_query
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    Clock,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_reports,
    post_reports,
    register,
    unique_name,
)
from testkit.configuration import VIEWER_TOKEN

PERIOD = TEST_NOW.date().isoformat()


@pytest.fixture(params=[0, 1 << 20], ids=["uncached", "cached"])
def collector(
    request: pytest.FixtureRequest, databases: DatabaseFactory, backend: str
) -> Iterator[RunningCollector]:
    """A collector with a viewer token, the read cache off or on."""
    settings = collector_settings(
        databases.new(backend), viewer_token=VIEWER_TOKEN, read_cache_bytes=request.param
    )
    server = RunningCollector(settings, Clock()).start()
    try:
        yield server
    finally:
        server.stop()


def _answer(client: httpx.Client, path: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers (without the date) and body of ``GET path``."""
    response = client.get(path)
    headers = [(k, v) for k, v in response.headers.multi_items() if k != "date"]
    return response.status_code, headers, response.content


def _twice(query: str) -> str:
    """``query`` with its first parameter given twice: the same question, left to FastAPI."""
    first = query.split("&", 1)[0]
    return f"{first}&{query}"


def test_every_answer_of_the_thin_path_is_fastapis(collector: RunningCollector) -> None:
    with collector.client(ADMIN_TOKEN) as admin:
        spec = register(
            admin,
            MetricSpec.categorical(unique_name("thin"), ["a", "b", "c"], epsilon=1.0),
        )
        numeric = register(
            admin, MetricSpec.numeric(unique_name("thin"), lower=0, upper=10, epsilon=2.0)
        )
    with collector.client(INGEST_KEY) as ingest:
        reports = make_reports(spec, [i % 3 for i in range(60)], PERIOD, 7)
        assert post_reports(ingest, reports).status_code == 202
    queries = [
        f"/v1/metrics/{spec.name}/estimate?end={PERIOD}",
        f"/v1/metrics/{spec.name}/estimate?start={PERIOD}&end={PERIOD}",
        f"/v1/metrics/{spec.name}/estimate?end={PERIOD}&confidence=0.9&method=unbiased",
        f"/v1/metrics/{spec.name}/estimate?end={PERIOD}&simultaneous=false&pooling=independent",
        f"/v1/metrics/{spec.name}/estimate?end={PERIOD}&method=mle&ignored=1",
        f"/v1/metrics/{spec.name}/estimate?end={PERIOD}&confidence=%200.99%20",
        f"/v1/metrics/{numeric.name}/estimate?end={PERIOD}",
        f"/v1/metrics/{numeric.name}/estimate?end={PERIOD}&method=consistent",  # refused
        f"/v1/metrics/not_there/estimate?end={PERIOD}",  # 404
        f"/v1/metrics/{spec.name}/estimate?end=2020-13-01",  # 422 from the query layer
        f"/v1/metrics/{spec.name}/estimate?end={PERIOD}&start=2099-01-01",  # start after end
    ]
    statuses = set()
    for token in (ADMIN_TOKEN, VIEWER_TOKEN):
        with collector.client(token) as reader:
            for path in queries:
                base, query = path.split("?")
                thin, full = _answer(reader, path), _answer(reader, f"{base}?{_twice(query)}")
                assert thin == full, path
                statuses.add(thin[0])
                # a second time: the read cache's answer when it is on
                assert _answer(reader, path) == thin, path
    assert statuses == {200, 404, 422}


def test_what_the_thin_path_leaves_to_fastapi_is_answered_as_before(
    collector: RunningCollector,
) -> None:
    with collector.client(ADMIN_TOKEN) as admin:
        spec = register(admin, MetricSpec.boolean(unique_name("thin"), epsilon=1.0))
    path = f"/v1/metrics/{spec.name}/estimate"
    with collector.client() as anonymous:
        status, headers, body = _answer(anonymous, path)
        assert status == 401 and ("www-authenticate", "Bearer") in headers
        assert b"viewer or admin token missing or wrong" in body
    with collector.client("wrong") as wrong:
        assert _answer(wrong, path)[0] == 401
    with collector.client(ADMIN_TOKEN) as admin:
        for query in ("confidence=2", "confidence=", "method=best", "simultaneous=maybe"):
            status = _answer(admin, f"{path}?{query}")[0]
            assert status == 422, query
        assert (
            b"confidence must be a number above 0 and below 1"
            in _answer(admin, f"{path}?confidence=1.5")[2]
        )
        assert _answer(admin, f"{path}?start={'x' * 33}")[0] == 422
        assert admin.head(path).status_code == 405


def _request(collector: RunningCollector, query: str, token: str | None) -> Request:
    """A request for the thin path's reader, as the dispatcher hands it over."""
    headers = [] if token is None else [(b"authorization", f"Bearer {token}".encode())]
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v1/metrics/m/estimate",
        "query_string": query.encode(),
        "headers": headers,
        "app": collector.app,
        "path_params": {"name": "m"},
    }
    return Request(scope)


def test_the_thin_path_takes_plain_estimates_and_leaves_the_rest(
    collector: RunningCollector,
) -> None:
    taken = ["", "start=2026-01-01&end=2026-01-02", "confidence=0.9&method=mle", "other=1"]
    for query in taken:
        assert thin_estimate_query(_request(collector, query, VIEWER_TOKEN)) is not None, query
    left = ["by=platform", "q=0.5", "compare_to=previous", "confidence=1", "end=a&end=b"]
    for query in left:
        assert thin_estimate_query(_request(collector, query, VIEWER_TOKEN)) is None, query
    assert thin_estimate_query(_request(collector, "", None)) is None
    assert thin_estimate_query(_request(collector, "", "wrong")) is None
