"""oue draws one block of random bytes per report and compares 64-bit words (issue 42).

The law must stay the one the estimators and the privacy proof assume: bit v independently
set with probability p = 1/2 at the true value and q = 1/(e^eps + 1) elsewhere. It is checked
three ways: each word decides its bit exactly as the old ``random() < x`` draw did (the same
threshold), a seeded goodness-of-fit test on per-bit frequencies and pairwise independence
with tolerances from the variance, and the auditor's verdict on oue and histogram oue metrics.
"""

from __future__ import annotations

import base64
import math
import struct

import numpy as np
import pytest
from scipy import stats

from deniable.client import MetricSpec
from deniable.client.mechanisms import OUE
from deniable.client.randomness import SeededRandomness
from deniable.estimators.audit import audit_spec

SEED = 20261205
TAIL = 1e-6
"""The chance that an honest randomizer fails one of the statistical checks below."""


class FixedBytes:
    """A Randomness that hands out given bytes and counts its calls."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls = 0

    def token_bytes(self, n: int) -> bytes:
        """The first ``n`` given bytes."""
        self.calls += 1
        return self.data[:n]

    def random(self) -> float:
        """Refused: oue draws words only."""
        raise AssertionError("oue draws one block of bytes, no floats")

    def randbelow(self, n: int) -> int:
        """Refused: oue draws words only."""
        raise AssertionError("oue draws one block of bytes, no integers")


def reference_bits(mechanism: OUE, value: int, data: bytes) -> list[int]:
    """The bits the old per-category draw gives when its i-th ``random()`` is word i >> 11
    times 2^-53: ``random() < p`` at the value, ``< q`` elsewhere."""
    words = struct.unpack(f"<{mechanism.k}Q", data[: 8 * mechanism.k])
    draws = [(w >> 11) * 2.0**-53 for w in words]
    return [
        int(draw < (mechanism.p if v == value else mechanism.q)) for v, draw in enumerate(draws)
    ]


def payload_bits(payloads: list[str], k: int) -> np.ndarray:
    """The reports' bits as an (n, k) array of 0/1."""
    raw = np.frombuffer(b"".join(base64.b64decode(p) for p in payloads), dtype=np.uint8)
    return np.unpackbits(raw.reshape(len(payloads), -1), axis=1, bitorder="little")[:, :k]


def fit_statistics(bits: np.ndarray, law: np.ndarray) -> tuple[float, float]:
    """(per-bit chi-square p-value, smallest Bonferroni-corrected pair p-value).

    Per bit: sum over bits of (count - n pi)^2 / (n pi (1 - pi)), chi-square with k degrees of
    freedom under the law. Per pair u < v: the both-set count against n pi_u pi_v with its
    binomial variance, a two-sided normal p-value times the number of pairs.
    """
    n, k = bits.shape
    counts = bits.sum(axis=0)
    chi2 = float((((counts - n * law) ** 2) / (n * law * (1 - law))).sum())
    per_bit = float(stats.chi2.sf(chi2, k))
    both = bits.T.astype(np.int64) @ bits.astype(np.int64)
    pairs = [(u, v) for u in range(k) for v in range(u + 1, k)]
    worst = 1.0
    for u, v in pairs:
        pi = law[u] * law[v]
        z = (both[u, v] - n * pi) / math.sqrt(n * pi * (1 - pi))
        worst = min(worst, 2 * float(stats.norm.sf(abs(z))) * len(pairs))
    return per_bit, worst


@pytest.mark.parametrize(("k", "value"), [(5, 0), (32, 7), (33, 32), (600, 599)])
def test_each_word_decides_its_bit_as_the_float_draw_did(k: int, value: int) -> None:
    mechanism = OUE(k, 1.3)
    data = SeededRandomness(SEED + k).token_bytes(8 * k)
    rng = FixedBytes(data)
    payload = mechanism.randomize(value, rng)  # type: ignore[arg-type]
    assert rng.calls == 1
    assert payload_bits([payload], k)[0].tolist() == reference_bits(mechanism, value, data)


def test_the_threshold_words_sit_on_either_side_of_the_bound() -> None:
    mechanism = OUE(4, 1.0)
    below_q, below_p = mechanism.word_thresholds
    assert below_q == math.ceil(mechanism.q * 2**53) << 11
    for word, expected in ((below_q - 1, [1, 1, 1, 1]), (below_q, [1, 0, 0, 0])):
        data = struct.pack("<4Q", *[word] * 4)
        assert payload_bits([mechanism.randomize(0, FixedBytes(data))], 4)[0].tolist() == expected  # type: ignore[arg-type]
    data = struct.pack("<4Q", below_p, 0, 0, 0)
    assert payload_bits([mechanism.randomize(0, FixedBytes(data))], 4)[0].tolist() == [0, 1, 1, 1]  # type: ignore[arg-type]


@pytest.mark.parametrize(("k", "epsilon", "n"), [(12, 1.0, 40_000), (32, 0.5, 20_000)])
def test_seeded_goodness_of_fit_per_bit_and_per_pair(k: int, epsilon: float, n: int) -> None:
    mechanism = OUE(k, epsilon)
    rng = SeededRandomness(SEED)
    value = k // 3
    bits = payload_bits([mechanism.randomize(value, rng) for _ in range(n)], k)
    law = np.full(k, mechanism.q)
    law[value] = mechanism.p
    per_bit, pairs = fit_statistics(bits, law)
    assert per_bit > TAIL, per_bit
    assert pairs > TAIL, pairs


def test_the_fit_rejects_bits_that_share_a_word() -> None:
    """Power check: a randomizer that reuses each word for two neighbouring bits keeps every
    bit's frequency but correlates the pairs, and the pair check catches it."""
    mechanism = OUE(12, 1.0)
    rng = SeededRandomness(SEED)
    below_q, below_p = mechanism.word_thresholds
    payloads = []
    for _ in range(40_000):
        words = struct.unpack("<6Q", rng.token_bytes(48))
        bits = [int(words[v // 2] < (below_p if v == 4 else below_q)) for v in range(12)]
        payloads.append(
            base64.b64encode(int("".join(map(str, bits[::-1])), 2).to_bytes(2, "little")).decode()
        )
    law = np.full(12, mechanism.q)
    law[4] = mechanism.p
    per_bit, pairs = fit_statistics(payload_bits(payloads, 12), law)
    assert per_bit > TAIL
    assert pairs < TAIL


@pytest.mark.parametrize(
    "spec",
    [
        MetricSpec.categorical("o", [f"c{i}" for i in range(32)], epsilon=1.0, mechanism="oue"),
        MetricSpec.histogram("h", edges=[0, 1, 2, 4, 8, 16, 32], epsilon=2.0, mechanism="oue"),
    ],
    ids=["categorical", "histogram"],
)
def test_the_auditor_passes_oue_metrics(spec: MetricSpec) -> None:
    result = audit_spec(spec, samples=20_000, seed=SEED)
    assert result.verdict == "pass", result
    assert result.lower_bound <= spec.epsilon
