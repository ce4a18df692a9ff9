"""``consistent`` and ``mle``: on the simplex, truly optimal, and better than ``unbiased`` where they should be.

Statistical checks here (3: the MLE squared-error comparisons) spend 1e-5 of the suite's 1e-4
budget; everything else is a deterministic property (projection, KKT optimality, likelihood).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from deniable.client.mechanisms import KRR, OLH, OUE, Mechanism
from deniable.client.randomness import SeededRandomness
from deniable.estimators import PeriodCounts, estimate, estimate_reports, support_matrix
from deniable.estimators.consistency import composite_mle, ibu, krr_mle, norm_sub
from deniable.estimators.intervals import intersect_simplex
from deniable.estimators.pooling import debias

Z_CRIT = float(stats.norm.isf(1e-5 / 3))  # one-sided, 3 checks


def test_norm_sub_is_the_euclidean_projection_onto_the_simplex() -> None:
    rng = np.random.default_rng(1)
    for k in (2, 3, 10, 64):
        for _ in range(200):
            f = rng.normal(1 / k, 0.3, k)
            proj = norm_sub(f)
            assert (proj >= 0).all() and abs(proj.sum() - 1) < 1e-12
            shift = proj - f
            positive = proj > 0
            assert np.ptp(shift[positive]) < 1e-12  # one common shift delta on the support
            assert (f[~positive] + shift[positive][0] <= 1e-12).all()  # the rest clipped at 0
            y = rng.dirichlet(np.ones(k))  # any point of the simplex is at least as close
            assert np.sum((proj - y) ** 2) <= np.sum((f - y) ** 2) + 1e-12


def _krr_loglik(mechanism: Mechanism, counts: np.ndarray, f: np.ndarray) -> float:
    p, q = mechanism.p_star, mechanism.q_star
    return float(counts @ np.log(q + (p - q) * f))


def _composite_loglik(mechanism: Mechanism, counts: np.ndarray, n: int, f: np.ndarray) -> float:
    p, q = mechanism.p_star, mechanism.q_star
    lam = q + (p - q) * f
    return float(counts @ np.log(lam) + (n - counts) @ np.log1p(-lam))


def _perturbations(f: np.ndarray, rng: np.random.Generator, count: int = 300):
    k = len(f)
    for _ in range(count):
        y = rng.dirichlet(np.ones(k))
        for t in (1e-6, 1e-3, 0.1):
            yield (1 - t) * f + t * y


@pytest.mark.parametrize("k", [2, 3, 8, 64])
def test_krr_mle_maximizes_the_multinomial_likelihood_and_equals_ibu(k: int) -> None:
    rng = np.random.default_rng(k)
    m = KRR(k, 0.5)
    f = rng.dirichlet(np.full(k, 0.3))
    lam = m.q_star + (m.p_star - m.q_star) * f
    counts = rng.multinomial(2000, lam)
    mle = krr_mle(m, counts)
    assert (mle >= 0).all() and abs(mle.sum() - 1) < 1e-12
    best = _krr_loglik(m, counts, mle)
    for other in _perturbations(mle, rng):
        assert _krr_loglik(m, counts, other) <= best + 1e-9
    # k-ary RR has the IBU form with ratio p/q = e^eps on one-hot supports (STATS.md section 4)
    one_hot = np.eye(k, dtype=bool)
    em = ibu(
        one_hot, counts.astype(float), m.p_star / m.q_star, max_iterations=200_000, tolerance=1e-10
    )
    assert np.abs(em - mle).max() < 1e-5


@pytest.mark.parametrize("mechanism", [OUE(8, 1.0), OUE(64, 0.5), OLH(16, 1.0)], ids=repr)
def test_composite_mle_maximizes_the_composite_likelihood(mechanism: Mechanism) -> None:
    rng = np.random.default_rng(mechanism.k)
    n = 3000
    f = rng.dirichlet(np.full(mechanism.k, 0.3))
    lam = mechanism.q_star + (mechanism.p_star - mechanism.q_star) * f
    counts = rng.binomial(n, lam)
    mle = composite_mle(mechanism, counts, n)
    assert (mle >= 0).all() and abs(mle.sum() - 1) < 1e-12
    best = _composite_loglik(mechanism, counts, n, mle)
    for other in _perturbations(mle, rng):
        assert _composite_loglik(mechanism, counts, n, other) <= best + 1e-9


def _exact_loglik(mechanism: Mechanism, support: np.ndarray, f: np.ndarray) -> float:
    """log P(reports | f) up to a constant: sum_i log(1 + (e^eps - 1) sum_{v in S_i} f_v)."""
    p, q = mechanism.p_star, mechanism.q_star
    ratio = p * (1 - q) / (q * (1 - p))
    return float(np.log1p((ratio - 1) * (support @ f)).sum())


@pytest.mark.parametrize("mechanism", [OUE(6, 1.0), OLH(6, 1.0)], ids=repr)
def test_mle_from_raw_reports_is_the_exact_likelihood_maximum(mechanism: Mechanism) -> None:
    rng = SeededRandomness(17)
    truth = [0, 0, 0, 1, 1, 2]
    payloads = [mechanism.randomize(truth[i % 6], rng) for i in range(3000)]
    table = {"id": [str(i) for i in range(3000)], "period": ["2026-11-21"] * 3000}
    if isinstance(mechanism, OLH):
        table |= {key: [p[key] for p in payloads] for key in ("a", "b", "y")}
    else:
        table["payload"] = payloads
    cats = [str(v) for v in range(mechanism.k)]
    result = estimate_reports(mechanism, cats, pl.DataFrame(table), method="mle")
    exact = np.array([r.frequency for r in result.estimates])
    assert (exact >= 0).all() and abs(exact.sum() - 1) < 1e-9
    support = support_matrix(mechanism, payloads)
    best = _exact_loglik(mechanism, support, exact)
    composite = composite_mle(mechanism, support.sum(axis=0), 3000)
    assert _exact_loglik(mechanism, support, composite) <= best + 1e-6
    for other in _perturbations(exact, np.random.default_rng(3), 100):
        assert _exact_loglik(mechanism, support, other) <= best + 1e-6


def _zipf(k: int) -> np.ndarray:
    f = 1 / np.arange(1, k + 1) ** 1.1
    f[k // 2 :] = 0
    return f / f.sum()


@pytest.mark.parametrize("mechanism", [KRR(64, 0.5), OUE(64, 0.5), OLH(64, 0.5)], ids=repr)
def test_consistent_and_mle_beat_unbiased_at_eps_half_k_64(mechanism: Mechanism) -> None:
    rng = np.random.default_rng(64)
    k, n, reps = 64, 10_000, 200
    f = _zipf(k)
    p, q = mechanism.p_star, mechanism.q_star
    cats = [str(v) for v in range(k)]
    sse = {method: [] for method in ("unbiased", "consistent", "mle")}
    for _ in range(reps):
        sizes = rng.multinomial(n, f)
        if isinstance(mechanism, KRR):
            counts = sum(
                rng.multinomial(sizes[x], np.where(np.arange(k) == x, p, q)) for x in range(k)
            )
        else:
            counts = rng.binomial(sizes, p) + rng.binomial(n - sizes, q)
        for method in sse:
            got = estimate(mechanism, cats, PeriodCounts("d", n, counts), method=method)
            est = np.array([r.frequency for r in got.estimates])
            if method != "unbiased":
                assert (est >= 0).all() and abs(est.sum() - 1) < 1e-9
                assert all(r.std_error is None for r in got.estimates)
            sse[method].append(float(np.sum((est - f) ** 2)))
    unbiased = np.array(sse["unbiased"])
    # Norm-Sub is non-expansive: never worse, sample by sample.
    assert (np.array(sse["consistent"]) <= unbiased + 1e-12).all()
    assert np.mean(sse["consistent"]) < np.mean(unbiased)
    gain = unbiased - np.array(sse["mle"])
    assert gain.mean() / (gain.std(ddof=1) / math.sqrt(reps)) > Z_CRIT


def test_simplex_intersection_never_drops_a_covered_point() -> None:
    rng = np.random.default_rng(5)
    for _ in range(2000):
        k = int(rng.integers(2, 12))
        f = rng.dirichlet(np.full(k, 0.5))
        low = np.clip(f - rng.exponential(0.1, k), 0, 1)
        high = np.clip(f + rng.exponential(0.1, k), 0, 1)
        new_low, new_high = intersect_simplex(low, high)
        assert (new_low >= low - 1e-15).all() and (new_high <= high + 1e-15).all()
        assert (new_low <= f + 1e-12).all() and (f <= new_high + 1e-12).all()


@pytest.mark.parametrize("method", ["consistent", "mle"])
@pytest.mark.parametrize("simultaneous", [False, True])
def test_post_processed_intervals_are_the_unbiased_ones_within_the_simplex(
    method: str, simultaneous: bool
) -> None:
    m = KRR(6, 1.0)
    cats = [str(v) for v in range(6)]
    period = PeriodCounts("d", 400, [150, 90, 60, 40, 35, 25])
    base = estimate(m, cats, period, simultaneous=simultaneous)
    post = estimate(m, cats, period, method=method, simultaneous=simultaneous)
    low = np.array([r.ci_low for r in base.estimates])
    high = np.array([r.ci_high for r in base.estimates])
    if simultaneous:
        low, high = intersect_simplex(low, high)
    point = np.array([r.frequency for r in post.estimates])
    assert [r.ci_low for r in post.estimates] == np.minimum(low, point).tolist()
    assert [r.ci_high for r in post.estimates] == np.maximum(high, point).tolist()
    assert post.to_dict()["method"] == method


def test_unbiased_estimate_is_the_debiased_pooled_count() -> None:
    m = OUE(5, 1.0)
    counts = np.array([30, 50, 20, 10, 44])
    got = estimate(m, list("abcde"), PeriodCounts("d", 100, counts))
    unbiased = debias(m, counts, 100)
    low, high = (
        np.array([getattr(r, key) for r in got.estimates]) for key in ("ci_low", "ci_high")
    )
    assert [r.unbiased for r in got.estimates] == unbiased.tolist()
    assert [r.frequency for r in got.estimates] == np.clip(unbiased, low, high).tolist()
    assert [r.clipped for r in got.estimates] == (unbiased < 0).tolist()
    assert [r.count for r in got.estimates] == [100 * r.frequency for r in got.estimates]
