"""Transport pacing and parsing: full-jitter backoff, failover rounds, Retry-After, 422 detail,
and which answers drop a batch (only 413, and 400 and 422 with the collector's problem
document) and which keep it for a retry."""

from __future__ import annotations

import email.utils
import json
import math
import random
import time
from collections.abc import Iterator

import pytest
from deniable.client.outbox import Chunk, report_json
from deniable.client.transport import (
    MAX_RETRY_AFTER,
    Transport,
    _bad_indices,
    encode_batch,
    parse_retry_after,
)
from stub_collector import StubCollector, running


@pytest.fixture(scope="module")
def stub() -> Iterator[StubCollector]:
    with running() as collector:
        yield collector


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


def test_encoded_batches_are_the_wire_format() -> None:
    items = [
        report_json(
            ("6f1c0a52-6a4e-4bb1-9d55-0a0d3f1f0c11", "m", "0123456789abcdef", "2026-W47", 1)
        ),
        report_json(
            ("7f1c0a52-6a4e-4bb1-9d55-0a0d3f1f0c11", "m", "0123456789abcdef", "2026-11", "AQ==")
        ),
    ]
    body = json.loads(encode_batch([Chunk(1, 1, items[0]), Chunk(2, 1, items[1])]))
    assert body == {
        "reports": [
            {
                "id": "6f1c0a52-6a4e-4bb1-9d55-0a0d3f1f0c11",
                "metric": "m",
                "fingerprint": "0123456789abcdef",
                "period": "2026-W47",
                "payload": 1,
            },
            {
                "id": "7f1c0a52-6a4e-4bb1-9d55-0a0d3f1f0c11",
                "metric": "m",
                "fingerprint": "0123456789abcdef",
                "period": "2026-11",
                "payload": "AQ==",
            },
        ]
    }


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
    stub: StubCollector, status: int, kind: str, refused: bool
) -> None:
    stub.answer_status = status
    spare = "http://127.0.0.1:9"
    transport = Transport([stub.url, spare], ingest_key=None, timeout=2.0)
    try:
        result = transport.send(b'{"reports":[]}', 0)
    finally:
        transport.close()
        stub.answer_status = None
    assert (result.kind, result.status, result.refused) == (kind, status, refused)
    assert transport.url == (stub.url if kind == "rejected" else spare)


def test_a_400_or_422_without_the_collectors_problem_document_fails_over(
    stub: StubCollector,
) -> None:
    """A proxy's HTML 400 or 422 says nothing about the reports; its 413 still means too large."""
    spare = "http://127.0.0.1:9"
    outcomes = {}
    for status in (400, 422, 413):
        stub.proxy_status = status
        transport = Transport([stub.url, spare], ingest_key=None, timeout=2.0)
        try:
            result = transport.send(b'{"reports":[]}', 0)
        finally:
            transport.close()
            stub.proxy_status = None
        outcomes[status] = (result.kind, result.refused, transport.url == spare)
    assert outcomes == {
        400: ("retry", True, True),
        422: ("retry", True, True),
        413: ("rejected", False, False),
    }
