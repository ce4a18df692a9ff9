"""Transport pacing and parsing: full-jitter backoff, failover rounds, Retry-After, 422 detail,
and which answers drop a batch (only 413, and 400 and 422 with the collector's problem
document) and which keep it for a retry."""

from __future__ import annotations

import email.utils
import json
import math
import random
import time
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from deniable.client import MetricSpec
from deniable.client.transport import (
    MAX_RETRY_AFTER,
    SendResult,
    Transport,
    _bad_indices,
    parse_retry_after,
)
from testkit import RunningCollector, register, unique_name
from testkit.stub_collector import problem_answer, proxy_answer

URL, SPARE = "http://collector.test", "http://spare.test"


def test_backoff_is_full_jitter_under_an_exponential_cap() -> None:
    transport = Transport(
        ["http://127.0.0.1:9"],
        ingest_key=None,
        timeout=1.0,
        backoff_base=0.5,
        backoff_cap=6.0,
        jitter=random.Random(20261122),
    )
    n = 4000
    for failures, bound in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 6.0), (9, 6.0)]:
        delays = [transport.backoff(failures) for _ in range(n)]
        assert all(0 <= d <= bound for d in delays)
        mean = sum(delays) / n
        # uniform on [0, bound]: mean bound/2, standard error bound/sqrt(12 n); 5 sd
        assert abs(mean - bound / 2) < 5 * bound / math.sqrt(12 * n)
    transport.close()


def test_failover_tries_every_url_before_backing_off() -> None:
    urls = ["http://127.0.0.1:9", "http://127.0.0.1:10", "http://127.0.0.1:11"]
    transport = Transport(
        urls,
        ingest_key=None,
        timeout=1.0,
        backoff_base=1.0,
        backoff_cap=8.0,
        jitter=random.Random(7),
    )
    assert transport.backoff(1) == 0 and transport.backoff(2) == 0
    assert all(0 <= transport.backoff(3) <= 1.0 for _ in range(200))
    assert transport.backoff(4) == 0 and transport.backoff(5) == 0
    assert max(transport.backoff(6) for _ in range(400)) > 1.0
    assert transport.backoff(1, retry_after=2.5) == 2.5
    assert transport.backoff(3, retry_after=30.0) == 30.0
    transport.close()


def test_failed_sends_rotate_through_the_urls() -> None:
    urls = ["http://127.0.0.1:9", "http://127.0.0.1:10"]
    transport = Transport(urls, ingest_key=None, timeout=1.0)
    seen = []
    for _ in range(4):
        seen.append(transport.url)
        assert transport.send(b'{"reports":[]}', 0).kind == "retry"
    assert seen == urls * 2
    transport.close()


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("999999") == MAX_RETRY_AFTER
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after(later) <= 31  # type: ignore[operator]


def test_only_a_422_listing_report_indices_names_bad_reports() -> None:
    assert _bad_indices([{"index": 0, "reason": "x"}, {"index": 3, "reason": "y"}]) == {0, 3}
    assert _bad_indices("metric unknown") is None
    assert _bad_indices([]) is None
    assert _bad_indices([{"index": None, "reason": "body shape"}]) is None
    assert _bad_indices([{"index": True}]) is None


def test_collector_urls_must_be_http() -> None:
    with pytest.raises(ValueError, match="http"):
        Transport(["ftp://example.org"], ingest_key=None, timeout=1.0)
    with pytest.raises(ValueError):
        Transport([], ingest_key=None, timeout=1.0)


@pytest.mark.parametrize(
    ("status", "kind", "refused"),
    [
        (400, "rejected", False),
        (413, "rejected", False),
        (422, "rejected", False),
        (401, "retry", True),
        (403, "retry", True),
        (404, "retry", True),
        (405, "retry", True),
        (409, "retry", True),
        (408, "retry", False),
        (429, "retry", False),
        (503, "retry", False),
    ],
)
def test_only_400_413_and_422_judge_the_batch_other_answers_fail_over(
    status: int, kind: str, refused: bool
) -> None:
    answer = httpx.MockTransport(lambda request: problem_answer(status, "set by the test"))
    transport = Transport([URL, SPARE], ingest_key=None, timeout=2.0, transport=answer)
    try:
        result = transport.send(b'{"reports":[]}', 0)
    finally:
        transport.close()
    assert (result.kind, result.status, result.refused) == (kind, status, refused)
    assert transport.url == (URL if kind == "rejected" else SPARE)


def test_a_400_or_422_without_the_collectors_problem_document_fails_over() -> None:
    """A proxy's HTML 400 or 422 says nothing about the reports; its 413 still means too large."""
    outcomes = {}
    for status in (400, 422, 413):
        answer = httpx.MockTransport(lambda request, status=status: proxy_answer(status))
        transport = Transport([URL, SPARE], ingest_key=None, timeout=2.0, transport=answer)
        try:
            result = transport.send(b'{"reports":[]}', 0)
        finally:
            transport.close()
        outcomes[status] = (result.kind, result.refused, transport.url == SPARE)
    assert outcomes == {
        400: ("retry", True, True),
        422: ("retry", True, True),
        413: ("rejected", False, False),
    }


def _answers_304(collector: RunningCollector) -> float:
    """How many ``GET /v1/metrics`` the collector has answered 304 so far."""
    with collector.client() as anyone:
        text = anyone.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name == "deniable_request_duration_seconds_count"
                and labels.get("route") == "/v1/metrics"
                and labels.get("status") == "304"
            ):
                return sample.value
    return 0.0


def test_spec_refreshes_ask_with_the_etag_and_reuse_an_unchanged_list(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    register(admin, MetricSpec.boolean(unique_name("etag"), epsilon=1.0))
    transport = Transport([collector.url], ingest_key=None, timeout=10.0)
    try:
        before = _answers_304(collector)
        first = transport.fetch_metrics()
        again = transport.fetch_metrics()
        added = register(admin, MetricSpec.boolean(unique_name("etag"), epsilon=1.0))
        changed = transport.fetch_metrics()
    finally:
        transport.close()
    assert first is not None and again == first
    assert _answers_304(collector) == before + 1, "the second fetch was a conditional 304"
    assert changed is not None and added.to_dict() in changed and len(changed) == len(first) + 1


GATEWAY_PROBLEM = {
    "type": "https://gateway.example/problems/bad-request",
    "title": "Bad Request",
    "status": 400,
    "detail": "request rejected by the gateway",
}
"""An API gateway's RFC 9457 problem document: it has a ``detail``, but is not the collector's."""


def _send_answered(answer: httpx.Response, count: int = 0) -> tuple[SendResult, str]:
    """What one upload attempt makes of ``answer``, and the URL the next attempt goes to."""
    mock = httpx.MockTransport(lambda request: answer)
    transport = Transport([URL, SPARE], ingest_key=None, timeout=2.0, transport=mock)
    try:
        return transport.send(b'{"reports":[]}', count), transport.url
    finally:
        transport.close()


@pytest.mark.parametrize(
    ("status", "body", "media", "kind"),
    [
        (400, {"detail": "request body is not valid JSON"}, "application/json", "rejected"),
        (422, {"detail": [{"index": 0, "reason": "bad"}]}, "application/json", "rejected"),
        (422, {"detail": [{"index": None, "reason": "shape"}]}, "application/json", "rejected"),
        (400, GATEWAY_PROBLEM, "application/problem+json", "retry"),
        (400, GATEWAY_PROBLEM, "application/json", "retry"),
        (400, {"detail": "the collector's words"}, "application/problem+json", "retry"),
        (400, {"detail": ""}, "application/json", "retry"),
        (400, {"detail": {"message": "x"}}, "application/json", "retry"),
        (
            422,
            {"detail": [{"loc": ["body"], "msg": "x", "type": "y"}]},
            "application/json",
            "retry",
        ),
        (422, {"detail": [{"index": True, "reason": "x"}]}, "application/json", "retry"),
        (422, {"detail": []}, "application/json", "retry"),
    ],
)
def test_only_the_collectors_own_refusal_judges_the_batch_by_its_structure(
    status: int, body: dict[str, Any], media: str, kind: str
) -> None:
    """A 400 or 422 drops reports only when it is the collector's refusal: ``application/json``
    with ``detail`` alone, a message or a list of ``{index, reason}``; a gateway's problem
    document with a ``detail`` keeps them, whatever its text (issue 24, item 9)."""
    answer = httpx.Response(status, content=json.dumps(body), headers={"Content-Type": media})
    result, next_url = _send_answered(answer)
    assert (result.kind, result.status) == (kind, status)
    assert result.refused is (kind == "retry")
    assert next_url == (URL if kind == "rejected" else SPARE)


@pytest.mark.parametrize(
    ("body", "counts"),
    [
        ({"accepted": 3, "duplicates": 2}, (3, 2)),
        ({"accepted": 0, "duplicates": 5}, (0, 5)),
        ({"accepted": 10, "duplicates": -5}, None),
        ({"accepted": -1, "duplicates": 0}, None),
        ({"accepted": 2.5, "duplicates": 0}, None),
        ({"accepted": True, "duplicates": 0}, None),
        ({"accepted": "5", "duplicates": 0}, None),
        ({"accepted": 6, "duplicates": 0}, None),
        ({"accepted": 5}, None),
        ([5, 0], None),
        ("<html>captive portal</html>", None),
    ],
)
def test_a_2xx_counts_only_as_the_collectors_acknowledgement(
    body: Any, counts: tuple[int, int] | None
) -> None:
    """A 2xx acknowledges a batch of 5 only with whole counts from 0 to 5; anything else
    (negative duplicates, a captive portal's page) keeps the reports for a retry."""
    content = body if isinstance(body, str) else json.dumps(body)
    result, _ = _send_answered(httpx.Response(202, content=content), count=5)
    if counts is None:
        assert (result.kind, result.refused) == ("retry", True)
        assert result.reason == "HTTP 202 (not the collector's acknowledgement)"
    else:
        assert (result.kind, result.accepted, result.duplicates) == ("accepted", *counts)
