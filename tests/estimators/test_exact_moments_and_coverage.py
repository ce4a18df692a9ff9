"""Exact estimator checks (STATS.md section 8): deterministic, no false failures.

(a) expected counts give back f; (c) exhaustive enumeration of every outcome at tiny n gives
E, Var and Cov equal to the formulas, both for a fixed population (FP) and for iid reporters
(SP, the estimand deniable reports); (d) exact coverage of the intervals from the binomial pmf.
The per-report output distributions are read off the randomizers themselves
(``testkit.transitions.transition``), not restated.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from deniable.client.mechanisms import BRR, KRR, OLH, OUE, Mechanism
from deniable.estimators import PeriodCounts, estimate
from deniable.estimators.intervals import (
    CP_BELOW,
    clopper_pearson,
    normal_quantile,
    rate_interval,
)
from deniable.estimators.pooling import debias, std_error
from testkit.transitions import olh_exact_q, transition

ALL = [BRR(2, 1.0), KRR(3, 0.5), KRR(10, 2.0), OUE(4, 1.0), OUE(20, 0.3), OLH(6, 1.5), OLH(50, 3.0)]


def _shares(k: int) -> list[np.ndarray]:
    ramp = np.arange(1, k + 1, dtype=float)
    return [
        np.eye(k)[0],
        np.full(k, 1.0 / k),
        ramp / ramp.sum(),
        np.r_[0.0, np.full(k - 1, 1 / (k - 1))],
    ]


@pytest.mark.parametrize("mechanism", ALL, ids=repr)
@pytest.mark.parametrize("n", [1, 7, 1000, 10**9])
def test_expected_counts_give_back_f(mechanism: Mechanism, n: int) -> None:
    p, q = mechanism.p_star, mechanism.q_star
    for f in _shares(mechanism.k):
        expected = n * (q + (p - q) * f)
        assert np.abs(debias(mechanism, expected, n) - f).max() < 1e-12


@pytest.mark.parametrize("k", [2, 3, 10])
def test_krr_unbiased_estimates_sum_to_one(k: int) -> None:
    rng = np.random.default_rng(20261122)
    mechanism = KRR(k, 1.0)
    for n in (1, 2, 17, 5000):
        counts = rng.multinomial(n, np.full(k, 1 / k))
        result = estimate(mechanism, [str(i) for i in range(k)], PeriodCounts("p", n, counts))
        assert abs(sum(r.unbiased for r in result.estimates) - 1.0) < 1e-12


def _support_distribution(mechanism: Mechanism, row: dict) -> dict[tuple, float]:
    out: dict[tuple, float] = defaultdict(float)
    for payload, prob in row.items():
        supported = set(mechanism.supported(mechanism.parse_payload(payload)))
        out[tuple(int(v in supported) for v in range(mechanism.k))] += prob
    return out


def _convolve(reports: list[dict[tuple, float]]) -> dict[tuple, float]:
    """The exact distribution of the support-count vector: every combination of outputs."""
    dist: dict[tuple, float] = {tuple([0] * len(next(iter(reports[0])))): 1.0}
    for report in reports:
        nxt: dict[tuple, float] = defaultdict(float)
        for counts, p in dist.items():
            for support, r in report.items():
                nxt[tuple(c + s for c, s in zip(counts, support, strict=True))] += p * r
        dist = nxt
    return dist


def _moments(mechanism: Mechanism, dist: dict[tuple, float], n: int):
    counts = np.array(list(dist), dtype=float)
    probs = np.array(list(dist.values()))
    est = debias(mechanism, counts, n)
    mean = probs @ est
    centred = est - mean
    cov = (centred * probs[:, None]).T @ centred
    se2 = probs @ (std_error(mechanism, counts, n) ** 2)
    return mean, cov, se2


ENUMERATED = [BRR(2, 1.0), KRR(2, 0.7), KRR(3, 1.0), KRR(4, 0.4), OUE(3, 1.0), OUE(4, 0.6)]


@pytest.mark.parametrize("mechanism", ENUMERATED, ids=repr)
@pytest.mark.parametrize("values", [[0], [0, 1, 1], [1, 0, 2, 0, 3, 1], [0, 0, 0, 0, 0]])
def test_fixed_population_enumeration_matches_the_formulas(mechanism: Mechanism, values) -> None:
    k = mechanism.k
    values = [v % k for v in values]
    n = len(values)
    rows = [_support_distribution(mechanism, row) for row in transition(mechanism)]
    mean, cov, _ = _moments(mechanism, _convolve([rows[x] for x in values]), n)
    f = np.bincount(values, minlength=k) / n
    p, q = mechanism.p_star, mechanism.q_star
    assert np.abs(mean - f).max() < 1e-12
    for v in range(k):
        assert abs(cov[v, v] - mechanism.variance(f[v], n)) < 1e-12
        for w in range(k):
            if w == v:
                continue
            if isinstance(mechanism, KRR):  # STATS.md section 2, Cov_FP
                expected = -(q**2 + (f[v] + f[w]) * q * (p - q)) / (n * (p - q) ** 2)
            else:  # unary encoding: independent bits
                expected = 0.0
            assert abs(cov[v, w] - expected) < 1e-12


@pytest.mark.parametrize("mechanism", ENUMERATED, ids=repr)
@pytest.mark.parametrize("n", [2, 4, 6])
def test_super_population_enumeration_matches_the_formulas(mechanism: Mechanism, n: int) -> None:
    k = mechanism.k
    f = np.arange(1, k + 1, dtype=float)
    f /= f.sum()
    rows = [_support_distribution(mechanism, row) for row in transition(mechanism)]
    mixed: dict[tuple, float] = defaultdict(float)
    for x, row in enumerate(rows):
        for support, prob in row.items():
            mixed[support] += f[x] * prob
    mean, cov, se2 = _moments(mechanism, _convolve([mixed] * n), n)
    p, q = mechanism.p_star, mechanism.q_star
    lam = q + (p - q) * f
    var_sp = lam * (1 - lam) / (n * (p - q) ** 2)
    assert np.abs(mean - f).max() < 1e-12
    assert np.abs(np.diag(cov) - var_sp).max() < 1e-12
    # Var_SP = Var_FP + f(1-f)/n (STATS.md, estimand) and the plug-in SE^2 is unbiased for it.
    fp = np.array([mechanism.variance(fv, n) for fv in f])
    assert np.abs(var_sp - (fp + f * (1 - f) / n)).max() < 1e-12
    assert np.abs(se2 - var_sp).max() < 1e-12
    for v in range(k):
        for w in range(k):
            if v != w:
                if isinstance(mechanism, KRR):
                    expected = -lam[v] * lam[w] / (n * (p - q) ** 2)
                else:
                    expected = -f[v] * f[w] / n
                assert abs(cov[v, w] - expected) < 1e-12


@pytest.mark.parametrize("mechanism", [OLH(3, 1.0), OLH(4, 2.0)], ids=repr)
@pytest.mark.parametrize("values", [[0], [0, 1, 1], [1, 0, 2, 0, 2, 1]])
def test_olh_enumeration_matches_the_formulas_within_the_hash_bias(mechanism: OLH, values) -> None:
    """Per category, C_v sums independent reports that support v w.p. p* (x = v) or the exact
    seed-averaged rate (x != v); its law is enumerated exactly. The joint law of several counts
    depends on 3-way hash collisions and is not enumerated; only the 1e-8 hash bias separates
    the result from the formulas (DESIGN.md, the OLH hash)."""
    n, q_exact = len(values), olh_exact_q(mechanism)
    f = np.bincount(values, minlength=mechanism.k) / n
    for v in range(mechanism.k):
        rows = [{(1,): mechanism.p_star if x == v else q_exact} for x in values]
        for row in rows:
            row[(0,)] = 1 - row[(1,)]
        dist = _convolve(rows)
        counts = np.array(list(dist), dtype=float)[:, 0]
        probs = np.array(list(dist.values()))
        est = debias(mechanism, counts, n)
        mean = probs @ est
        variance = probs @ (est - mean) ** 2
        assert abs(mean - f[v]) < 1e-8
        assert abs(variance - mechanism.variance(f[v], n)) < 1e-8


def _coverage(n: int, alpha: float, lams: np.ndarray) -> np.ndarray:
    """Exact coverage at each rate: the covered counts form a range because both ends rise with C."""
    c = np.arange(n + 1)
    lo, hi = rate_interval(c, np.float64(n), alpha)
    assert (np.diff(lo) >= 0).all() and (np.diff(hi) >= 0).all()
    first = np.searchsorted(hi, lams, side="left")  # smallest C with hi(C) >= lam
    last = np.searchsorted(lo, lams, side="right") - 1  # largest C with lo(C) <= lam
    return stats.binom.cdf(last, n, lams) - stats.binom.cdf(first - 1, n, lams)


def _grid(n: int) -> np.ndarray:
    return np.unique(np.r_[np.linspace(1e-6, 1 - 1e-6, 20_001), 1 / n, 1 - 1 / n, 0.5])


@pytest.mark.parametrize("n", [1, 2, 5, 20, 50, 2 * CP_BELOW - 1])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99, 1 - 0.05 / 64])
def test_small_samples_have_exact_coverage(n: int, confidence: float) -> None:
    """Below 2 * CP_BELOW reports every interval includes Clopper-Pearson: coverage >= 1 - a."""
    assert _coverage(n, 1 - confidence, _grid(n)).min() >= confidence - 1e-12


@pytest.mark.parametrize("n", [100, 300, 1000, 10_000])
@pytest.mark.parametrize(("confidence", "floor"), [(0.95, 0.94), (0.99, 0.985)])
def test_large_samples_meet_the_documented_floor(n: int, confidence: float, floor: float) -> None:
    """Above that, Wilson's coverage oscillates; intervals.py documents this floor."""
    assert _coverage(n, 1 - confidence, _grid(n)).min() >= floor


@pytest.mark.parametrize("n", [20, 60, 500])
def test_interval_contains_both_wilson_and_clopper_pearson_where_counts_are_small(n: int) -> None:
    c = np.arange(n + 1, dtype=float)
    lo, hi = rate_interval(c, np.float64(n), 0.05)
    cp_lo, cp_hi = clopper_pearson(c, np.full(n + 1, float(n)), 0.05)
    small = np.minimum(c, n - c) < CP_BELOW
    assert (lo[small] <= cp_lo[small] + 1e-15).all() and (hi[small] >= cp_hi[small] - 1e-15).all()
    z2 = stats.norm.isf(0.025) ** 2
    centre = (c + z2 / 2) / (n + z2)
    half = math.sqrt(z2) / (n + z2) * np.sqrt(c * (n - c) / n + z2 / 4)
    assert (lo <= centre - half + 1e-15).all() and (hi >= centre + half - 1e-15).all()


def test_normal_quantile_is_scipys_norm_isf_bit_for_bit() -> None:
    """The shortcut the intervals use must be the reference quantile, not an approximation:
    every Bonferroni level a breakdown can ask (up to 1,000 slices of 1,000 categories)."""
    alphas = np.concatenate(
        [np.geomspace(1e-12, 0.999, 2000), 0.05 / np.arange(1, 10**6, 997), [0.05, 0.01, 0.1]]
    )
    for alpha in alphas:
        assert normal_quantile(float(alpha)) == float(stats.norm.isf(alpha / 2))


def test_clopper_pearson_is_scipys_beta_quantiles_bit_for_bit() -> None:
    """The special functions the exact interval calls must give what ``scipy.stats.beta``'s
    ppf and isf give, bit for bit, at every Bonferroni level up to 1,000 categories: counts
    from 0 to n (the small ones the hull uses most) and n up to 10^7."""
    rng = np.random.default_rng(20261205)
    n = rng.integers(1, 10**7, size=4000).astype(np.float64)
    counts = np.where(
        rng.random(4000) < 0.5,
        np.minimum(np.floor(rng.random(4000) * 60), n),
        np.floor(rng.random(4000) ** 3 * (n + 1)).clip(0, n),
    )
    for alpha in (0.05, 0.01, 0.05 / 100, 0.01 / 1000, 0.1 / 7):
        low, high = clopper_pearson(counts, n, alpha)
        c, m = counts, n
        want_low = np.where(c > 0, stats.beta.ppf(alpha / 2, np.maximum(c, 1.0), m - c + 1), 0.0)
        want_high = np.where(c < m, stats.beta.isf(alpha / 2, c + 1, np.maximum(m - c, 1.0)), 1.0)
        assert low.tobytes() == want_low.tobytes() and high.tobytes() == want_high.tobytes()


def test_estimate_rows_equal_the_elementwise_reference() -> None:
    """The rows are built from whole arrays; each field equals its per-element computation."""
    mechanism = OUE(20, 0.7)
    rng = np.random.default_rng(20261126)
    n = rng.integers(30, 400, size=5)
    counts = rng.binomial(n[:, None], mechanism.q_star + 0.02, size=(5, 20))
    periods = [PeriodCounts(f"p{t}", int(n[t]), counts[t].tolist()) for t in range(5)]
    result = estimate(mechanism, [f"c{i}" for i in range(20)], periods, simultaneous=True)
    p, q = mechanism.p_star, mechanism.q_star
    unbiased = (counts.sum(axis=0) / n.sum() - q) / (p - q)
    for i, row in enumerate(result.estimates):
        assert type(row.frequency) is float and type(row.ci_low) is float
        assert row.unbiased == float(unbiased[i])
        assert row.count == float(np.float64(row.frequency) * int(n.sum()))
        assert row.clipped == bool(unbiased[i] < 0.0 or unbiased[i] > 1.0)
        assert row.ci_low <= row.frequency <= row.ci_high


@pytest.mark.parametrize("mechanism", [BRR(2, 1.0), BRR(2, 4.0)], ids=repr)
@pytest.mark.parametrize("n", [1, 20, 60])
def test_public_estimate_has_exact_coverage_at_small_n(mechanism: BRR, n: int) -> None:
    """Through estimate() itself: sum over every count C of P(C) 1{f in interval(C)} >= 95%."""
    p, q = mechanism.p_star, mechanism.q_star
    intervals = []
    for c in range(n + 1):
        row = estimate(mechanism, ["false", "true"], PeriodCounts("d", n, [n - c, c])).estimates[1]
        intervals.append((row.ci_low, row.ci_high))
    for f in (0.0, 1 / n, 0.3, 0.5, 1.0):
        pmf = stats.binom.pmf(np.arange(n + 1), n, q + (p - q) * f)
        covered = sum(pr for pr, (lo, hi) in zip(pmf, intervals, strict=True) if lo <= f <= hi)
        assert covered >= 0.95 - 1e-12
