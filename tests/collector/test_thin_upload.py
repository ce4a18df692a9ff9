"""The upload route's thin path answers exactly what the whole middleware stack answers.

Two collectors on the same settings (an ingest key, a CORS origin, a small body limit), one
with its thin paths and one without, are sent the same requests: accepted, refused for the
token, the body's size, its JSON and its shape, cross-origin or not, a preflight,
another method and a trailing slash. Status, headers (but the date) and body must match.
"""

from __future__ import annotations

import datetime as dt

import httpx

from deniable.client import MetricSpec
from deniable.client.spec import period_label
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_reports,
    register_all,
)

ORIGIN = "https://app.example"
LIMIT = 4000


def _requests(spec: MetricSpec, now: dt.datetime) -> list[tuple[str, str, bytes, dict[str, str]]]:
    """(method, path, body, headers) of each request both collectors are sent."""
    key = {"authorization": f"Bearer {INGEST_KEY}"}
    origin = {"origin": ORIGIN}
    period = period_label(spec.period, now)
    good = httpx.Request(
        "POST", "/", json={"reports": make_reports(spec, [0, 1, 2], period, 7)}
    ).content
    empty = b'{"reports":[]}'
    return [
        ("POST", "/v1/reports", good, {**key, **origin}),
        ("POST", "/v1/reports", good, {**key, **origin}),  # every report a duplicate
        ("POST", "/v1/reports", empty, {**key, "origin": "https://other.example"}),
        ("POST", "/v1/reports", empty, origin),
        ("POST", "/v1/reports", empty, {"authorization": "Bearer wrong"}),
        ("POST", "/v1/reports", b'{"reports":[', {**key, **origin}),
        ("POST", "/v1/reports", b'{"reports":[' + b" " * LIMIT + b"]}", {**key, **origin}),
        ("POST", "/v1/reports", b'{"rep":[]}', key),
        ("POST", "/v1/reports", b'{"reports":[{"id":"x"}]}', key),
        (
            "OPTIONS",
            "/v1/reports",
            b"",
            {**origin, "access-control-request-method": "POST"},
        ),
        ("GET", "/v1/reports", b"", key),
        ("POST", "/v1/reports/", empty, key),
    ]


def _answers(server: RunningCollector, spec: MetricSpec) -> list[tuple[int, list, bytes]]:
    """Each request's status, headers but the date, and body."""
    answers = []
    with httpx.Client(base_url=server.url, timeout=60, trust_env=False) as client:
        for method, path, body, headers in _requests(spec, server.clock()):
            response = client.request(method, path, content=body, headers=headers)
            kept = sorted((k, v) for k, v in response.headers.items() if k != "date")
            answers.append((response.status_code, kept, response.content))
    return answers


def test_the_upload_answers_as_the_whole_stack_does(databases: DatabaseFactory) -> None:
    spec = MetricSpec.categorical("thin_upload", ["a", "b", "c"], epsilon=1.0)
    answers = []
    for thin in (True, False):
        settings = collector_settings(
            databases.new("sqlite"), cors_origins=[ORIGIN], max_body_bytes=LIMIT
        )
        server = RunningCollector(settings, thin_paths=thin).start()
        try:
            register_all(server.url, [spec], ADMIN_TOKEN)
            answers.append(_answers(server, spec))
        finally:
            server.stop()
    statuses = [status for status, _, _ in answers[0]]
    assert statuses == [202, 202, 202, 401, 401, 400, 413, 422, 422, 200, 405, 307]
    assert answers[0] == answers[1]
