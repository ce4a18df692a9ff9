"""``record()`` for numbers: numeric metrics (clamp, scale, the numeric mechanism, one JSON
number) and histograms (bucket, frequency oracle), through the budget, the memo, the outbox,
the holding, delivery and the async client; and bad numbers refused without quoting them."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
from pathlib import Path

import pytest

from deniable.client import AsyncClient, InvalidInput, MetricSpec
from deniable.client.ledger import Ledger, LedgerDelta
from deniable.client.outbox import Outbox, QueuedReport
from deniable.client.randomness import SeededRandomness, uuid4_texts
from deniable.client.wire import parse_payload_text, payload_text, split_reports
from testkit import spare_port
from testkit.stub_collector import fast_client, running

LOAD = MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=1.0, mechanism="pm")
COIN = MetricSpec.numeric("coin", lower=-1, upper=1, epsilon=0.5, mechanism="duchi")
MIXED = MetricSpec.numeric("mixed", lower=10, upper=20, epsilon=2.0)
HIST = MetricSpec.histogram("load_hist", [0, 100, 250, 500, 1000, 5000], epsilon=1.0)
SPECS = [LOAD, COIN, MIXED, HIST]
DAY = dt.datetime(2026, 11, 21, 9, tzinfo=dt.UTC)


def expected_payload(spec: MetricSpec, value: float, seed: int) -> object:
    """The payload a client seeded with ``seed`` sends for its first record of ``value``."""
    rng = SeededRandomness(seed)
    if spec.type == "numeric":
        return spec.numeric_randomizer.randomize(spec.scale(value), rng)
    return spec.randomizer.randomize(spec.bucket_of(value), rng)


@pytest.mark.parametrize(
    ("spec", "value", "t"),
    [
        (LOAD, 412.7, 2 * 412.7 / 5000 - 1),
        (LOAD, 7_000_000, 1.0),
        (LOAD, -3, -1.0),
        (COIN, 0.25, 0.25),
        (MIXED, 17, 0.4),
    ],
)
def test_a_number_is_clamped_scaled_and_randomized_into_one_json_number(
    tmp_path: Path, spec: MetricSpec, value: float, t: float
) -> None:
    with running(SPECS) as stub:
        client = fast_client(
            stub.url, tmp_path, metrics=SPECS, randomness=SeededRandomness(42), clock=lambda: DAY
        )
        assert client.record(spec.name, value) is True
        assert client.flush(timeout=10)
        client.close()
    (report,) = stub.stored.values()
    assert spec.scale(value) == pytest.approx(t, abs=1e-15)
    expected = spec.numeric_randomizer.randomize(t, SeededRandomness(42))
    assert report["payload"] == expected and type(report["payload"]) is float
    assert report["fingerprint"] == spec.fingerprint and report["period"] == "2026-11-21"
    assert spec.numeric_randomizer.parse_payload(report["payload"]) == report["payload"]
    assert f'"payload":{expected!r}}}'.encode() in stub.bodies[0]


def test_a_histogram_value_goes_through_the_oracle_as_its_bucket(tmp_path: Path) -> None:
    with running(SPECS) as stub:
        client = fast_client(
            stub.url, tmp_path, metrics=SPECS, randomness=SeededRandomness(9), clock=lambda: DAY
        )
        assert client.record("load_hist", 412.7) is True
        assert client.flush(timeout=10)
        client.close()
    (report,) = stub.stored.values()
    assert HIST.bucket_of(412.7) == 2
    assert report["payload"] == expected_payload(HIST, 412.7, 9)
    assert HIST.randomizer.parse_payload(report["payload"]) == report["payload"]


def test_the_budget_and_its_ledger_apply_to_numbers(tmp_path: Path) -> None:
    moment = [DAY]
    with running(SPECS) as stub:
        client = fast_client(stub.url, tmp_path, metrics=SPECS, clock=lambda: moment[0])
        assert [client.record("load_ms", v) for v in (1.0, 2.0)] == [True, False]
        assert [client.record("load_hist", v) for v in (1.0, 2.0)] == [True, False]
        moment[0] += dt.timedelta(days=1)
        assert client.record("load_ms", 3.0) is True
        spent = client.privacy_spent()
        assert spent["load_ms"].total_epsilon == 2.0
        assert client.flush(timeout=10)
        client.close()
    assert client.stats.over_budget == 2
    assert sorted(r["metric"] for r in stub.stored.values()) == ["load_hist", "load_ms", "load_ms"]


def test_memoized_numbers_repeat_their_answer_for_the_same_clamped_value(tmp_path: Path) -> None:
    """The memo key is the value after clamping and scaling: 6000 and 9000 on [0, 5000] are
    the same point (t = 1) and share an answer; a different value gets its own. Numbers are
    memoized only without the fresh layer (instantaneous_ratio=None): they have no two layers."""
    moment = [DAY]
    with running(SPECS) as stub:
        client = fast_client(
            stub.url,
            tmp_path,
            metrics=SPECS,
            memoize=True,
            instantaneous_ratio=None,
            clock=lambda: moment[0],
        )
        for value in (6000, 9000, 6000.0, 5000):
            assert client.record("load_ms", value)
            assert client.record("mixed", 12.5)
            assert client.record("load_hist", 300 + value / 1000)
            moment[0] += dt.timedelta(days=1)
        assert client.flush(timeout=10)
        client.close()
        by_metric: dict[str, list[object]] = {}
        for report in sorted(stub.stored.values(), key=lambda r: r["period"]):
            by_metric.setdefault(report["metric"], []).append(report["payload"])
        assert len(set(by_metric["load_ms"])) == 1
        assert len(set(by_metric["mixed"])) == 1
        assert len(set(map(json.dumps, by_metric["load_hist"]))) == 1
        # Reopened, the memo (HMAC keys and randomized answers only) still answers.
        again = fast_client(
            stub.url,
            tmp_path,
            metrics=SPECS,
            memoize=True,
            instantaneous_ratio=None,
            clock=lambda: moment[0],
        )
        assert again.record("load_ms", 123456)
        assert again.record("mixed", 17.0)
        assert again.flush(timeout=10)
        spent = again.privacy_spent()
        assert spent["load_ms"].per_value_epsilon == 1.0
        # 17 is not 12.5: a fresh draw, which spends the budget again (the payloads themselves
        # may coincide: hybrid's duchi part has two outputs).
        assert spent["mixed"].per_value_epsilon == 2 * MIXED.epsilon
        again.close()
    latest = {
        r["metric"]: r["payload"] for r in stub.stored.values() if r["period"] == "2026-11-25"
    }
    assert latest["load_ms"] == by_metric["load_ms"][0]


def test_numeric_memo_keys_are_hmacs_of_the_exact_scaled_value() -> None:
    ledger = Ledger(b"k" * 32, max_reports_per_period=1, lifetime_epsilon=None)
    key = ledger.memo_key("load_ms", LOAD.fingerprint, LOAD.scale(412.7))
    assert len(key) == 64 and int(key, 16) >= 0
    assert key == ledger.memo_key("load_ms", LOAD.fingerprint, LOAD.scale(412.7))
    assert key != ledger.memo_key("load_ms", LOAD.fingerprint, LOAD.scale(412.71))
    assert key != ledger.memo_key("load_ms", LOAD.fingerprint, 1)
    other = Ledger(b"j" * 32, max_reports_per_period=1, lifetime_epsilon=None)
    assert key != other.memo_key("load_ms", LOAD.fingerprint, LOAD.scale(412.7))
    assert ledger.memo_key("m", "f", 2) == ledger.memo_key("m", "f", 2)  # categories unchanged


FLOATS = [0.1 + 0.2, -4.082988165073596, 1e-300, -0.0, 5e-324, 2.0**-24 * 12345, 1.0, 3.0]


def test_float_payloads_round_trip_exactly_through_the_wire_and_the_outbox(
    tmp_path: Path,
) -> None:
    for y in FLOATS:
        text = payload_text(y)
        back = parse_payload_text(text)
        assert type(back) is float and back == y and math.copysign(1, back) == math.copysign(1, y)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="finite"):
            payload_text(bad)
        with pytest.raises(ValueError, match="not a JSON number"):
            parse_payload_text(json.dumps(bad))
    queued: list[QueuedReport] = [
        (rid, "load_ms", LOAD.fingerprint, "2026-11-21", y)
        for rid, y in zip(uuid4_texts(len(FLOATS)), FLOATS, strict=True)
    ]
    memo = {f"key{i}": ("load_ms", y) for i, y in enumerate(FLOATS)}
    outbox = Outbox(tmp_path)
    outbox.commit(queued, LedgerDelta(memo=memo), max_queue=100, per_chunk=3, max_bytes=10**6)
    outbox.close()
    reopened = Outbox(tmp_path)
    stored = [
        json.loads(item)["payload"]
        for chunk in reopened.peek(100, 10**6)
        for item in split_reports(chunk.reports)
    ]
    _, restored_memo = reopened.load_ledger()
    reopened.close()
    for got, y in zip(stored, FLOATS, strict=True):
        assert type(got) is float and got.hex() == y.hex()
    for i, y in enumerate(FLOATS):
        metric, got = restored_memo[f"key{i}"]
        assert metric == "load_ms" and type(got) is float and got.hex() == y.hex()  # type: ignore[union-attr]


def test_numbers_recorded_before_the_specs_are_held_then_randomized(tmp_path: Path) -> None:
    port = spare_port()
    moment = [DAY]
    client = fast_client(f"http://127.0.0.1:{port}", tmp_path, clock=lambda: moment[0])
    assert client.record("load_ms", 4817.263) is True
    assert client.record("load_hist", 4817.263) is True
    assert client.record("coin", "not a number") is True  # checked when its spec arrives
    moment[0] += dt.timedelta(days=1)
    assert client.stats.held == 3
    with running(SPECS, port=port) as stub:
        assert client.flush(timeout=10) is True
        client.close()
    assert sorted((r["metric"], r["period"]) for r in stub.stored.values()) == [
        ("load_hist", "2026-11-21"),
        ("load_ms", "2026-11-21"),
    ]
    assert client.stats.dropped_held == 1
    for report in stub.stored.values():
        assert report["payload"] != 4817.263


def test_async_client_records_numbers(tmp_path: Path) -> None:
    async def main(url: str) -> bool:
        async with AsyncClient(
            url, state_dir=tmp_path, metrics=SPECS, max_reports_per_period=3, backoff_base=0.02
        ) as client:
            assert [client.record("load_ms", v) for v in (1.5, 2, 4999)] == [True] * 3
            assert client.record("load_hist", 250) is True
            with pytest.raises(InvalidInput, match="metric load_ms"):
                client.record("load_ms", math.nan)
            return await client.flush(timeout=10)

    with running(SPECS) as stub:
        assert asyncio.run(main(stub.url))
    payloads = [r["payload"] for r in stub.stored.values() if r["metric"] == "load_ms"]
    assert len(payloads) == 3 and all(type(y) is float for y in payloads)
    assert all(abs(y) <= LOAD.numeric_randomizer.bound for y in payloads)


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -math.inf, 10**400, "4817.263", b"1", True, False, None, [1.0]]
)
def test_bad_numbers_are_invalid_input_naming_the_metric_never_the_value(
    tmp_path: Path, bad: object
) -> None:
    client = fast_client(f"http://127.0.0.1:{spare_port()}", tmp_path, metrics=SPECS)
    try:
        for metric in ("load_ms", "coin", "load_hist"):
            with pytest.raises(InvalidInput) as caught:
                client.record(metric, bad)
            message = str(caught.value)
            assert f"metric {metric}" in message
            for shown in ("4817", "nan", "inf", "True", "False", "None", "[1"):
                assert shown not in message.replace("infinite", "").replace("NaN", "")
        assert client.stats.admitted == 0
    finally:
        client.close(timeout=0.1)
