"""The auditor (``deniable.estimators.audit``) catches broken randomizers at CI's sample size
and passes the real ones (the sweep over every mechanism and eps: tests/cli/test_audit.py).

Each broken randomizer replaces the shipped class's ``randomize`` (monkeypatch), so the
auditor sees it through the real record() path. The catch rates at the default 200,000
reports per audit (100,000 per input for a boolean, 40,000 for five categories or the five
numeric inputs) and 99% confidence, eps = 1, from the normal approximation to the binomial
(``python -m bench.audit_power``; docs/audit.md, "Sample size and power"): the bound is about
log(p_a/p_b) - z_B (s_a + s_b) with s = sqrt((1 - p)/(n p)) per probability and z_B the
Bonferroni quantile at 0.01/(2 x cells), with standard deviation sqrt(s_a^2 + s_b^2); it
exceeds eps = 1 with

* brr answering truthfully 1 point too often (log-ratio 1.051): z = 5.2, a miss once in
  12 million seeds; the hardest case, which sets the sample size;
* olh reporting the true hash bucket with probability 0.1 first (1.210): z = 9.2;
* oue with p = 0.6 (1.405): z = 21; pm whose window probability uses e^eps (1.5): z = 37;
* krr keeping the value with the probability for 2 eps (2.0): z = 56;
* oue that never flips its middle bit (infinite): that bit is always 1 under its own input
  and never under another, so the bound is log(CP_low(n of n) / CP_high(0 of n)) = 8.35
  whatever the seed;
* pm with that window probability for interior t only (1.5 between t = -1/2 and +1/2): the
  expected bound is 1.43 with SD 0.013, so "> 1.25" fails only beyond 13 SD.

The real brr and krr (k = 5) give bounds near 0.978 and 0.936 (one event; the largest over
every pair is higher) with standard deviations 0.006 and 0.013, so ">= 0.8 eps" fails only
beyond 10 standard deviations. A krr randomizing as if eps were half the claim (20,000
reports per input) has an upper bound near 0.59 (SD 0.019), 16 standard deviations below
0.9 eps: ``loose``. Every run is seeded, so each outcome here is
deterministic; the z values say how unlikely another seed is to change it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re

import pytest

from deniable.client import BRR, KRR, OLH, OUE, MetricSpec, Piecewise
from deniable.client.errors import InvalidInput
from deniable.client.randomness import Randomness
from deniable.client.sampling import window_reports
from deniable.estimators.audit import (
    DEFAULT_REPORTS,
    LOOSE_FRACTION,
    NUMERIC_INPUTS,
    AuditError,
    AuditResult,
    audit_document,
    audit_inputs,
    audit_spec,
    audit_specs,
    event_family,
    log_ratio_bounds,
    mechanism_sweep,
    numeric_thresholds,
    sampled_inputs,
    window_gaps,
)

CATEGORIES = ("a", "b", "c", "d", "e")
SEED = 20261121


def _krr(epsilon: float = 1.0) -> MetricSpec:
    return MetricSpec.categorical("k", CATEGORIES, epsilon=epsilon, mechanism="krr")


def _audit(spec: MetricSpec, samples: int | None = None) -> AuditResult:
    return audit_spec(spec, samples=samples, seed=SEED)


def test_the_real_brr_and_krr_bound_at_least_four_fifths_of_eps_1() -> None:
    for spec in (MetricSpec.boolean("b", epsilon=1.0), _krr()):
        result = _audit(spec)
        assert result.verdict == "pass", result
        assert 0.8 <= result.lower_bound <= 1.0
        assert result.upper_bound >= LOOSE_FRACTION
        assert result.samples == DEFAULT_REPORTS // len(audit_inputs(spec))
        assert result.confidence == 0.99


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
    assert re.match(r"bit (\w) = 1 and bit \w = 0: P\(\. \| \1\)", result.event), result.event


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
    assert result.event.startswith(("y > 1", "y < -1")), result.event


def test_oue_that_never_flips_its_middle_bit_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def randomize(self: OUE, value: int, rng: Randomness) -> str:
        bits = bytearray(base64.b64decode(original(self, value, rng)))
        middle = self.k // 2
        bits[middle >> 3] &= ~(1 << (middle & 7))
        bits[middle >> 3] |= (value == middle) << (middle & 7)
        return base64.b64encode(bytes(bits)).decode("ascii")

    original = OUE.randomize
    monkeypatch.setattr(OUE, "randomize", randomize)
    spec = MetricSpec.categorical("o", CATEGORIES, epsilon=1.0, mechanism="oue")
    result = _audit(spec)
    assert result.verdict == "fail" and result.lower_bound > 5, result
    assert "bit c = 1" in result.event and "P(. | c)" in result.event


def test_pm_wrong_only_for_interior_t_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def randomize(self: Piecewise, t: float, rng: Randomness) -> float:
        t = self.check_value(t)
        if abs(t) == 1:
            return original(self, t, rng)
        left, right = self.window(t)
        e = math.exp(self.epsilon)
        if rng.random() < e / (e + 1):
            return self._on_grid(left + (right - left) * rng.random())
        u = (self.bound + 1) * rng.random()
        below = left + self.bound
        return self._on_grid(-self.bound + u if u < below else right + (u - below))

    original = Piecewise.randomize
    monkeypatch.setattr(Piecewise, "randomize", randomize)
    spec = MetricSpec.numeric("p", lower=0, upper=10, epsilon=1.0, mechanism="pm")
    result = _audit(spec)
    assert result.verdict == "fail" and result.lower_bound > 1.25, result
    assert not ("(t = -1)" in result.event and "(t = +1)" in result.event), result.event


def test_the_real_mechanisms_pass_at_sixteen_categories() -> None:
    names = [f"c{i}" for i in range(16)]
    for mechanism in ("krr", "oue", "olh"):
        spec = MetricSpec.categorical(mechanism, names, epsilon=2.0, mechanism=mechanism)
        result = _audit(spec, samples=4_000)
        assert result.verdict == "pass", result


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
    first = audit_specs(specs, samples=1_000, seed=7)
    again = audit_specs(specs, samples=1_000, seed=7, jobs=2)
    other = audit_specs(specs[:1], samples=1_000, seed=8)

    def fields(r: AuditResult) -> dict:
        return {k: v for k, v in dataclasses.asdict(r).items() if k != "seconds"}

    assert [fields(r) for r in first] == [fields(r) for r in again]
    assert fields(first[0]) != fields(other[0])


def test_payloads_a_collector_refuses_are_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KRR, "randomize", lambda self, value, rng: self.k)
    with pytest.raises(AuditError, match="krr payloads"):
        _audit(_krr(), samples=100)


def test_every_pair_of_categories_and_a_grid_of_t_are_audited() -> None:
    histogram = MetricSpec.histogram("h", [0, 10, 20, 30], epsilon=1.0, mechanism="krr")
    numeric = MetricSpec.numeric("n", lower=-5, upper=5, epsilon=1.0, mechanism="duchi")
    assert [v for v, _ in audit_inputs(histogram)] == [0, 10, 30]
    assert [histogram.index_of(v) for v, _ in audit_inputs(histogram)] == [0, 1, 2]
    assert [numeric.scale(v) for v, _ in audit_inputs(numeric)] == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert len(audit_inputs(numeric)) == NUMERIC_INPUTS
    boolean = event_family(MetricSpec.boolean("b", epsilon=1.0))
    assert len(boolean.names) == 2 and boolean.support == ((0, 1), (0, 1))
    oue = event_family(MetricSpec.categorical("o", CATEGORIES, epsilon=1.0, mechanism="oue"))
    assert len(oue.names) == 5 * 4 + 5 and oue.names[0] == "bit a = 1 and bit b = 0"
    assert oue.support[0] == (0, 1) and oue.support[-1] == (0, 1, 2, 3, 4)
    olh = event_family(MetricSpec.categorical("h", CATEGORIES, epsilon=1.0, mechanism="olh"))
    assert {pair for pair in olh.support} == {(a, b) for a in range(5) for b in range(5) if a != b}
    wide = MetricSpec.categorical("w", [f"c{i}" for i in range(40)], epsilon=1.0, mechanism="krr")
    assert [v for v, _ in audit_inputs(wide)] == ["c0", "c20", "c39"]
    assert event_family(wide).names == ("report = c0", "report = c20", "report = c39")
    assert event_family(numeric).names == ("y > 0", "y < 0")
    pm = dataclasses.replace(numeric, mechanism="pm")
    cuts = numeric_thresholds(pm.numeric_randomizer.bound)
    assert {-1.0, 0.0, 1.0} <= set(cuts) and len(cuts) == 31 + 2  # 0 is the middle edge
    gaps = window_gaps(pm, [-1.0, -0.5, 0.0, 0.5, 1.0])
    piecewise = pm.numeric_randomizer
    assert len(gaps) == 20 and gaps[0] == (piecewise.window(-1.0)[0], piecewise.window(-0.5)[0])
    for low, high in gaps:
        assert low < high


def test_the_gaps_hold_pm_s_whole_ratio_and_the_tails_its_ends() -> None:
    piecewise = Piecewise(1.0)
    ts = [-1.0, -0.5, 0.0, 0.5, 1.0]
    spec = MetricSpec.numeric("p", lower=-1, upper=1, epsilon=1.0, mechanism="pm")
    for (low, high), (a, b) in zip(window_gaps(spec, ts), _pairs(5), strict=True):
        middle = (low + high) / 2
        ratio = piecewise.density(middle, ts[a]) / piecewise.density(middle, ts[b])
        assert ratio == pytest.approx(math.e)


def _pairs(m: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(m) for b in range(m) if a != b]


def test_log_ratio_bounds_cover_the_exact_ratio_and_tighten_with_samples() -> None:
    import numpy as np

    p, q, n = 0.6, 0.2, 10_000
    support = [(0, 1)]
    lower, upper, rows = log_ratio_bounds(np.array([[p * n], [q * n]]), n, support, 0.99)
    assert rows.tolist() == [[0, 0, 1], [0, 1, 0]]
    assert lower[0] < math.log(p / q) < upper[0]
    assert lower[1] < math.log(q / p) < upper[1]
    counts = np.array([[p * n / 100], [q * n / 100]])
    wide, _, _ = log_ratio_bounds(counts, n // 100, support, 0.99)
    assert wide[0] < lower[0]


def test_bonferroni_counts_every_cell_once_however_many_pairs_share_it() -> None:
    import numpy as np

    from deniable.estimators.intervals import clopper_pearson

    counts = np.array([[300, 900], [200, 500], [100, 400]])
    support = [(0, 1, 2), (0, 2)]  # 5 cells, so each one-sided bound is at 0.01 / 10
    lower, upper, rows = log_ratio_bounds(counts, 1_000, support, 0.99)
    ordered = [(0, 0, 1), (0, 0, 2), (0, 1, 0), (0, 1, 2), (0, 2, 0), (0, 2, 1)]
    assert [tuple(row) for row in rows.tolist()] == [*ordered, (1, 0, 2), (1, 2, 0)]
    low, high = clopper_pearson(np.array([300, 200, 900, 400]), np.full(4, 1_000), 2 * 0.001)
    assert lower[0] == pytest.approx(math.log(low[0] / high[1]))
    assert upper[6] == pytest.approx(math.log(high[2] / low[3]))


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


def _brr_as_for_twice_eps(self: BRR, value: int, rng: Randomness) -> int:
    value = self.check_value(value)
    e = math.exp(2 * self.epsilon)
    return value if rng.random() < e / (e + 1) else 1 - value


class TestEventMetrics:
    """An event metric is audited through its windows: many windows of one event stream, each
    aggregating to the audited value, through event()/observe() and the recorder's window
    path. At 20,000 windows per input the real brr's bound is near 0.95 (SD about 0.014), so
    ">= 0.8" fails only beyond 10 SD; a brr truthful as for 2 eps has log-ratio 2, caught far
    beyond any seed's reach."""

    def test_the_reports_are_one_per_window_of_the_stream(self) -> None:
        spec = MetricSpec.boolean("used", epsilon=1.0).with_events("any", window=7)
        body = window_reports(spec, True, 30)
        reports = json.loads(body)["reports"]
        labels = [r["period"] for r in reports]
        assert len(reports) == 30 and len(set(labels)) == 30
        assert labels[0] == "2000-01-09"  # the first whole 7-day window after the spec arrived
        weekly = MetricSpec.histogram("c", [0, 1, 2, 5], epsilon=1.0, period="week")
        labels = [
            r["period"]
            for r in json.loads(window_reports(weekly.with_events("count"), 3, 4))["reports"]
        ]
        assert labels == ["2000-W01", "2000-W02", "2000-W03", "2000-W04"]

    def test_a_value_no_window_holds_is_refused(self) -> None:
        spec = MetricSpec.histogram("c", [0, 1, 2, 5], epsilon=1.0).with_events("count")
        with pytest.raises(InvalidInput, match="whole number"):
            window_reports(spec, 1.5, 10)

    def test_the_inputs_are_values_a_window_reaches(self) -> None:
        counted = MetricSpec.histogram("c", [0, 0.2, 0.6, 5], epsilon=1.0).with_events("count")
        # the buckets' inputs are 0, 0.2 and 5 (the last by its upper edge); no count lies in
        # [0.2, 0.6), so that bucket is left out
        assert [v for v, _ in sampled_inputs(counted)] == [0.0, 5.0]
        mean = MetricSpec.numeric("n", lower=0, upper=10, epsilon=1.0).with_events("count")
        assert [v for v, _ in sampled_inputs(mean)] == [0.0, 2.0, 5.0, 8.0, 10.0]
        median = MetricSpec.numeric("m", lower=0, upper=1024, epsilon=1.0).with_events("median")
        assert [v for v, _ in sampled_inputs(median)] == [0.5, 256.5, 512.5, 768.5, 1023.5]
        plain = MetricSpec.boolean("b", epsilon=1.0)
        assert sampled_inputs(plain) == audit_inputs(plain)

    def test_an_honest_event_metric_passes(self) -> None:
        for spec in (
            MetricSpec.boolean("used", epsilon=1.0).with_events("any", window=7),
            MetricSpec.histogram(
                "crashes", [0, 1, 2, 3, 5, 10], epsilon=1.0, mechanism="krr"
            ).with_events("count"),
        ):
            result = _audit(spec, samples=20_000 if spec.k == 2 else 4_000)
            assert result.verdict == "pass", result
            if spec.k == 2:
                assert 0.8 <= result.lower_bound <= 1.0

    def test_a_dishonest_randomizer_behind_the_windows_fails(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(BRR, "randomize", _brr_as_for_twice_eps)
        result = _audit(
            MetricSpec.boolean("used", epsilon=1.0).with_events("any", window=7), samples=20_000
        )
        assert result.verdict == "fail" and result.lower_bound > result.epsilon, result
