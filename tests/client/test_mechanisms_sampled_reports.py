"""Sampled privacy checks: each randomizer end to end through its public ``randomize``
(STATS.md section 8).

Reports come from ``randomize`` with the injected ``SeededRandomness``; two tests per
mechanism: a chi-square goodness of fit of the reports against P(. | x) built from the
mechanism's own parameters, and the likelihood-ratio bound: for inputs x, x' and an output
(or output set) y, with counts a under x and b under x' of equal size, a ~ Bin(a + b, pi) and
H0: pi <= e^eps / (1 + e^eps); fail if binom.sf(a - 1, a + b, e^eps/(1+e^eps)) < a_i.
These only detect violations; the proof is the exact checks
(test_mechanisms_exact_transitions.py) plus review.

Budget: 2e-5 of the suite's 1e-4, half to the GOF tests and half to the ratio tests, each
split Bonferroni over its tests. Sizes keep this file near 20 s on the 2-core machine; the
power they buy at power 0.95 (noncentral chi-square for the fit, the normal approximation of
section 8 for the ratio, on the likeliest output where the bound is tight):

* brr eps=1, N = 1,000,000 per input: a 1.1% relative error in the flip probability r;
  a log-ratio excess of 0.016;
* krr k=10 eps=1, N = 500,000: a 2.0% relative error in p; log-ratio excess 0.041;
* oue k=4 eps=1, N = 500,000: a 1.2% relative error in the kept bit's p*; excess 0.045;
* olh k=6 eps=1, N = 500,000: a 1.1% relative error in p; excess 0.033 (conditional on
  (a, b): the output set {y = H(x), H(x) != H(x')}); a and b uniform in 64 bins each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from deniable.client.mechanisms import BRR, KRR, OLH, OLH_PRIME, OUE, Mechanism
from deniable.client.randomness import SeededRandomness
from deniable.estimators import support_matrix

BRR_1 = BRR(2, 1.0)
KRR_10 = KRR(10, 1.0)
OUE_4 = OUE(4, 1.0)
OLH_6 = OLH(6, 1.0)
SIZES = {BRR_1: 1_000_000, KRR_10: 500_000, OUE_4: 500_000, OLH_6: 500_000}

GOF_TESTS = 2 + 10 + 4 + (6 + 2) + 2  # per-input fits, olh's a/b uniformity, krr k=2 vs brr
RATIO_TESTS = 2 * 2 + 10 * 9 * 10 + 4 * 3 * 16 + 6 * 5
GOF_ALPHA = 1e-5 / GOF_TESTS
RATIO_ALPHA = 1e-5 / RATIO_TESTS


def _reports(mechanism: Mechanism, x: int, n: int, seed: int) -> list:
    rng = SeededRandomness(seed)
    randomize = mechanism.randomize
    return [randomize(x, rng) for _ in range(n)]


def _outcome_counts(mechanism: Mechanism, x: int, n: int) -> np.ndarray:
    """Counts of every possible report (krr: the index; oue: the bit pattern)."""
    payloads = _reports(mechanism, x, n, seed=1000 * mechanism.k + x)
    if isinstance(mechanism, KRR):
        return np.bincount(np.array(payloads), minlength=mechanism.k)
    bits = support_matrix(mechanism, payloads).astype(np.int64)
    return np.bincount(bits @ (1 << np.arange(mechanism.k)), minlength=2**mechanism.k)


def _model(mechanism: Mechanism, x: int) -> np.ndarray:
    """P(report | x) from the mechanism's own parameters."""
    k, p, q = mechanism.k, mechanism.p_star, mechanism.q_star
    if isinstance(mechanism, KRR):
        return np.where(np.arange(k) == x, p, q)
    patterns = (np.arange(2**k)[:, None] >> np.arange(k)) & 1
    bit = np.where(np.arange(k) == x, p, q)
    return np.prod(np.where(patterns == 1, bit, 1 - bit), axis=1)


def _gof_pvalue(observed: np.ndarray, expected_probs: np.ndarray) -> float:
    expected = expected_probs / expected_probs.sum() * observed.sum()
    return float(stats.chisquare(observed, expected).pvalue)


def _ratio_pvalues(a: np.ndarray, b: np.ndarray, epsilon: float) -> np.ndarray:
    """P-values of H0: P(y|x)/P(y|x') <= e^eps from counts a (under x) and b (under x')."""
    pi0 = math.exp(epsilon) / (1 + math.exp(epsilon))
    a, b = np.asarray(a), np.asarray(b)
    return np.where(a + b > 0, stats.binom.sf(a - 1, a + b, pi0), 1.0)


@pytest.fixture(scope="module")
def outcomes() -> dict[Mechanism, list[np.ndarray]]:
    return {
        m: [_outcome_counts(m, x, SIZES[m]) for x in range(m.k)] for m in (BRR_1, KRR_10, OUE_4)
    }


@pytest.mark.parametrize("mechanism", [BRR_1, KRR_10, OUE_4], ids=repr)
def test_reports_fit_the_transition_probabilities(mechanism: Mechanism, outcomes) -> None:
    for x, observed in enumerate(outcomes[mechanism]):
        assert _gof_pvalue(observed, _model(mechanism, x)) >= GOF_ALPHA, x


@pytest.mark.parametrize("mechanism", [BRR_1, KRR_10, OUE_4], ids=repr)
def test_no_output_is_more_than_e_eps_times_likelier_under_another_input(
    mechanism: Mechanism, outcomes
) -> None:
    counts = outcomes[mechanism]
    for x in range(mechanism.k):
        for other in range(mechanism.k):
            if other != x:
                pvalues = _ratio_pvalues(counts[x], counts[other], mechanism.epsilon)
                assert pvalues.min() >= RATIO_ALPHA, (x, other, int(pvalues.argmin()))


@pytest.fixture(scope="module")
def olh_reports() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    out = []
    for x in range(OLH_6.k):
        payloads = _reports(OLH_6, x, SIZES[OLH_6], seed=7000 + x)
        out.append(tuple(np.array([p[key] for p in payloads], dtype=np.int64) for key in "aby"))
    return out


def _olh_hash(a: np.ndarray, b: np.ndarray, v: int) -> np.ndarray:
    return ((a * v + b) % OLH_PRIME) % OLH_6.g


def test_olh_reports_fit_given_their_hash(olh_reports) -> None:
    g, p = OLH_6.g, OLH_6.p_star
    model = np.r_[p, np.full(g - 1, (1 - p) / (g - 1))]
    for x, (a, b, y) in enumerate(olh_reports):
        offset = (y - _olh_hash(a, b, x)) % g  # 0 when the true hash was kept
        assert _gof_pvalue(np.bincount(offset, minlength=g), model) >= GOF_ALPHA, x


def test_olh_seeds_are_uniform(olh_reports) -> None:
    a = np.concatenate([r[0] for r in olh_reports])
    b = np.concatenate([r[1] for r in olh_reports])
    a_bins = np.bincount(((a - 1) * 64) // (OLH_PRIME - 1), minlength=64)
    b_bins = np.bincount((b * 64) // OLH_PRIME, minlength=64)
    assert _gof_pvalue(a_bins, np.ones(64)) >= GOF_ALPHA
    assert _gof_pvalue(b_bins, np.ones(64)) >= GOF_ALPHA


def test_olh_ratio_bound_conditional_on_the_hash(olh_reports) -> None:
    """Output set E = {y = H(x), H(x) != H(x')}: P(E|x)/P(E|x') = p(g-1)/(1-p) = e^eps exactly."""
    for x in range(OLH_6.k):
        for other in range(OLH_6.k):
            if other == x:
                continue
            hits = []
            for source in (x, other):
                a, b, y = olh_reports[source]
                hx = _olh_hash(a, b, x)
                hits.append(int(((y == hx) & (hx != _olh_hash(a, b, other))).sum()))
            assert _ratio_pvalues(hits[0], hits[1], OLH_6.epsilon) >= RATIO_ALPHA, (x, other)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_krr_with_two_categories_reports_like_brr(epsilon: float) -> None:
    krr, brr = KRR(2, epsilon), BRR(2, epsilon)
    same_seed = [_reports(m, 1, 2000, seed=5) for m in (krr, brr)]
    assert same_seed[0] == same_seed[1]
    for x in (0, 1):
        ones = [sum(_reports(m, x, 100_000, seed=s)) for m, s in ((krr, 11 + x), (brr, 21 + x))]
        table = np.array([[c, 100_000 - c] for c in ones])
        assert stats.chi2_contingency(table).pvalue >= GOF_ALPHA
