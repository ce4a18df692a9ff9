"""The auditor's sampling path (``deniable.client.sampling``) is the device's record() path:
the same seed gives the same payloads as ``Client.record``, a changed randomizer changes both,
a real collector accepts the body, and the true value stays out of it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from deniable.client import KRR, MetricSpec, SeededRandomness
from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import Payload
from deniable.client.randomness import Randomness
from deniable.client.sampling import randomized_reports
from testkit import TEST_NOW, register, unique_name
from testkit.stub_collector import fast_client, running

MARK = f"zqx{uuid.uuid4().hex[:10]}"
CATEGORIES = [f"{MARK}-{word}" for word in ("red", "green", "blue")]
SPECS = [
    MetricSpec.categorical("colour_krr", CATEGORIES, epsilon=1.0, mechanism="krr"),
    MetricSpec.categorical("colour_oue", CATEGORIES, epsilon=1.0, mechanism="oue"),
    MetricSpec.categorical("colour_olh", CATEGORIES, epsilon=1.0, mechanism="olh"),
    MetricSpec.boolean("flag", epsilon=0.5),
    MetricSpec.numeric("load", lower=0, upper=1000, epsilon=1.0, mechanism="hybrid"),
    MetricSpec.histogram("load_hist", [0, 10, 100, 1000], epsilon=2.0, mechanism="oue"),
]
VALUES: dict[str, Any] = {
    "colour_krr": CATEGORIES[1],
    "colour_oue": CATEGORIES[2],
    "colour_olh": CATEGORIES[0],
    "flag": True,
    "load": 123.456789,
    "load_hist": 54.321,
}
COUNT = 40


def _payloads(body: bytes) -> list[Payload]:
    return [report["payload"] for report in json.loads(body)["reports"]]


def _recorded_payloads(tmp_path: Path, spec: MetricSpec, seed: int) -> list[Payload]:
    """What ``Client.record`` uploads for COUNT records of the spec's value, in order."""
    with running([spec]) as stub:
        client = fast_client(
            stub.url,
            tmp_path / spec.name,
            metrics=[spec],
            max_reports_per_period=COUNT,
            randomness=SeededRandomness(seed),
        )
        for _ in range(COUNT):
            assert client.record(spec.name, VALUES[spec.name])
        assert client.flush(timeout=10)
        client.close()
    return [payload for body in stub.bodies for payload in _payloads(body)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_same_seed_gives_the_payloads_client_record_uploads(
    tmp_path: Path, spec: MetricSpec
) -> None:
    body = randomized_reports(spec, VALUES[spec.name], COUNT, randomness=SeededRandomness(3))
    recorded = _recorded_payloads(tmp_path, spec, seed=3)
    assert _payloads(body) == recorded
    assert len(set(map(json.dumps, recorded))) > 1  # really randomized


def test_a_changed_randomizer_changes_client_record_and_the_sampling_path_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path takes the shipped class's ``randomize``: a patched one shows in both."""

    def shifted(self: KRR, value: int, rng: Randomness) -> int:
        return (self.check_value(value) + 1) % self.k

    monkeypatch.setattr(KRR, "randomize", shifted)
    spec = SPECS[0]
    body = randomized_reports(spec, VALUES[spec.name], COUNT)
    assert _payloads(body) == [2] * COUNT
    assert _recorded_payloads(tmp_path, spec, seed=1) == [2] * COUNT


def test_every_report_is_a_wire_report_of_the_spec() -> None:
    spec = SPECS[2]
    reports = json.loads(randomized_reports(spec, VALUES[spec.name], 25_000))["reports"]
    assert len(reports) == 25_000  # three chunks of the recorder's queue
    assert {(r["metric"], r["fingerprint"]) for r in reports} == {(spec.name, spec.fingerprint)}
    assert len({r["id"] for r in reports}) == 25_000
    assert all(list(r) == ["id", "metric", "fingerprint", "period", "payload"] for r in reports)
    for report in reports[:100]:
        spec.randomizer.parse_payload(report["payload"])


def test_the_true_value_is_not_in_the_body() -> None:
    for spec in SPECS:
        body = randomized_reports(spec, VALUES[spec.name], 500)
        assert MARK.encode() not in body
        assert b"123.45" not in body and b"54.32" not in body


def test_an_invalid_value_or_count_names_no_value() -> None:
    with pytest.raises(InvalidInput) as info:
        randomized_reports(SPECS[0], f"{MARK}-purple", 10)
    assert "purple" not in str(info.value)
    with pytest.raises(InvalidInput):
        randomized_reports(SPECS[0], CATEGORIES[0], 0)


def test_a_real_collector_accepts_the_body(admin: httpx.Client, uploader: httpx.Client) -> None:
    for spec in (
        MetricSpec.categorical(unique_name("olh"), CATEGORIES, epsilon=1.0, mechanism="olh"),
        MetricSpec.numeric(unique_name("pm"), lower=0, upper=1000, epsilon=1.0, mechanism="pm"),
    ):
        register(admin, spec)
        value = VALUES["load"] if spec.type == "numeric" else CATEGORIES[1]
        body = randomized_reports(spec, value, 400, clock=lambda: TEST_NOW)
        answer = uploader.post(
            "/v1/reports", content=body, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"accepted": 400, "duplicates": 0}
