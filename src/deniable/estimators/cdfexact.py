"""An exact (Clopper-Pearson-like) interval for the oue CDF at an inner edge, for few reports.

STATS.md section 10. With few reports the normal approximation behind the score interval
fails in the tails that a Bonferroni level asks about (eps 4, n = 50: the band covered 91.75%
instead of 95%). For oue the support count of the first j buckets is, report by report, the
true bucket's own bit plus the other bits: Z_j = B + Q, where B = the own bits of the reports
whose value is among the first j, exactly Bin(n, p F) (each report an iid draw), and, given
those m reports, Q ~ Bin(n j - m, q) independent of B. Since 0 <= m <= n,

    Bin(n (j - 1), q) <=st Q <=st Bin(n j, q)   (each independent of B),

so P_F(Z_j >= z) <= P(Bin(n, p F) + Bin(n j, q) >= z) and P_F(Z_j <= z) <=
P(Bin(n, p F) + Bin(n (j - 1), q) <= z). Inverting these two tests at alpha/2 each (by
bisection on F; both are monotone in F) gives an interval that covers with probability at
least 1 - alpha whatever F, as Clopper-Pearson does for a share. It is used below
:data:`EXACT_BELOW` reports, joined (the hull) with the score interval.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

EXACT_BELOW = 500
"""Below this many reports in a period the oue CDF interval is the hull of the score and the
exact interval; at and above it the score interval alone (by then the normal approximation
holds at the band's levels: bench/quantiles.py)."""

MAX_WORK = 500_000
"""The most terms, summed over the (edge, period) cells of one band of their n + 1, that one band
computes exactly (each bisection step costs that many); a band past it (thousands of buckets,
or many small periods) keeps the score interval. About 0.1 s."""

STEPS = 32
"""Bisection steps: the bracket [0, 1] shrinks to 2^-32."""


def oue_exact_interval(
    p: float, q: float, n: np.ndarray, summed: np.ndarray, alpha: float, bands: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) for F at each inner edge from the summed support counts (..., k - 1) of n
    (..., 1) reports, which hold ``bands`` bands (their work bounded by :data:`MAX_WORK` each);
    NaN where n >= :data:`EXACT_BELOW` or past the bound (no exact interval there)."""
    from scipy import stats  # lazy: scipy.stats costs ~0.5 s at collector start-up
    from scipy.special import gammaln

    summed = np.asarray(summed, dtype=np.float64)
    sizes = np.broadcast_to(np.asarray(n, dtype=np.float64), summed.shape)
    j = np.broadcast_to(np.arange(1, summed.shape[-1] + 1, dtype=np.float64), summed.shape)
    low = np.full(summed.shape, np.nan)
    high = np.full(summed.shape, np.nan)
    chosen = sizes < EXACT_BELOW
    if not chosen.any() or (sizes[chosen] + 1).sum() > MAX_WORK * bands:
        return low, high
    m, z, edge = sizes[chosen][:, None], summed[chosen][:, None], j[chosen][:, None]
    b = np.arange(int(m.max()) + 1, dtype=np.float64)[None, :]
    real = b <= m
    # P(Q >= z - b) with Q ~ Bin(n j, q), and P(Q <= z - b) with Q ~ Bin(n (j - 1), q)
    upper_tail = np.where(real, stats.binom.sf(z - b - 1, m * edge, q), 0.0)
    lower_tail = np.where(real, stats.binom.cdf(z - b, m * (edge - 1), q), 0.0)

    choose = np.where(real, gammaln(m + 1) - gammaln(b + 1) - gammaln(np.maximum(m - b, 0) + 1), 0)

    def pmf(share: np.ndarray) -> np.ndarray:  # P(Bin(n, p F) = b)
        rate = np.clip(p * share[:, None], 1e-300, 1.0 - 1e-16)
        return np.exp(choose + b * np.log(rate) + (m - b) * np.log1p(-rate))

    def at_least(share: np.ndarray) -> np.ndarray:  # P(Bin(n, p F) + Q_high >= z)
        return (pmf(share) * upper_tail).sum(axis=1)

    def at_most(share: np.ndarray) -> np.ndarray:  # P(Bin(n, p F) + Q_low <= z)
        return (pmf(share) * lower_tail).sum(axis=1)

    half = alpha / 2
    low[chosen] = _bisect(lambda f: at_least(f) >= half, len(m), first=True)
    high[chosen] = _bisect(lambda f: at_most(f) >= half, len(m), first=False)
    return low, high


def _bisect(accept: Callable[[np.ndarray], np.ndarray], size: int, *, first: bool) -> np.ndarray:
    """The least F in [0, 1] that ``accept`` (monotone: false then true) when ``first``, else
    the largest (true then false); vectorized over ``size`` problems."""
    lo, hi = np.zeros(size), np.ones(size)
    edge = np.zeros(size) if first else np.ones(size)
    done = accept(edge)
    for _ in range(STEPS):
        mid = (lo + hi) / 2
        ok = accept(mid)
        if first:
            hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
        else:
            lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return np.where(done, edge, lo if first else hi)
