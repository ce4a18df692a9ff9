"""The auditor (``deniable.estimators.audit``) catches broken randomizers at CI's sample size
and passes the real ones (the sweep over every mechanism and eps: tests/cli/test_audit.py).

Each broken randomizer replaces the shipped class's ``randomize`` (monkeypatch), so the
auditor sees it through the real record() path. The catch rates at the default 100,000
reports per input and 99% confidence, eps = 1, from the normal approximation to the binomial
(docs/audit.md, "Sample size and power"): the bound is about log(p_a/p_b) - z_B (s_a + s_b)
with s = sqrt((1 - p)/(n p)) per probability and z_B the Bonferroni quantile at
0.01/(4 x events), with standard deviation sqrt(s_a^2 + s_b^2); it exceeds eps = 1 with

* brr answering truthfully 1 point too often (log-ratio 1.051): z = 5.2, a miss once in
  12 million seeds; the hardest case, which sets the sample size;
* olh reporting the true hash bucket with probability 0.1 first (1.210): z = 18;
* oue with p = 0.6 (1.405): z = 37; pm whose window probability uses e^eps (1.5): z = 63;
* krr keeping the value with the probability for 2 eps (2.0): z = 92.

The real brr and krr (k = 5) give bounds of 0.978 and 0.962 with standard deviations 0.006
and 0.009, so ">= 0.8 eps" fails only beyond 30 standard deviations. A krr randomizing as if
eps were half the claim has an upper bound near 0.54, 43 standard deviations below 0.9 eps:
``loose``. Every run is seeded, so each outcome here is deterministic; the z values say how
unlikely another seed is to change it.
"""

from __future__ import annotations

import base64
import dataclasses
import math

import pytest
from deniable.client import BRR, KRR, OLH, OUE, MetricSpec, Piecewise
from deniable.client.randomness import Randomness
from deniable.estimators.audit import (
    DEFAULT_SAMPLES,
    LOOSE_FRACTION,
    AuditError,
    AuditResult,
    adjacent_inputs,
    audit_document,
    audit_spec,
    audit_specs,
    event_family,
    log_ratio_bounds,
    mechanism_sweep,
    numeric_thresholds,
)

CATEGORIES = ("a", "b", "c", "d", "e")
SEED = 20261121


def _krr(epsilon: float = 1.0) -> MetricSpec:
    return MetricSpec.categorical("k", CATEGORIES, epsilon=epsilon, mechanism="krr")


def _audit(spec: MetricSpec, samples: int = DEFAULT_SAMPLES) -> AuditResult:
    return audit_spec(spec, samples=samples, seed=SEED)


def test_the_real_brr_and_krr_bound_at_least_four_fifths_of_eps_1() -> None:
    for spec in (MetricSpec.boolean("b", epsilon=1.0), _krr()):
        result = _audit(spec)
        assert result.verdict == "pass", result
        assert 0.8 <= result.lower_bound <= 1.0
        assert result.upper_bound >= LOOSE_FRACTION
        assert result.samples == DEFAULT_SAMPLES and result.confidence == 0.99


def test_krr_keeping_the_value_as_for_twice_eps_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def randomize(self: KRR, value: int, rng: Randomness) -> int:
        value = self.check_value(value)
        e = math.exp(2 * self.epsilon)
        if rng.random() < e / (e + self.k - 1):
            return value
        other = rng.randbelow(self.k - 1)
        return other + (other >= value)

    monkeypatch.setattr(KRR, "randomize", randomize)
    result = _audit(_krr())
    assert result.verdict == "fail" and result.lower_bound > result.epsilon, result
    assert result.lower_bound > 1.9


def test_oue_with_p_six_tenths_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def randomize(self: OUE, value: int, rng: Randomness) -> str:
        value = self.check_value(value)
        bits = bytearray(self.n_bytes)
        for v in range(self.k):
            if rng.random() < (0.6 if v == value else self.q):
                bits[v >> 3] |= 1 << (v & 7)
        return base64.b64encode(bytes(bits)).decode("ascii")

    monkeypatch.setattr(OUE, "randomize", randomize)
    result = _audit(MetricSpec.categorical("o", CATEGORIES, epsilon=1.0, mechanism="oue"))
    assert result.verdict == "fail" and result.lower_bound > result.epsilon, result
    assert "bit a = 1 and bit e = 0" in result.event or "bit a = 0 and bit e = 1" in result.event


def test_olh_that_leaks_the_hash_bucket_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def randomize(self: OLH, value: int, rng: Randomness) -> dict[str, int]:
        payload = original(self, value, rng)
        if rng.random() < 0.1:
            payload["y"] = self.hash(payload["a"], payload["b"], value)
        return payload

    original = OLH.randomize
    monkeypatch.setattr(OLH, "randomize", randomize)
    result = _audit(MetricSpec.categorical("h", CATEGORIES, epsilon=1.0, mechanism="olh"))
    assert result.verdict == "fail" and result.lower_bound > result.epsilon, result


def test_brr_one_point_too_truthful_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def randomize(self: BRR, value: int, rng: Randomness) -> int:
        value = self.check_value(value)
        return value if rng.random() < self.p + 0.01 else 1 - value

    monkeypatch.setattr(BRR, "randomize", randomize)
    result = _audit(MetricSpec.boolean("b", epsilon=1.0))
    assert result.verdict == "fail" and result.lower_bound > result.epsilon, result
    assert "leaks more than it claims" in result.message


def test_pm_with_the_window_probability_of_e_to_the_eps_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def randomize(self: Piecewise, t: float, rng: Randomness) -> float:
        left, right = self.window(self.check_value(t))
        e = math.exp(self.epsilon)
        if rng.random() < e / (e + 1):
            return self._on_grid(left + (right - left) * rng.random())
        u = (self.bound + 1) * rng.random()
        below = left + self.bound
        return self._on_grid(-self.bound + u if u < below else right + (u - below))

    monkeypatch.setattr(Piecewise, "randomize", randomize)
    spec = MetricSpec.numeric("p", lower=0, upper=10, epsilon=1.0, mechanism="pm")
    result = _audit(spec)
    assert result.verdict == "fail" and result.lower_bound > result.epsilon, result
    assert result.event.startswith(("y > 1:", "y < -1:"))


def test_krr_randomizing_as_for_half_the_claim_is_loose(monkeypatch: pytest.MonkeyPatch) -> None:
    def halved(self: KRR, value: int, rng: Randomness) -> int:
        value = self.check_value(value)
        e = math.exp(self.epsilon / 2)
        if rng.random() < e / (e + self.k - 1):
            return value
        other = rng.randbelow(self.k - 1)
        return other + (other >= value)

    monkeypatch.setattr(KRR, "randomize", halved)
    result = _audit(_krr(), samples=20_000)
    assert result.verdict == "loose", result
    assert result.upper_bound < LOOSE_FRACTION * result.epsilon
    assert "loose" in result.message


def test_the_same_seed_gives_the_same_result() -> None:
    specs = mechanism_sweep([2.0])
    first = audit_specs(specs, samples=2_000, seed=7)
    again = audit_specs(specs, samples=2_000, seed=7, jobs=2)
    other = audit_specs(specs[:1], samples=2_000, seed=8)

    def fields(r: AuditResult) -> dict:
        return {k: v for k, v in dataclasses.asdict(r).items() if k != "seconds"}

    assert [fields(r) for r in first] == [fields(r) for r in again]
    assert fields(first[0]) != fields(other[0])


def test_payloads_a_collector_refuses_are_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KRR, "randomize", lambda self, value, rng: self.k)
    with pytest.raises(AuditError, match="krr payloads"):
        _audit(_krr(), samples=100)


def test_the_inputs_and_events_are_each_mechanisms_worst_case() -> None:
    histogram = MetricSpec.histogram("h", [0, 10, 20, 30], epsilon=1.0, mechanism="krr")
    numeric = MetricSpec.numeric("n", lower=-5, upper=5, epsilon=1.0, mechanism="duchi")
    assert [v for v, _ in adjacent_inputs(histogram)] == [0, 30]
    assert [histogram.index_of(v) for v, _ in adjacent_inputs(histogram)] == [0, 2]
    assert [numeric.scale(v) for v, _ in adjacent_inputs(numeric)] == [-1.0, 1.0]
    assert len(event_family(MetricSpec.boolean("b", epsilon=1.0)).names) == 2
    wide = MetricSpec.categorical("w", [f"c{i}" for i in range(40)], epsilon=1.0, mechanism="krr")
    assert event_family(wide).names == ("report = c0", "report = c39")
    cuts = numeric_thresholds(numeric.numeric_randomizer.bound)
    assert {-1.0, 0.0, 1.0} <= set(cuts) and len(cuts) == 31 + 2  # 0 is the middle edge


def test_log_ratio_bounds_cover_the_exact_ratio_and_tighten_with_samples() -> None:
    import numpy as np

    p, q, n = 0.6, 0.2, 10_000
    lower, upper = log_ratio_bounds(np.array([p * n]), np.array([q * n]), n, 0.99)
    assert lower[0] < math.log(p / q) < upper[0]
    assert lower[1] < math.log(q / p) < upper[1]
    wide, _ = log_ratio_bounds(np.array([p * n / 100]), np.array([q * n / 100]), n // 100, 0.99)
    assert wide[0] < lower[0]


def test_bad_arguments_and_the_document() -> None:
    with pytest.raises(ValueError, match="samples"):
        audit_spec(_krr(), samples=0)
    with pytest.raises(ValueError, match="confidence"):
        audit_spec(_krr(), confidence=1.0)
    with pytest.raises(ValueError, match="jobs"):
        audit_specs([_krr()], jobs=0)
    result = _audit(_krr(), samples=1_000)
    document = audit_document([result], 1.5, seed=SEED)
    assert document["summary"] == {"pass": 1, "loose": 0, "fail": 0}
    assert document["failed"] is False and document["seed"] == SEED
    row = document["results"][0]
    assert row["ratio"] == pytest.approx(result.lower_bound / result.epsilon)
    assert set(row) >= {"metric", "epsilon", "lower_bound", "verdict", "event", "message"}
