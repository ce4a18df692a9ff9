"""Quantiles of a histogram metric: a simultaneous band on the CDF at the inner edges, inverted.

STATS.md section 10. The buckets' shares come from the frequency oracle; the CDF at inner edge j
(j = 1..k-1) is F_j = f_1 + ... + f_j, estimated by F^_j = (Z_j/n - j q*)/(p* - q*) with Z_j
the summed support counts of the first j buckets. Its variance, super-population (each report
an iid draw), is Var(z)/(n (p* - q*)^2) with z a report's number of supported buckets among the
first j: Var(z) = E[Var(z | x)] + (p* - q*)^2 F_j (1 - F_j), and

* ``krr``/``brr``: z is one Bernoulli (a report supports exactly one bucket), so Z_j is
  exactly Bin(n, j q + (p - q) F_j): the interval is Wilson's on Z_j/n mapped, as for a share
  (the covariances -lam_v lam_w of section 2 are all inside it).
* ``oue``, ``olh``: :mod:`.cdfvariance` bounds Var(z) by a_j + b_j F - c F^2 (exact for oue;
  for olh from the wire hash's triple-collision probabilities, which are not 1/g^2: two buckets
  other than the true one share its hash value more often than independence would say). The
  interval is the score interval: the F with n (p* - q*)^2 (F^_j - F)^2 <= z^2 Var(z; F), a
  quadratic inequality, so the variance is taken at each candidate F rather than plugged in at
  F^_j (which undercovered near F = 0 and 1). For oue with few reports it is joined with an
  exact interval (:mod:`.cdfexact`).

The band is simultaneous over the k - 1 inner edges (Bonferroni, alpha/(k - 1) each) and
clipped to [0, 1]. Several periods: ``overlap-safe`` averages the per-period band ends with
weights n_t / N (section 9); ``independent`` pools the counts as one period.

A quantile's interval, by inversion: low = the last inner edge whose band upper end is below q
(there the CDF is surely below q, so the quantile is above it), high = the first whose lower
end reaches q. When no inner edge qualifies that end is open (None): the end buckets hold
every value beyond the outer edges (values are clamped into them on the device), so a
quantile that may fall in one may lie anywhere past the edge. If the band covers the CDF, the
interval contains the quantile, for every q at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import OUE, Mechanism

from .cdfexact import oue_exact_interval
from .cdfvariance import variance_coefficients
from .choices import DEFAULT_QUANTILES, Pooling, check_options
from .consistency import is_krr
from .frequency import period_arrays
from .intervals import rate_interval, z_value
from .results import PeriodCounts, QuantileInterval


def period_band(
    mechanism: Mechanism, n: np.ndarray, counts: np.ndarray, alpha: float, bands: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(F^, unclipped low, unclipped high) at the k - 1 inner edges for counts (..., k) and
    n (...), at miss level alpha per edge; leading axes are kept (they hold ``bands`` bands,
    which bounds the exact interval's work)."""
    p, q = mechanism.p_star, mechanism.q_star
    n = np.asarray(n, dtype=np.float64)[..., None]
    summed = np.cumsum(np.asarray(counts, dtype=np.float64), axis=-1)[..., :-1]
    j = np.arange(1, summed.shape[-1] + 1, dtype=np.float64)
    cdf = (summed / n - j * q) / (p - q)
    if is_krr(mechanism):
        low, high = rate_interval(summed, n, alpha)
        return cdf, (low - j * q) / (p - q), (high - j * q) / (p - q)
    low, high = score_interval(mechanism, cdf, n, alpha)
    if isinstance(mechanism, OUE):
        exact_low, exact_high = oue_exact_interval(p, q, n, summed, alpha, bands)
        low, high = np.fmin(low, exact_low), np.fmax(high, exact_high)
    return cdf, low, high


def score_interval(
    mechanism: Mechanism, cdf: np.ndarray, n: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The F with n (p* - q*)^2 (F^ - F)^2 <= z^2 Var(z_j; F): the normal test at each
    candidate F inverted, with the variance bound at F itself (not at F^), like Wilson's."""
    a, b, c = variance_coefficients(mechanism)
    d = (mechanism.p_star - mechanism.q_star) ** 2
    z = z_value(1.0 - alpha, 1, False)
    kappa = z * z / n
    lead = d + kappa * c
    half = 2 * d * cdf + kappa * b
    last = d * cdf * cdf - kappa * a
    centre = half / (2 * lead)
    spread = np.sqrt(np.maximum(half * half - 4 * lead * last, 0.0)) / (2 * lead)
    return centre - spread, centre + spread


def cdf_band(
    mechanism: Mechanism,
    periods: PeriodCounts | Sequence[PeriodCounts],
    *,
    confidence: float = 0.95,
    pooling: Pooling = "overlap-safe",
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(F^, low, high) at the k - 1 inner edges over the periods, the band simultaneous at
    ``confidence`` and clipped to [0, 1]; None without reports."""
    confidence = check_options(confidence, "unbiased", pooling)
    n, counts = period_arrays(mechanism, periods)
    if len(n) == 0:
        return None
    return pooled_band(mechanism, n, counts, confidence, pooling)


def pooled_band(
    mechanism: Mechanism, n: np.ndarray, counts: np.ndarray, confidence: float, pooling: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The band over periods for n (..., T) and counts (..., T, k) (leading axes kept)."""
    alpha = (1.0 - confidence) / (mechanism.k - 1)
    n = np.asarray(n, dtype=np.float64)
    big_n = n.sum(axis=-1)
    pooled = np.asarray(counts).sum(axis=-2)
    bands = int(np.prod(n.shape[:-1]))
    point, low, high = period_band(mechanism, big_n, pooled, alpha, bands)
    if pooling != "independent" and n.shape[-1] > 1:  # one period: the same band
        weights = (n / big_n[..., None])[..., None]
        _, low_t, high_t = period_band(mechanism, n, counts, alpha, bands)
        low, high = (weights * low_t).sum(axis=-2), (weights * high_t).sum(axis=-2)
    return (point, *monotone(np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)))


def monotone(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The band intersected with the non-decreasing functions (a CDF is one): a running max of
    the lower ends and a reverse running min of the upper ends. It contains every CDF the band
    did, so it covers as often and is never wider. Where the intersection is empty (the data
    fit no CDF inside the band, which happens only when the band missed), each edge keeps the
    hull of its two ends, so low <= high always."""
    low = np.maximum.accumulate(low, axis=-1)
    high = np.flip(np.minimum.accumulate(np.flip(high, axis=-1), axis=-1), axis=-1)
    return np.minimum(low, high), np.maximum(low, high)


def quantile_intervals(
    edges: Sequence[float],
    low: np.ndarray,
    high: np.ndarray,
    qs: Sequence[float] = DEFAULT_QUANTILES,
) -> list[QuantileInterval]:
    """Invert a CDF band at the inner edges (``edges[1:-1]``) into an interval per quantile;
    an end left open (None) where the quantile may lie in an end bucket, which holds every
    value beyond its outer edge."""
    inner = list(edges[1:-1])
    if len(low) != len(inner) or len(high) != len(inner):
        raise InvalidInput("the band needs one value per inner edge")
    result = []
    for q in qs:
        if not 0.0 < q < 1.0:
            raise InvalidInput("each quantile q must be strictly between 0 and 1")
        below = [i for i, h in enumerate(high) if h < q]
        reached = [i for i, lo in enumerate(low) if lo >= q]
        lo_edge = float(inner[below[-1]]) if below else None
        hi_edge = float(inner[reached[0]]) if reached else None
        if lo_edge is not None and hi_edge is not None and lo_edge > hi_edge:
            lo_edge, hi_edge = hi_edge, lo_edge  # a band no CDF fits: its hull
        result.append(QuantileInterval(float(q), lo_edge, hi_edge))
    return result


def estimate_quantiles(
    mechanism: Mechanism,
    edges: Sequence[float],
    periods: PeriodCounts | Sequence[PeriodCounts],
    qs: Sequence[float] = DEFAULT_QUANTILES,
    *,
    confidence: float = 0.95,
    pooling: Pooling = "overlap-safe",
) -> list[QuantileInterval]:
    """Intervals (value units, bucket edges) for the quantiles ``qs`` of a histogram metric,
    jointly at ``confidence``; without reports each is unbounded at both ends."""
    if len(edges) != mechanism.k + 1:
        raise InvalidInput(f"expected {mechanism.k + 1} edges for {mechanism.k} buckets")
    band = cdf_band(mechanism, periods, confidence=confidence, pooling=pooling)
    if band is None:
        return [QuantileInterval(float(q), None, None) for q in qs]
    return quantile_intervals(edges, band[1], band[2], qs)


def quantile_series(
    mechanism: Mechanism,
    edges: Sequence[float],
    periods: Sequence[PeriodCounts],
    qs: Sequence[float] = DEFAULT_QUANTILES,
    *,
    confidence: float = 0.95,
) -> list[list[QuantileInterval]]:
    """Each period's own quantile intervals (:func:`estimate_quantiles` of that period alone),
    in the order given: what a histogram's series shows per period. The work is one band per
    period and one inversion per period and quantile; the caller bounds periods × quantiles."""
    return [
        estimate_quantiles(mechanism, edges, [period], qs, confidence=confidence)
        for period in periods
    ]
