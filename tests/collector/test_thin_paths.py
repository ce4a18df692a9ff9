"""The thin paths (collector/fastpaths.py) answer exactly what the whole middleware stack answers.

Two collectors on the same settings (an ingest key, a viewer token, a CORS origin, a small body
limit, the read cache off or on), one with its thin paths and one without, each on a database
of its own, are sent the same requests on a real uvicorn: uploads accepted, duplicated and
refused (the token, the body's size, its JSON and its shape, cross-origin or not), estimates
taken by the thin path and left by it (a refused token or value, a breakdown), a preflight,
another method and a trailing slash. Status, headers (but the date) and body must match, and
so must the counters and the latency histogram's counts by route, method and status.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from starlette.requests import Request

from deniable.client import MetricSpec
from deniable.collector import Settings
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
    register,
    unique_name,
)
from testkit.configuration import VIEWER_TOKEN

PERIOD = TEST_NOW.date().isoformat()
ORIGIN = "https://app.example"
LIMIT = 32_000

Sent = tuple[str, str, bytes, dict[str, str]]
"""A request: method, path, body and headers."""


def _settings(database_url: str, read_cache_bytes: int) -> Settings:
    """The settings both collectors of a pair run on."""
    return collector_settings(
        database_url,
        viewer_token=VIEWER_TOKEN,
        read_cache_bytes=read_cache_bytes,
        cors_origins=[ORIGIN],
        max_body_bytes=LIMIT,
    )


@pytest.fixture(params=[0, 1 << 20], ids=["uncached", "cached"])
def pair(
    request: pytest.FixtureRequest, databases: DatabaseFactory, backend: str
) -> Iterator[tuple[RunningCollector, RunningCollector]]:
    """A collector with its thin paths and one without, the read cache off or on."""
    servers = [
        RunningCollector(
            _settings(databases.new(backend), request.param),
            Clock(),
            thin_paths=thin,
        ).start()
        for thin in (True, False)
    ]
    try:
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _uploads(spec: MetricSpec) -> list[Sent]:
    """Uploads accepted, duplicated and refused, cross-origin or not, and the requests near the
    upload's route that the thin path leaves to the stack."""
    key, origin = _bearer(INGEST_KEY), {"origin": ORIGIN}
    reports = make_reports(spec, [i % 3 for i in range(60)], PERIOD, 7)
    good = httpx.Request("POST", "/", json={"reports": reports}).content
    empty = b'{"reports":[]}'
    post = "/v1/reports"
    return [
        ("POST", post, good, {**key, **origin}),
        ("POST", post, good, {**key, **origin}),  # every report a duplicate
        ("POST", post, empty, {**key, "origin": "https://other.example"}),
        ("POST", post, empty, origin),
        ("POST", post, empty, _bearer("wrong")),
        ("POST", post, b'{"reports":[', {**key, **origin}),
        ("POST", post, b'{"reports":[' + b" " * LIMIT + b"]}", {**key, **origin}),
        ("POST", post, b'{"rep":[]}', key),
        ("POST", post, b'{"reports":[{"id":"x"}]}', key),
        ("OPTIONS", post, b"", {**origin, "access-control-request-method": "POST"}),
        ("GET", post, b"", key),
        ("POST", post + "/", empty, key),
    ]


def _estimates(spec: MetricSpec, numeric: MetricSpec) -> list[Sent]:
    """Estimates the thin path takes and ones it leaves to FastAPI, each asked twice (the
    second answer the read cache's when it is on), by the admin, the viewer and others."""
    path = f"/v1/metrics/{spec.name}/estimate"
    queries = [
        f"{path}?end={PERIOD}",
        f"{path}?start={PERIOD}&end={PERIOD}",
        f"{path}?end={PERIOD}&confidence=0.9&method=unbiased",
        f"{path}?end={PERIOD}&simultaneous=false&pooling=independent",
        f"{path}?end={PERIOD}&method=mle&ignored=1",
        f"{path}?end={PERIOD}&confidence=%200.99%20",
        f"{path}?end={PERIOD}&end={PERIOD}",  # repeated: left to FastAPI
        f"{path}?end={PERIOD}&by=platform",  # a breakdown: left to FastAPI
        f"/v1/metrics/{numeric.name}/estimate?end={PERIOD}",
        f"/v1/metrics/{numeric.name}/estimate?end={PERIOD}&method=consistent",  # refused
        f"/v1/metrics/not_there/estimate?end={PERIOD}",  # 404
        f"{path}?end=2020-13-01",  # 422 from the query layer
        f"{path}?end={PERIOD}&start=2099-01-01",  # start after end
        *(f"{path}?{query}" for query in ("confidence=2", "confidence=", "method=best")),
        f"{path}?simultaneous=maybe",
        f"{path}?confidence=1.5",
        f"{path}?start={'x' * 33}",
    ]
    sent: list[Sent] = []
    for token in (ADMIN_TOKEN, VIEWER_TOKEN):
        for query in queries:
            sent += [("GET", query, b"", _bearer(token))] * 2
    sent += [("GET", path, b"", {}), ("GET", path, b"", _bearer("wrong"))]
    sent += [("HEAD", path, b"", _bearer(ADMIN_TOKEN)), ("GET", path, b"", {"origin": ORIGIN})]
    return sent


def _answers(server: RunningCollector, sent: list[Sent]) -> list[tuple[int, list, bytes]]:
    """Each request's status, headers but the date, and body."""
    answers = []
    with httpx.Client(base_url=server.url, timeout=60, trust_env=False) as client:
        for method, path, body, headers in sent:
            response = client.request(method, path, content=body, headers=headers)
            kept = [(k, v) for k, v in response.headers.multi_items() if k != "date"]
            answers.append((response.status_code, kept, response.content))
    return answers


def _counted(server: RunningCollector) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    """The stopped collector's counters and latency counts (every request has been observed)."""
    registry = server.app.state.collector.telemetry.registry
    return sorted(
        (sample.name, tuple(sorted(sample.labels.items())), sample.value)
        for family in registry.collect()
        for sample in family.samples
        if sample.name.endswith(("_total", "_count"))
    )


def test_every_answer_of_the_thin_paths_is_the_whole_stacks(
    pair: tuple[RunningCollector, RunningCollector],
) -> None:
    spec = MetricSpec.categorical(unique_name("thin"), ["a", "b", "c"], epsilon=1.0)
    numeric = MetricSpec.numeric(unique_name("thin"), lower=0, upper=10, epsilon=2.0)
    sent = _uploads(spec) + _estimates(spec, numeric)
    answers = []
    for server in pair:
        with server.client(ADMIN_TOKEN) as admin:
            register(admin, spec)
            register(admin, numeric)
        answers.append(_answers(server, sent))
    uploads = [status for status, _, _ in answers[0][:12]]
    assert uploads == [202, 202, 202, 401, 401, 400, 413, 422, 422, 200, 405, 307]
    assert {status for status, _, _ in answers[0][12:]} == {200, 401, 404, 405, 422}
    for request, thin, full in zip(sent, answers[0], answers[1], strict=True):
        assert thin == full, request[:2]
    for server in pair:
        server.stop()
    assert _counted(pair[0]) == _counted(pair[1])


def _request(collector: RunningCollector, query: str, token: str | None) -> Request:
    """A request for the thin estimate's reader, as the dispatcher hands it over."""
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


def test_the_thin_estimate_takes_plain_estimates_and_leaves_the_rest(
    databases: DatabaseFactory,
) -> None:
    collector = RunningCollector(_settings(databases.new("sqlite"), 0), Clock()).start()
    try:
        taken = ["", "start=2026-01-01&end=2026-01-02", "confidence=0.9&method=mle", "other=1"]
        for query in taken:
            request = _request(collector, query, VIEWER_TOKEN)
            assert thin_estimate_query(request) is not None, query
        left = ["by=platform", "q=0.5", "compare_to=previous", "confidence=1", "end=a&end=b"]
        for query in left:
            assert thin_estimate_query(_request(collector, query, VIEWER_TOKEN)) is None, query
        assert thin_estimate_query(_request(collector, "", None)) is None
        assert thin_estimate_query(_request(collector, "", "wrong")) is None
    finally:
        collector.stop()
