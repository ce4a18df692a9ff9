"""Combining periods: the pooled share and an interval valid whatever the overlap of clients.

STATS.md section 9. The estimand is the report-weighted share theta = sum_t w_t f_t with
w_t = n_t / N. Its estimate is the debiased pooled counts. ``overlap-safe`` (the default)
averages the per-period unclipped interval endpoints and standard errors with the same weights,
which is valid even when the same clients report the same answer in every period (Minkowski:
SD(sum w_t f^_t) <= sum w_t SD(f^_t)). ``independent`` treats the pooled counts as one period of
N distinct clients, which is valid only when no client reports twice in the range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deniable.client.mechanisms import Mechanism

from .choices import Pooling
from .intervals import share_interval


@dataclass(frozen=True)
class Pooled:
    """Unclipped per-category results of combining periods (total has the leading shape, the rest (..., k))."""

    total: np.ndarray
    counts: np.ndarray
    estimate: np.ndarray
    std_error: np.ndarray
    low: np.ndarray
    high: np.ndarray


def debias(mechanism: Mechanism, counts: np.ndarray, n: np.ndarray | float) -> np.ndarray:
    """The unbiased share estimate (C_v/n - q*)/(p* - q*) (n > 0)."""
    p, q = mechanism.p_star, mechanism.q_star
    return (np.asarray(counts, dtype=np.float64) / n - q) / (p - q)


def std_error(mechanism: Mechanism, counts: np.ndarray, n: np.ndarray | float) -> np.ndarray:
    """The super-population plug-in SE sqrt(lam^(1-lam^)/(n-1))/(p*-q*) (STATS.md, general oracle).

    With a single report (n = 1) the plug-in is 0/0; we return its worst case 0.5/(p*-q*) instead.
    """
    p, q = mechanism.p_star, mechanism.q_star
    counts = np.asarray(counts, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), counts.shape)
    rate = counts / n
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = np.where(n > 1, rate * (1.0 - rate) / (n - 1.0), 0.25)
    return np.sqrt(variance) / (p - q)


def pool(
    mechanism: Mechanism, n: np.ndarray, counts: np.ndarray, alpha: float, pooling: Pooling
) -> Pooled:
    """Combine per-period counts at per-category miss level alpha.

    ``n`` has shape (..., T) and ``counts`` (..., T, k), every n_t > 0; leading axes (for
    example simulation replicates) are kept, so the result arrays have shape (..., k).
    """
    n = np.asarray(n, dtype=np.int64)
    total = n.sum(axis=-1)
    pooled_counts = counts.sum(axis=-2)
    column = total[..., None].astype(np.float64)
    estimate = debias(mechanism, pooled_counts, column)
    if pooling == "independent":
        low, high = share_interval(mechanism, pooled_counts, column, alpha)
        se = std_error(mechanism, pooled_counts, column)
        return Pooled(total, pooled_counts, estimate, se, low, high)
    per_period = n[..., None].astype(np.float64)
    weights = per_period / column[..., None]
    low_t, high_t = share_interval(mechanism, counts, per_period, alpha)
    se_t = std_error(mechanism, counts, per_period)
    return Pooled(
        total,
        pooled_counts,
        estimate,
        (weights * se_t).sum(axis=-2),
        (weights * low_t).sum(axis=-2),
        (weights * high_t).sum(axis=-2),
    )
