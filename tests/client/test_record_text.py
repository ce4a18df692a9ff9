"""``record()`` for text metrics: UTF-8, truncation at a character boundary, terminator
padding, the pinned prefix level (kept for the device's lifetime), the pem randomizer's exact
privacy and sampled bit rates, memoized and not, through the budget and the offline queue; the
true string never reaches the outbox, a log line or an error message."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from deniable.client import InvalidInput, MetricSpec, SeededRandomness
from deniable.client.errors import SpecError
from deniable.client.ledger import Ledger
from deniable.client.mechanisms import TEXT_MAX_LENGTH, PrefixSketch
from deniable.estimators.support import text_support
from testkit import loopback_url, spare_port
from testkit.stub_collector import fast_client, running

SEARCH = MetricSpec.text("search_term", max_length=8, epsilon=2.0)
DAY = dt.datetime(2026, 11, 21, 9, tzinfo=dt.UTC)
SECRET = "dark mode"


def test_strings_are_utf8_cut_at_a_character_boundary_and_padded() -> None:
    sketch = PrefixSketch(8, 1.0)
    assert sketch.encode("dark") == b"dark\0\0\0\0"
    assert sketch.encode("dark mode") == b"dark mod"
    assert sketch.encode("søkeord") == b"s\xc3\xb8keord"  # 8 bytes exactly
    assert sketch.encode("ééééé") == "éééé".encode()  # 8 bytes exactly
    assert sketch.encode("aéééé") == "aééé".encode() + b"\0"  # the 4th é would straddle byte 8
    assert sketch.encode("") == bytes(8)
    assert sketch.levels == 8 and PrefixSketch(TEXT_MAX_LENGTH, 1.0).levels == TEXT_MAX_LENGTH


@pytest.mark.parametrize(
    ("value", "reason"),
    [("secret\x00word", "U+0000"), (b"secretword", "not a string"), (31337, "not a string")],
)
def test_a_bad_value_is_refused_naming_the_metric_never_the_value(
    value: object, reason: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        SEARCH.padded(value)
    assert "search_term" in str(caught.value) and reason in str(caught.value)
    message = str(caught.value)
    assert "secret" not in message and "word" not in message and "31337" not in message


@pytest.mark.parametrize(
    "fields",
    [
        {"max_length": 0},
        {"max_length": 65},
        {"max_length": 8, "mechanism": "oue"},
        {"max_length": 8, "categories": ["a", "b"]},
        {},
    ],
)
def test_a_bad_text_spec_is_refused(fields: dict) -> None:
    data = {"name": "t", "type": "text", "epsilon": 1.0, **fields}
    with pytest.raises(SpecError):
        MetricSpec.from_dict(data)


def test_the_spec_round_trips_and_its_fingerprint_covers_max_length() -> None:
    again = MetricSpec.from_dict(SEARCH.to_dict())
    assert again == SEARCH and again.fingerprint == SEARCH.fingerprint
    assert SEARCH.to_dict()["max_length"] == 8 and SEARCH.mechanism == "pem"
    other = MetricSpec.text("search_term", max_length=9, epsilon=2.0)
    assert other.fingerprint != SEARCH.fingerprint


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0, 20.0])
def test_one_report_is_epsilon_ldp_exactly(epsilon: float) -> None:
    """The level is pinned independently of the value and the row is uniform, so two values
    differ only in which cell's bit has probability p: the worst ratio over bit vectors is
    p(1-q) / ((1-p) q), which must be e^eps (attained, never above)."""
    sketch = PrefixSketch(8, epsilon)
    p, q = sketch.p, sketch.q
    worst = p * (1 - q) / ((1 - p) * q)
    assert worst <= math.exp(epsilon) * (1 + 1e-12)
    assert worst >= math.exp(epsilon) * (1 - 1e-12)


def test_sampled_bits_have_the_mechanism_rates() -> None:
    """The target cell's bit is set at p and every other at q (seeded; 4.4 sigma bounds)."""
    sketch = PrefixSketch(4, 1.0)
    rng = SeededRandomness(2026)
    padded = sketch.encode("dark")
    reports = 1500
    target_hits = other_hits = 0
    rows = np.zeros(sketch.rows, dtype=int)
    for _ in range(reports):
        payload = sketch.randomize(padded, 3, rng)
        assert payload == sketch.parse_payload(payload) and payload["l"] == 3
        cell = sketch.cell(payload["r"], padded[:3])
        bits = np.unpackbits(
            np.frombuffer(base64.b64decode(payload["b"]), dtype=np.uint8), bitorder="little"
        )
        target_hits += int(bits[cell])
        other_hits += int(bits.sum()) - int(bits[cell])
        rows[payload["r"]] += 1
    others = reports * (sketch.cells - 1)
    for hits, trials, rate in ((target_hits, reports, sketch.p), (other_hits, others, sketch.q)):
        assert abs(hits - trials * rate) <= 4.4 * math.sqrt(trials * rate * (1 - rate))
    expected = reports / sketch.rows
    chi2 = float(((rows - expected) ** 2 / expected).sum())
    assert chi2 < 50.0  # chi-square, 15 df: P(> 50) < 2e-5


def test_the_collectors_vectorized_support_agrees_with_the_mechanism() -> None:
    sketch = PrefixSketch(5, 1.0)
    rng = SeededRandomness(5)
    payloads = [sketch.randomize(sketch.encode(w), 1 + i % 5, rng) for i, w in enumerate("abcdefg")]
    fast = text_support(sketch, payloads)
    assert [sorted(f.tolist()) for f in fast] == [sorted(sketch.supported(p)) for p in payloads]


def outbox_text(state: Path) -> str:
    """Every byte the device keeps on disk, as text (reports, memo, ledger)."""
    parts = []
    for path in state.rglob("*"):
        if path.is_file():
            parts.append(path.read_bytes().decode("latin-1"))
    return "".join(parts)


def test_the_level_is_pinned_for_the_devices_lifetime(tmp_path: Path) -> None:
    """A device reports every value, in every period and after restarts, at one prefix level,
    drawn from its randomness and kept in its state dir; the offline queue holds the
    randomized reports only, never the string."""
    moment = [DAY]
    levels = set()
    for start in range(3):
        client = fast_client(
            loopback_url(spare_port()),
            tmp_path,
            metrics=[SEARCH],
            randomness=SeededRandomness(start),
            clock=lambda: moment[0],
        )
        assert client.record("search_term", SECRET)
        assert client.record("search_term", "other") is False  # one per period
        moment[0] += dt.timedelta(days=1)
        client.close(timeout=0.0)
    stored = outbox_text(tmp_path)
    assert SECRET not in stored and SECRET.encode().hex() not in stored
    for chunk in stored.split('"payload":')[1:]:
        levels.add(json.loads(chunk[: chunk.index("}") + 1])["l"])
    assert len(levels) == 1


def test_levels_are_uniform_over_devices() -> None:
    """Each new device draws its level uniformly from its randomness, once (seeded devices;
    chi-square, 7 df), and the ledger hands the pin to the outbox with its first report."""
    counts = np.zeros(8, dtype=int)
    for seed in range(800):
        ledger = Ledger(bytes([seed % 256]) * 32, max_reports_per_period=1, lifetime_epsilon=None)
        rng = SeededRandomness(seed)
        level = ledger.pinned_level("search_term", SEARCH.fingerprint, 8, rng)
        assert ledger.pinned_level("search_term", SEARCH.fingerprint, 8, rng) == level
        counts[level - 1] += 1
        (pin,) = ledger.take_delta().memo.values()
        assert pin == ("search_term", level)
    chi2 = float(((counts - 100) ** 2 / 100).sum())
    assert chi2 < 34.0, counts  # P(chi2_7 > 34) < 2e-5


@pytest.mark.parametrize("memoize", [False, True])
def test_record_delivers_a_text_report_memoized_or_not(
    tmp_path: Path, memoize: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """memoize=True with the SDK's default fresh layer reports text afresh (it has no two
    layers); with instantaneous_ratio=None one permanent answer per string is kept."""
    caplog.set_level(logging.DEBUG)
    moment = [DAY]
    with running([SEARCH]) as stub:
        client = fast_client(
            stub.url,
            tmp_path,
            metrics=[SEARCH],
            memoize=memoize,
            instantaneous_ratio=None if memoize else 2.0,
            clock=lambda: moment[0],
        )
        for _ in range(3):
            assert client.record("search_term", SECRET)
            moment[0] += dt.timedelta(days=1)
        assert client.flush(timeout=10)
        client.close()
    payloads = [r["payload"] for r in sorted(stub.stored.values(), key=lambda r: r["period"])]
    assert len(payloads) == 3
    assert all(SEARCH.text_randomizer.parse_payload(p) == p for p in payloads)
    distinct = {(p["b"], p["r"]) for p in payloads}
    assert (len(distinct) == 1) is memoize
    assert len({p["l"] for p in payloads}) == 1
    assert SECRET not in caplog.text and SECRET not in outbox_text(tmp_path)
