"""The shuffler's upload route on a real ``deniable shuffle`` process: bad input is a 4xx
naming the problem (each bad envelope by index, as the collector names bad reports), bounded
before any work, and nothing of a refused upload is stored. Uploads need the shuffler's upload
key, and envelopes sealed to a key the shuffler does not serve are refused."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from testkit.key_server import KeyServer
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, ShufflerProcess

COLLECTOR = KeyServer([])
"""Serves the shuffler one key (nothing is forwarded here: min_batch is never reached)."""


@pytest.fixture(scope="module")
def shuffler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShufflerProcess]:
    directory = tmp_path_factory.mktemp("shuffler")
    with COLLECTOR:
        process = ShufflerProcess(
            directory / "s.db",
            COLLECTOR.url,
            directory,
            min_batch=1000,
            settings={
                "DENIABLE_SHUFFLER_MAX_UPLOAD": "5",
                "DENIABLE_SHUFFLER_MAX_BODY_BYTES": "8192",
                "DENIABLE_SHUFFLER_KEYS_REFRESH": "60",
            },
        )
        with process:
            yield process


def good(**changes: Any) -> dict[str, Any]:
    envelope = {
        "id": secrets.token_hex(16),
        "metric": "browser",
        "mechanism": "krr",
        "epsilon": 1.0,
        "fingerprint": "0123456789abcdef",
        "key": COLLECTOR.key_id,
        "sealed": base64.b64encode(secrets.token_bytes(240)).decode(),
    }
    return {**envelope, **changes}


def post(
    shuffler: ShufflerProcess, body: Any, key: str | None = SHUFFLER_UPLOAD_KEY
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(
        base_url=shuffler.url, trust_env=False, timeout=30, headers=headers
    ) as client:
        if isinstance(body, bytes):
            return client.post("/v1/sealed", content=body)
        return client.post("/v1/sealed", json=body)


DEVICE = "ab" * 16


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        (b"{oops", 400, "not valid JSON"),
        ([], 422, "body must be an object"),
        ({"device": DEVICE}, 422, "body must be an object"),
        ({"device": "me", "envelopes": []}, 422, "device must be 32 lowercase hex"),
        ({"device": DEVICE, "envelopes": [good(id="x")]}, 422, "id must be 32"),
        ({"device": DEVICE, "envelopes": [good(metric="Bad Name")]}, 422, "metric must be"),
        ({"device": DEVICE, "envelopes": [good(epsilon=50)]}, 422, "epsilon must be a number in"),
        ({"device": DEVICE, "envelopes": [good(epsilon="1")]}, 422, "epsilon must be"),
        ({"device": DEVICE, "envelopes": [good(sealed="not base64!")]}, 422, "sealed must be"),
        ({"device": DEVICE, "envelopes": [good(ip="1.2.3.4")]}, 422, "unexpected ['ip']"),
        ({"device": DEVICE, "envelopes": [good() for _ in range(6)]}, 413, "at most 5 envelopes"),
        (b" " * 9000, 413, "exceeds 8192 bytes"),
    ],
)
def test_bad_uploads_are_refused_naming_the_problem(
    shuffler: ShufflerProcess, body: Any, status: int, named: str
) -> None:
    answer = post(shuffler, body)
    assert answer.status_code == status, answer.text
    assert named in answer.text
    assert shuffler.counts()["received"] == 0


def test_a_refusal_names_each_bad_envelope_by_index_and_stores_none(
    shuffler: ShufflerProcess,
) -> None:
    envelopes = [good(), good(fingerprint="short"), good(), good(key=7)]
    answer = post(shuffler, {"device": DEVICE, "envelopes": envelopes})
    assert answer.status_code == 422
    assert [item["index"] for item in answer.json()["detail"]] == [1, 3]
    assert shuffler.counts()["received"] == 0


def test_a_good_upload_is_acknowledged_after_it_is_stored_and_a_resend_is_a_duplicate(
    shuffler: ShufflerProcess,
) -> None:
    envelopes = [good(), good()]
    first = post(shuffler, {"device": DEVICE, "envelopes": envelopes})
    assert (first.status_code, first.json()) == (202, {"accepted": 2, "duplicates": 0})
    again = post(shuffler, {"device": "cd" * 16, "envelopes": envelopes})
    assert again.json() == {"accepted": 0, "duplicates": 2}
    assert shuffler.counts()["received"] == 2


def test_its_answers_and_log_carry_no_server_header_and_no_address(
    shuffler: ShufflerProcess,
) -> None:
    answer = post(shuffler, {"device": DEVICE, "envelopes": [good()]})
    assert "server" not in answer.headers and "date" not in answer.headers
    log = shuffler.log_tail(1000)
    # Its own URL and the collector's (its set-up names both) are the only addresses.
    known = log.replace(shuffler.url, "").replace(shuffler.collector_url, "")
    assert "POST" not in log and "127.0.0.1:" not in known


@pytest.mark.parametrize("key", [None, "not-the-upload-key-8d2f1c"])
def test_an_upload_without_the_upload_key_is_refused_401_before_its_body_is_read(
    shuffler: ShufflerProcess, key: str | None
) -> None:
    before = shuffler.counts()["received"]
    for body in ({"device": DEVICE, "envelopes": [good()]}, b"{oops"):
        answer = post(shuffler, body, key=key)
        assert answer.status_code == 401, answer.text
        assert "upload key missing or wrong" in answer.json()["detail"]
        assert answer.headers["www-authenticate"] == "Bearer"
    assert shuffler.counts()["received"] == before


def test_it_serves_the_collectors_keys_and_refuses_envelopes_sealed_to_any_other(
    shuffler: ShufflerProcess,
) -> None:
    before = shuffler.counts()["received"]
    served = httpx.get(shuffler.url + "/v1/keys", trust_env=False).json()
    assert [(k["id"], k["current"]) for k in served["keys"]] == [(COLLECTOR.key_id, True)]
    other = "0" * 16 if COLLECTOR.key_id != "0" * 16 else "1" * 16
    answer = post(shuffler, {"device": DEVICE, "envelopes": [good(), good(key=other)]})
    assert answer.status_code == 409, answer.text
    assert f"sealed to key id {other}, which this shuffler does not serve" in answer.text
    assert shuffler.counts()["received"] == before


def test_healthz_says_it_is_up_and_nothing_about_uploads(shuffler: ShufflerProcess) -> None:
    """Any count of waiting reports, polled, would show each upload's arrival and size."""
    health = httpx.get(shuffler.url + "/healthz", trust_env=False, timeout=10)
    assert post(shuffler, {"device": DEVICE, "envelopes": [good()]}).status_code == 202
    after = httpx.get(shuffler.url + "/healthz", trust_env=False, timeout=10)
    assert health.json() == after.json() == {"status": "ok"}
