"""Monte Carlo checks of the estimators (STATS.md section 8), on simulated sufficient statistics.

Every reporter's true value is drawn from f (the super-population estimand), then each class's
reports are randomized as the mechanism does: k-ary RR as a multinomial per class over the row
P(. | x), unary encoding and local hashing as Bin(n_x, p*) + Bin(n - n_x, q*) per category
(exact for each category's count; for olh the joint law of several counts is only approximately
independent, so olh is not used for joint coverage).

False-failure budget: this file spends 5e-5 of the suite's 1e-4 over at most CHECKS = 100
statistical checks, so each uses a_i = 5e-7 (two-sided z = 5.03):

* bias: |mean - f| / (sigma / sqrt R) <= 5.03, R = 20,000, detecting a bias of 0.05 sigma;
* variance: s^2 / sigma^2 within 1 +/- z sqrt(2/(R-1) + kurtosis/R), about [0.950, 1.050];
* coverage: M = 20,000 intervals, four times the issue's 5,000, with its pass mark 4,691/5,000
  kept: fail below 18,764 (93.82%). At a true coverage of 95% that fails with probability
  6e-14, at 94.5% 1.6e-5; against 93% the power is 1 - 2e-6. At f = 0.5 where
  n min(lam, 1 - lam) >= 20, also fail above binom.isf(a_i, M, 0.97) = 19,514 (97.6%): the
  intervals must not be wastefully wide.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from deniable.client.mechanisms import BRR, KRR, OLH, OUE, Mechanism
from deniable.estimators import PeriodCounts, estimate
from deniable.estimators.intervals import per_category_alpha, unit_interval
from deniable.estimators.pooling import debias, pool

CHECKS = 100
ALPHA_I = 5e-5 / CHECKS
Z_CRIT = float(stats.norm.isf(ALPHA_I / 2))
R = 20_000
M = 20_000
COVER_LOW = 4_691 * M // 5_000
COVER_HIGH = int(stats.binom.isf(ALPHA_I, M, 0.97))
EPS = 1.0
MECHANISMS = [BRR(2, EPS), KRR(4, EPS), OUE(8, EPS), OLH(8, EPS)]


def simulate(
    mechanism: Mechanism,
    f: np.ndarray,
    n: int,
    reps: int,
    rng: np.random.Generator,
    fixed: bool = False,
) -> np.ndarray:
    """Support counts (reps, k): SP draws class sizes from f; ``fixed`` uses n f exactly (FP)."""
    k = mechanism.k
    p, q = mechanism.p_star, mechanism.q_star
    if fixed:
        sizes = np.broadcast_to(np.rint(n * f).astype(np.int64), (reps, k))
        assert sizes[0].sum() == n
    else:
        sizes = rng.multinomial(n, f, size=reps)
    if isinstance(mechanism, KRR):
        counts = np.zeros((reps, k), dtype=np.int64)
        for x in range(k):
            row = np.full(k, q)
            row[x] = p
            counts += rng.multinomial(sizes[:, x], row / row.sum())
        return counts
    return rng.binomial(sizes, p) + rng.binomial(n - sizes, q)


def intervals(
    mechanism: Mechanism, counts: np.ndarray, n: int, confidence: float, simultaneous: bool
):
    """Intervals within [0, 1] for every replicate via the estimator's own code (T = 1)."""
    alpha = per_category_alpha(confidence, mechanism.k, simultaneous)
    pooled = pool(
        mechanism, np.full((len(counts), 1), n), counts[:, None, :], alpha, "overlap-safe"
    )
    return unit_interval(pooled.low, pooled.high)


def shares(mechanism: Mechanism) -> list[np.ndarray]:
    """Share vectors in which 0, 0.01, 0.5 and 0.99 all occur."""
    k = mechanism.k
    if k == 2:
        return [np.array([1 - t, t]) for t in (0.0, 0.01, 0.5, 0.99)]
    a = np.zeros(k)
    a[:2] = (0.99, 0.01)
    b = np.zeros(k)
    b[:3] = (0.5, 0.3, 0.2)
    return [a, b]


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng([20261122, *(ord(c) for c in repr(key))])


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
@pytest.mark.parametrize("n", [50, 10_000])
def test_coverage_of_95_percent_intervals(mechanism: Mechanism, n: int) -> None:
    p, q = mechanism.p_star, mechanism.q_star
    checked: set[float] = set()
    for f in shares(mechanism):
        counts = simulate(mechanism, f, n, M, _rng("cover", mechanism, n, tuple(f)))
        low, high = intervals(mechanism, counts, n, 0.95, False)
        covered = ((low <= f) & (f <= high)).sum(axis=0)
        first = 1 if mechanism.k == 2 else 0  # brr: the "true" row (false is its mirror)
        for v in range(first, mechanism.k):
            target = round(float(f[v]), 2)
            if target not in (0.0, 0.01, 0.5, 0.99) or target in checked:
                continue
            checked.add(target)
            assert covered[v] >= COVER_LOW, (target, covered[v])
            lam = q + (p - q) * f[v]
            if target == 0.5 and n * min(lam, 1 - lam) >= 20:
                assert covered[v] <= COVER_HIGH, (target, covered[v])
    assert checked == {0.0, 0.01, 0.5, 0.99}


@pytest.mark.parametrize("mechanism", MECHANISMS[:3], ids=repr)
@pytest.mark.parametrize("n", [50, 10_000])
def test_simultaneous_intervals_cover_jointly(mechanism: Mechanism, n: int) -> None:
    f = shares(mechanism)[-1]
    counts = simulate(mechanism, f, n, M, _rng("joint", mechanism, n))
    low, high = intervals(mechanism, counts, n, 0.95, True)
    joint = ((low <= f) & (f <= high)).all(axis=1).sum()
    assert joint >= COVER_LOW


def _sp_sigma(mechanism: Mechanism, f: np.ndarray, n: int) -> np.ndarray:
    p, q = mechanism.p_star, mechanism.q_star
    lam = q + (p - q) * f
    return np.sqrt(lam * (1 - lam) / n) / (p - q)


def _variance_band(kurtosis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = Z_CRIT * np.sqrt(2 / (R - 1) + kurtosis / R)
    return 1 - half, 1 + half


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
def test_no_bias_and_super_population_variance(mechanism: Mechanism) -> None:
    n = 10_000
    f = shares(mechanism)[-1]
    est = debias(mechanism, simulate(mechanism, f, n, R, _rng("bias", mechanism)), n)
    sigma = _sp_sigma(mechanism, f, n)
    rows = slice(1, 2) if mechanism.k == 2 else slice(None)
    z = (est.mean(axis=0) - f) / (sigma / math.sqrt(R))
    assert np.abs(z[rows]).max() <= Z_CRIT
    p, q = mechanism.p_star, mechanism.q_star
    lam = q + (p - q) * f
    kurtosis = (1 - 6 * lam * (1 - lam)) / (n * lam * (1 - lam))
    ratio = est.var(axis=0, ddof=1) / sigma**2
    low, high = _variance_band(kurtosis)
    assert ((low <= ratio) & (ratio <= high))[rows].all(), ratio


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
def test_fixed_population_variance_is_the_mechanisms_formula(mechanism: Mechanism) -> None:
    n = 10_000
    f = shares(mechanism)[-1]
    est = debias(mechanism, simulate(mechanism, f, n, R, _rng("fp", mechanism), fixed=True), n)
    theory = np.array([mechanism.variance(float(fv), n) for fv in f[:2]])
    ratio = est[:, :2].var(axis=0, ddof=1) / theory
    low, high = _variance_band(np.zeros(2))  # near-normal: n lam(1-lam) is in the hundreds
    assert ((low <= ratio) & (ratio <= high)).all(), ratio


@pytest.mark.parametrize("mechanism", [KRR(4, EPS), OUE(8, EPS)], ids=repr)
def test_covariance_of_two_categories(mechanism: Mechanism) -> None:
    """atanh(r) ~ N(atanh(rho), 1/(R-3)); rho from Cov_SP (STATS.md sections 2 and 3)."""
    n = 10_000
    f = shares(mechanism)[-1]
    est = debias(mechanism, simulate(mechanism, f, n, R, _rng("cov", mechanism)), n)
    p, q = mechanism.p_star, mechanism.q_star
    lam = q + (p - q) * f
    krr = isinstance(mechanism, KRR)
    cov = -lam[0] * lam[1] / (n * (p - q) ** 2) if krr else -f[0] * f[1] / n
    sigma = _sp_sigma(mechanism, f, n)
    rho = cov / (sigma[0] * sigma[1])
    r = np.corrcoef(est[:, 0], est[:, 1])[0, 1]
    assert abs(math.atanh(r) - math.atanh(rho)) * math.sqrt(R - 3) <= Z_CRIT


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
def test_public_estimate_agrees_with_the_vectorized_path(mechanism: Mechanism) -> None:
    f = shares(mechanism)[-1]
    counts = simulate(mechanism, f, 50, 25, _rng("agree", mechanism))
    low, high = intervals(mechanism, counts, 50, 0.9, True)
    cats = [str(v) for v in range(mechanism.k)]
    for i, row in enumerate(counts):
        got = estimate(
            mechanism, cats, PeriodCounts("p", 50, row), confidence=0.9, simultaneous=True
        )
        assert [r.ci_low for r in got.estimates] == low[i].tolist()
        assert [r.ci_high for r in got.estimates] == high[i].tolist()
