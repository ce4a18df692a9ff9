"""The wire format both sides share: a report's JSON object, a batch's body, a payload's
canonical text (what the device sends and keeps in its memo, and what the collector stores)."""

from __future__ import annotations

import json

import pytest

from deniable.client.mechanisms import Payload, make_mechanism
from deniable.client.randomness import SeededRandomness, uuid4_texts
from deniable.client.wire import (
    batch_body,
    join_reports,
    parse_payload_text,
    payload_text,
    report_text,
    split_reports,
)

FINGERPRINT = "0123456789abcdef"


def canonical(value: object) -> str:
    """JSON with sorted keys and no spaces: the rule every payload text follows."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def test_encoded_batches_are_the_wire_format() -> None:
    first = report_text("6f1c0a52-6a4e-4bb1-9d55-0a0d3f1f0c11", "m", FINGERPRINT, "2026-W47", 1)
    second = report_text(
        "7f1c0a52-6a4e-4bb1-9d55-0a0d3f1f0c11", "m", FINGERPRINT, "2026-11", "AQ=="
    )
    body = json.loads(batch_body([first, second]))
    assert body == {
        "reports": [
            {
                "id": "6f1c0a52-6a4e-4bb1-9d55-0a0d3f1f0c11",
                "metric": "m",
                "fingerprint": FINGERPRINT,
                "period": "2026-W47",
                "payload": 1,
            },
            {
                "id": "7f1c0a52-6a4e-4bb1-9d55-0a0d3f1f0c11",
                "metric": "m",
                "fingerprint": FINGERPRINT,
                "period": "2026-11",
                "payload": "AQ==",
            },
        ]
    }
    assert batch_body([join_reports([first, second])]) == batch_body([first, second])
    assert batch_body([]) == b'{"reports":[]}'


@pytest.mark.parametrize(("name", "k"), [("brr", 2), ("krr", 9), ("oue", 37), ("olh", 300)])
def test_payload_texts_are_canonical_json_and_read_back(name: str, k: int) -> None:
    randomizer = make_mechanism(name, k, 1.0)
    rng = SeededRandomness(20261123)
    for value in range(k):
        payload = randomizer.randomize(value, rng)
        text = payload_text(payload)
        assert text == canonical(payload)
        assert parse_payload_text(text) == payload
        assert randomizer.parse_payload(parse_payload_text(text)) == payload


def test_a_payload_object_is_written_with_sorted_keys_whatever_its_order() -> None:
    shuffled: Payload = {"y": 3, "a": 5, "b": 7}
    assert payload_text(shuffled) == '{"a":5,"b":7,"y":3}'
    assert payload_text('a"b') == '"a\\"b"'


def test_report_texts_split_back_into_reports_in_order() -> None:
    payloads: list[Payload] = [3, "AQI=", {"a": 5, "b": 7, "y": 1}]
    texts = [
        report_text(rid, "m.x-1", FINGERPRINT, "2026-11-22", payloads[i % 3])
        for i, rid in enumerate(uuid4_texts(7))
    ]
    assert split_reports(join_reports(texts)) == texts
    assert split_reports(texts[0]) == texts[:1]
    for text in texts:
        report = json.loads(text)
        assert list(report) == ["id", "metric", "fingerprint", "period", "payload"]
        assert text == json.dumps(report, separators=(",", ":"))
