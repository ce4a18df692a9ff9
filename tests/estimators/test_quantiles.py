"""Histogram quantiles (STATS.md section 10): the CDF's variance, inversion, and coverage.

Coverage: M = 5,000 trials of n = 1,000 reporters drawn from a skewed bucket distribution
(super-population), pass mark 4,691/5,000 per quantile and jointly (the band is simultaneous,
so the three intervals cover together at >= 95%). Support counts are drawn from their exact
laws: krr a multinomial per true bucket, oue independent binomials per bit and true bucket,
olh report by report with the wire hash (its counts are correlated across buckets, so a
binomial per bucket would not be exact).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from deniable.client.mechanisms import KRR, OLH, OLH_PRIME, OUE, Mechanism
from deniable.estimators import PeriodCounts, QuantileInterval, estimate_quantiles, quantile_bounds
from deniable.estimators.cdfvariance import variance_coefficients
from deniable.estimators.quantiles import pooled_band, quantile_intervals

M = 5_000
COVER_LOW = 4_691
EDGES = (0.0, 100.0, 250.0, 500.0, 1000.0, 5000.0)
SHARES = np.array([0.55, 0.25, 0.12, 0.06, 0.02])
QS = (0.5, 0.9, 0.99)


def test_krr_cdf_variance_by_exhaustive_enumeration() -> None:
    """n = 3, k = 3: every report sequence's F^_j; Var = Lam(1 - Lam)/(n (p - q)^2)."""
    mech, n = KRR(3, 1.0), 3
    f = np.array([0.5, 0.3, 0.2])
    p, q = mech.p_star, mech.q_star
    lam = q + (p - q) * f
    for j in (1, 2):
        mean = second = 0.0
        for ys in itertools.product(range(3), repeat=n):
            prob = math.prod(lam[y] for y in ys)
            est = (sum(y < j for y in ys) / n - j * q) / (p - q)
            mean += prob * est
            second += prob * est * est
        big = lam[:j].sum()
        assert mean == pytest.approx(f[:j].sum(), abs=1e-12)
        assert second - mean**2 == pytest.approx(big * (1 - big) / (n * (p - q) ** 2), abs=1e-12)


def test_oue_cdf_variance_by_exhaustive_enumeration() -> None:
    """n = 2, k = 3: every pair of bit vectors; Var = (a + b F - c F^2)/(n (p - q)^2), the
    bound of cdfvariance, which is exact for oue."""
    mech, n = OUE(3, 1.0), 2
    f = np.array([0.5, 0.3, 0.2])
    p, q = mech.p_star, mech.q_star
    one = {}
    for bits in itertools.product((0, 1), repeat=3):
        one[bits] = sum(
            f[x]
            * math.prod(
                (p if v == x else q) if b else 1 - (p if v == x else q) for v, b in enumerate(bits)
            )
            for x in range(3)
        )
    for j in (1, 2):
        mean = second = 0.0
        for pair in itertools.product(one, repeat=n):
            prob = math.prod(one[b] for b in pair)
            est = (sum(sum(b[:j]) for b in pair) / n - j * q) / (p - q)
            mean += prob * est
            second += prob * est * est
        a, b, c = variance_coefficients(mech)
        big = f[:j].sum()
        expected = (a[j - 1] + b[j - 1] * big - c * big**2) / (n * (p - q) ** 2)
        assert mean == pytest.approx(f[:j].sum(), abs=1e-12)
        assert second - mean**2 == pytest.approx(float(expected), abs=1e-12)


def test_inversion_on_constructed_bands() -> None:
    low = np.array([0.30, 0.60, 0.85, 0.95])
    high = np.array([0.45, 0.75, 0.90, 0.99])
    got = quantile_intervals(EDGES, low, high, (0.5, 0.9, 0.99, 0.2))
    assert got[0] == QuantileInterval(0.5, 100.0, 250.0)
    # 0.90 touches the upper end at edge 3 (not below q) and reaches the lower end at edge 4
    assert got[1] == QuantileInterval(0.9, 250.0, 1000.0)
    # no inner edge reaches 0.99: it may lie in the top bucket, open above
    assert got[2] == QuantileInterval(0.99, 500.0, None)
    assert got[3] == QuantileInterval(0.2, None, 100.0)  # may lie in the bottom bucket
    touching = quantile_intervals(
        EDGES, np.array([0.5, 0.6, 0.7, 0.8]), np.array([0.5, 0.6, 0.7, 0.8]), (0.5,)
    )
    assert touching == [QuantileInterval(0.5, None, 100.0)]


def test_no_reports_leave_both_ends_open() -> None:
    got = estimate_quantiles(OUE(5, 1.0), EDGES, [PeriodCounts("a", 0, [0] * 5)])
    assert got == [QuantileInterval(q, None, None) for q in QS]


def simulate_counts(mech: Mechanism, n: int, rng: np.random.Generator) -> np.ndarray:
    """Support counts (M, k) of n super-population reporters, from their exact laws."""
    k, p, q = mech.k, mech.p_star, mech.q_star
    sizes = rng.multinomial(n, SHARES, size=M)
    if isinstance(mech, KRR):
        counts = np.zeros((M, k), dtype=np.int64)
        for x in range(k):
            row = np.where(np.arange(k) == x, p, q)
            counts += rng.multinomial(sizes[:, x], row / row.sum())
        return counts
    if isinstance(mech, OUE):
        return rng.binomial(sizes, p) + rng.binomial(n - sizes, q)
    assert isinstance(mech, OLH)
    x = np.array([np.repeat(np.arange(k), row) for row in sizes])  # (M, n) true buckets
    a = rng.integers(1, OLH_PRIME, x.shape, dtype=np.int64)
    b = rng.integers(0, OLH_PRIME, x.shape, dtype=np.int64)
    hx = ((a * x + b) % OLH_PRIME) % mech.g
    other = rng.integers(0, mech.g - 1, x.shape)
    y = np.where(rng.random(x.shape) < p, hx, other + (other >= hx))
    return np.stack(
        [(((a * v + b) % OLH_PRIME) % mech.g == y).sum(axis=1) for v in range(k)], axis=1
    )


@pytest.mark.parametrize("mech", [KRR(5, 1.0), OUE(5, 1.0), OLH(5, 2.0)], ids=str)
def test_quantile_intervals_cover(mech: Mechanism) -> None:
    rng = np.random.default_rng(90 + mech.k + len(mech.name))
    counts = simulate_counts(mech, 1_000, rng)
    _, low, high = pooled_band(
        mech, np.full((M, 1), 1_000), counts[:, None, :], 0.95, "overlap-safe"
    )
    truth = np.concatenate([[0.0], np.cumsum(SHARES)[:-1], [1.0]])  # F at every edge
    jointly = np.ones(M, dtype=bool)
    for q in QS:
        ok = np.zeros(M, dtype=bool)
        for r in range(M):
            got = quantile_intervals(EDGES, low[r], high[r], (q,))[0]
            lo = 0 if got.low is None else EDGES.index(got.low)
            hi = len(EDGES) - 1 if got.high is None else EDGES.index(got.high)
            ok[r] = truth[lo] < q <= truth[hi]
        assert ok.sum() >= COVER_LOW, (q, ok.sum())
        jointly &= ok
    assert jointly.sum() >= COVER_LOW


def expected_counts(mech: Mechanism, n: int, shares: np.ndarray) -> np.ndarray:
    """The support counts' expectations n (q* + (p* - q*) f), rounded: a typical period."""
    return np.round(n * (mech.q_star + (mech.p_star - mech.q_star) * shares)).astype(np.int64)


TAIL_EDGES = tuple(float(e) for e in range(0, 201, 20))  # 10 buckets, 0..200


@pytest.mark.parametrize("reverse", [False, True], ids=["above", "below"])
def test_a_quantile_in_an_end_bucket_has_an_open_end(reverse: bool) -> None:
    """oue, eps 4, n = 50,000: 1.6% of the values in the top bucket (the 1.08% beyond 200 are
    counted there), so the p99 may lie past 200 and its interval has no upper bound; mirrored,
    the p1's has no lower bound."""
    shares = np.array([0.30, 0.20, 0.15, 0.10, 0.08, 0.07, 0.05, 0.03, 0.004, 0.016])
    if reverse:
        shares = shares[::-1]
    mech, n = OUE(10, 4.0), 50_000
    periods = [PeriodCounts("a", n, expected_counts(mech, n, shares).tolist())]
    q = 0.01 if reverse else 0.99
    got = estimate_quantiles(mech, TAIL_EDGES, periods, (q, 0.5))
    if reverse:
        assert got[0].low is None and got[0].high is not None
    else:
        assert got[0].high is None and got[0].low is not None
    assert got[1].low is not None and got[1].high is not None  # the median is inside


def test_open_ends_are_said_in_words() -> None:
    edges = [0.0, 50.0, 200.0]
    number = "{:,g}".format
    assert quantile_bounds({"low": 50.0, "high": None}, edges, number) == (
        "50",
        "none: may be above 200",
    )
    assert quantile_bounds({"low": None, "high": 50.0}, edges, number) == (
        "none: may be below 0",
        "50",
    )
