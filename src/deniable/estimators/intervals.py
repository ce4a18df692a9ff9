"""Confidence intervals for shares: Wilson (or Clopper-Pearson) on the support rate, debiased.

Under the super-population estimand the support count is exactly C_v ~ Bin(n, lam_v) with
lam_v = q* + (p* - q*) f_v (STATS.md, the general oracle), so any binomial interval for lam_v
mapped through the increasing map (. - q*)/(p* - q*) covers f_v with the same probability.
We use the Wilson score interval, and where the observed count is small (fewer than
:data:`CP_BELOW` reports on either side), where Wilson undercovers, the hull of Wilson and
Clopper-Pearson, which is never narrower than either and so keeps Clopper-Pearson's guarantee
there. Simultaneous intervals use the Bonferroni level alpha/k per category.

Exact coverage (tests/estimators/test_exact_moments_and_coverage.py computes it from the
binomial pmf): with fewer than 2 * CP_BELOW reports every count is in the Clopper-Pearson
region, so coverage is at least the nominal level for every share; above that, Wilson's
coverage oscillates around the nominal level with a floor of 94% for a nominal 95% and 98.5%
for 99% (Brown, Cai & DasGupta 2001).
Both ends of the interval rise with the count, so the debiased interval is monotone too.
"""

from __future__ import annotations

import numpy as np

from deniable.client.mechanisms import Mechanism

CP_BELOW = 50
"""Use the Wilson/Clopper-Pearson hull when min(C, n - C) is below this many reports."""


def z_value(confidence: float, k: int, simultaneous: bool) -> float:
    """The two-sided normal quantile for one category (Bonferroni over k when simultaneous)."""
    return normal_quantile(per_category_alpha(confidence, k, simultaneous))


def normal_quantile(alpha: float) -> float:
    """z with P(Z > z) = alpha / 2: ``-ndtri(alpha / 2)``, bit for bit what
    ``scipy.stats.norm.isf(alpha / 2)`` returns, without its argument checking, which cost
    every slice of a breakdown about a millisecond."""
    from scipy import special  # lazy: scipy costs time at start-up

    return float(-special.ndtri(alpha / 2))


def per_category_alpha(confidence: float, k: int, simultaneous: bool) -> float:
    """The miss probability allowed to each category's interval."""
    alpha = 1.0 - confidence
    return alpha / k if simultaneous else alpha


def rate_interval(counts: np.ndarray, n: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Interval for a binomial rate from counts C out of n (n > 0, broadcastable arrays; scalars
    count as arrays of one, so a single pooled period gets the same Clopper-Pearson hull)."""
    shape = np.broadcast_shapes(np.shape(counts), np.shape(n))
    counts, n = np.broadcast_arrays(
        np.array(counts, dtype=np.float64, ndmin=1), np.array(n, dtype=np.float64, ndmin=1)
    )
    z = normal_quantile(alpha)
    z2 = z * z
    denom = n + z2
    center = (counts + z2 / 2) / denom
    half = z / denom * np.sqrt(counts * (n - counts) / n + z2 / 4)
    low, high = center - half, center + half
    small = np.minimum(counts, n - counts) < CP_BELOW
    if small.any():
        cp_low, cp_high = clopper_pearson(counts[small], n[small], alpha)
        low[small] = np.minimum(low[small], cp_low)
        high[small] = np.maximum(high[small], cp_high)
    return np.clip(low, 0.0, 1.0).reshape(shape), np.clip(high, 0.0, 1.0).reshape(shape)


def clopper_pearson(
    counts: np.ndarray, n: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The exact (Clopper-Pearson) interval for C out of n, computed once per distinct (C, n).

    The pairs are deduplicated as rows, compared exactly, never folded into one float key
    (which loses digits once C * (max n + 1) passes 2^53). The beta quantiles are the special
    functions ``scipy.stats.beta``'s ppf and isf compute (the same values, bit for bit),
    called without its argument checks and broadcasting, which cost four times the functions.
    """
    from scipy import special  # lazy, as above

    pairs = np.stack([np.ravel(counts), np.ravel(n)], axis=1).astype(np.float64)
    keys, inverse = np.unique(pairs, axis=0, return_inverse=True)
    c, m = keys[:, 0], keys[:, 1]
    inner_c, inner_m = np.maximum(c, 1.0), np.maximum(m - c, 1.0)
    low = np.where(c > 0, special.betaincinv(inner_c, m - c + 1, alpha / 2), 0.0)
    high = np.where(c < m, special.betainccinv(c + 1, inner_m, alpha / 2), 1.0)
    inverse = inverse.reshape(-1)
    return low[inverse], high[inverse]


def share_interval(
    mechanism: Mechanism, counts: np.ndarray, n: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Unclipped interval for each share f_v: the support-rate interval mapped through debiasing."""
    p, q = mechanism.p_star, mechanism.q_star
    low, high = rate_interval(counts, n, alpha)
    return (low - q) / (p - q), (high - q) / (p - q)


def unit_interval(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clip share intervals to [0, 1], never leaving one narrower than its margin.

    The margin is half the unclipped width. Plain clipping turns an interval that the data
    pushed below 0 into [0, 0], which reads as certainty; here its upper end is at least the
    margin (and, above 1, its lower end at most 1 - margin): the interval a share at 0 (or 1)
    would have. This only ever widens the clipped interval, so coverage never drops; it binds
    exactly when the interval's centre lies outside [0, 1].
    """
    margin = np.minimum((np.asarray(high) - np.asarray(low)) / 2.0, 1.0)
    new_low = np.minimum(np.clip(low, 0.0, 1.0), 1.0 - margin)
    new_high = np.maximum(np.clip(high, 0.0, 1.0), margin)
    return np.clip(new_low, 0.0, 1.0), np.clip(new_high, 0.0, 1.0)


def intersect_simplex(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intersect a simultaneous box (already within [0, 1]) with the simplex (STATS.md section 4, option 2)."""
    total_low, total_high = low.sum(), high.sum()
    new_low = np.maximum(low, 1.0 - (total_high - high))
    new_high = np.minimum(high, 1.0 - (total_low - low))
    new_low, new_high = np.clip(new_low, 0.0, 1.0), np.clip(new_high, 0.0, 1.0)
    if (new_low > new_high).any():  # the box misses the simplex: nothing to tighten against
        return low, high
    return new_low, new_high
