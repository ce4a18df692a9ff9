"""The CDF band's variance and small-n interval (STATS.md section 10; estimators/cdfvariance.py,
estimators/cdfexact.py).

* olh: the closed form of Var(z_j | x) (the wire hash's triple collisions) against a seeded
  simulation of the wire hash itself, with a tolerance of 4.89 standard errors of the sample
  variance (its SE from the sample's fourth central moment; STATS section 8, 100 comparisons);
  the independent-indicator value it replaces is rejected by the same test.
* olh: the band's half-width against the narrowest band of its shape (the true variance under
  the true shares), computed, not sampled.
* oue: the band's exact joint coverage at n = 50 (k = 3: every pair of support counts, its
  probability from the binomial pmfs), which the exact interval guarantees at >= 95%.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from deniable.client.mechanisms import OLH, OLH_PRIME, OUE
from deniable.estimators.cdfvariance import olh_within_matrix, variance_coefficients
from deniable.estimators.intervals import z_value
from deniable.estimators.quantiles import pooled_band, score_interval

Z_TOL = 4.89


def wire_hash_counts(mech: OLH, x: int, draws: int, seed: int) -> np.ndarray:
    """z_j (draws, k - 1) for reports of true bucket x, through the wire hash."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, OLH_PRIME, draws, dtype=np.int64)[:, None]
    b = rng.integers(0, OLH_PRIME, draws, dtype=np.int64)[:, None]
    hashes = ((a * np.arange(mech.k, dtype=np.int64) + b) % OLH_PRIME) % mech.g
    own = hashes[:, x]
    other = rng.integers(0, mech.g - 1, draws)
    y = np.where(rng.random(draws) < mech.p, own, other + (other >= own))
    return np.cumsum(hashes == y[:, None], axis=1)[:, :-1]


@pytest.mark.parametrize(("epsilon", "x"), [(2.0, 0), (2.0, 5), (4.0, 3), (4.0, 9)])
def test_olh_within_variance_matches_the_wire_hash(epsilon: float, x: int) -> None:
    mech = OLH(10, epsilon)
    z = wire_hash_counts(mech, x, 200_000, seed=600 + x + int(epsilon))
    centred = z - z.mean(axis=0)
    sample = (centred**2).mean(axis=0)
    se = np.sqrt(((centred**4).mean(axis=0) - sample**2) / len(z))
    formula = olh_within_matrix(mech.k, mech.g, mech.p)[x]
    assert np.all(np.abs(sample - formula) <= Z_TOL * se), (sample, formula, se)
    if epsilon == 4.0:  # independent indicators understate it: the test can tell
        j = np.arange(1, mech.k)
        q = mech.q
        independent = j * q * (1 - q) + (x < j) * (mech.p * (1 - mech.p) - q * (1 - q))
        assert np.any(np.abs(sample - independent) > Z_TOL * se)


def test_olh_bound_takes_the_largest_within_variance_on_each_side() -> None:
    mech = OLH(12, 3.0)
    a, b, c = variance_coefficients(mech)
    within = olh_within_matrix(mech.k, mech.g, mech.p)
    for j in range(1, mech.k):
        assert a[j - 1] == pytest.approx(within[j:, j - 1].max(), rel=1e-12)
        assert a[j - 1] + b[j - 1] - c == pytest.approx(within[:j, j - 1].max(), rel=1e-12)


SHAPES = {
    "uniform": np.ones(24),
    "normal": np.exp(-0.5 * ((np.arange(24) - 11.5) / 4) ** 2),
    "skewed": np.exp(-np.arange(24) / 4),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("epsilon", [1.0, 2.0, 4.0])
def test_olh_band_is_within_1_3_of_the_narrowest(shape: str, epsilon: float) -> None:
    """At F^ = F, n = 10,000, k = 24: the band's half-width over the half-width of the band with
    the true variance, E_x Var(z | x) + (p - q)^2 F (1 - F) under the true shares."""
    mech, n = OLH(24, epsilon), 10_000
    f = SHAPES[shape] / SHAPES[shape].sum()
    cdf = np.cumsum(f)[:-1]
    alpha = 0.05 / (mech.k - 1)
    low, high = score_interval(mech, cdf, np.array(float(n)), alpha)
    within = olh_within_matrix(mech.k, mech.g, mech.p)
    d = (mech.p - mech.q) ** 2
    true_variance = f @ within + d * cdf * (1 - cdf)
    narrowest = z_value(1 - alpha, 1, False) * np.sqrt(true_variance / (n * d))
    ratio = (high - low) / 2 / narrowest
    assert np.all(ratio >= 0.99) and np.all(ratio <= 1.3), ratio


def sum_pmf(n_own: int, n: int, p: float, q: float) -> np.ndarray:
    """pmf of Bin(n_own, p) + Bin(n - n_own, q) on 0..n."""
    return np.convolve(
        stats.binom.pmf(np.arange(n_own + 1), n_own, p),
        stats.binom.pmf(np.arange(n - n_own + 1), n - n_own, q),
    )


@pytest.mark.parametrize("epsilon", [1.0, 4.0, 8.0])
@pytest.mark.parametrize(
    "shares", [(0.2, 0.3, 0.5), (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.05, 0.9, 0.05)], ids=str
)
def test_oue_band_covers_exactly_at_n_50(epsilon: float, shares: tuple[float, ...]) -> None:
    """k = 3, n = 50: P(the band covers F_1 and F_2) summed over every (C_0, C_1)."""
    mech, n = OUE(3, epsilon), 50
    p, q = mech.p, mech.q
    pmfs = [sum_pmf(m, n, p, q) for m in range(n + 1)]
    joint = np.zeros((n + 1, n + 1))
    first = stats.binom.pmf(np.arange(n + 1), n, shares[0])
    second = shares[1] / (1 - shares[0]) if shares[0] < 1 else 0.0
    for n0 in np.nonzero(first)[0]:
        rest = stats.binom.pmf(np.arange(n - n0 + 1), n - n0, second)  # n1 given n0
        for n1 in np.nonzero(rest)[0]:
            joint += first[n0] * rest[n1] * np.outer(pmfs[n0], pmfs[n1])
    assert joint.sum() == pytest.approx(1.0, abs=1e-9)
    c0, c1 = np.nonzero(joint > 1e-12)  # the rest counts as missed: a lower bound
    counts = np.stack([c0, c1, np.zeros_like(c0)], axis=-1)[:, None, :]
    _, low, high = pooled_band(mech, np.full((len(counts), 1), n), counts, 0.95, "overlap-safe")
    truth = np.cumsum(shares)[:-1]
    covered = ((low <= truth + 1e-12) & (truth - 1e-12 <= high)).all(axis=1)
    assert (joint[c0, c1] * covered).sum() >= 0.95
