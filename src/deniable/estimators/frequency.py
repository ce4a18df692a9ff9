"""Population share estimates with confidence intervals from per-period support counts.

:func:`estimate` is the one entry point the collector and the CLI call: it validates the
sufficient statistics, pools the periods (:mod:`.pooling`), builds the intervals
(:mod:`.intervals`) and applies the requested post-processing (:mod:`.consistency`).

Choices (STATS.md decides the formulas):

* ``std_error`` is the super-population plug-in SE of the unbiased estimate (pooled over periods
  as :mod:`.pooling` says). For ``consistent`` and ``mle`` it is ``None``: those estimates are
  biased toward the simplex and no honest standard error is centred on them (STATS.md section 4:
  never put the unprojected SE around a projected estimate); their interval is the statement of
  uncertainty.
* Intervals are clipped to [0, 1] but never left narrower than their margin
  (:func:`~.intervals.unit_interval`). Those of ``consistent`` and ``mle`` are the unbiased
  estimate's and, when ``simultaneous``, intersected with the simplex (section 4, option 2;
  this uses the other categories' bounds, so it is only valid for a simultaneous box). They
  are then widened, if needed, to contain the point estimate, which keeps their coverage.
* The point shown (``frequency``) always lies within its interval: an unbiased estimate the
  data pushed outside [0, 1] is clipped into it, flagged ``clipped``, and kept as ``unbiased``.
* ``count`` is the estimated count: N times the frequency, with N the reports in the range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypedDict

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import Mechanism

from .choices import Method, Pooling, check_options
from .consistency import composite_mle, is_krr, krr_mle, norm_sub
from .intervals import intersect_simplex, per_category_alpha, unit_interval
from .pooling import Pooled, pool
from .results import CategoryEstimate, Estimate, PeriodCounts


class Header(TypedDict):
    """The fields every :class:`Estimate` of one call shares: how it was made, whatever the data."""

    mechanism: str
    epsilon: float
    confidence: float
    method: Method
    pooling: Pooling
    simultaneous: bool


def period_arrays(
    mechanism: Mechanism, periods: PeriodCounts | Sequence[PeriodCounts]
) -> tuple[np.ndarray, np.ndarray]:
    """Validate the periods and return (n of shape (T,), counts of shape (T, k)), n = 0 rows dropped."""
    if isinstance(periods, PeriodCounts):
        periods = [periods]
    fast = _checked_at_once(mechanism, periods)
    if fast is not None:
        return fast
    k = mechanism.k
    seen: set[str] = set()
    ns: list[int] = []
    rows: list[np.ndarray] = []
    for item in periods:
        if not isinstance(item, PeriodCounts):
            raise InvalidInput("periods must be PeriodCounts")
        label = item.period
        if label in seen:
            raise InvalidInput(f"period {label!r} appears more than once")
        seen.add(label)
        n = item.n
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise InvalidInput(f"period {label!r}: n must be a non-negative integer")
        counts = np.asarray(item.counts)
        if counts.shape != (k,):
            raise InvalidInput(f"period {label!r}: expected {k} counts, got shape {counts.shape}")
        if counts.dtype.kind not in "iuf" or not np.all(np.isfinite(counts)):
            raise InvalidInput(f"period {label!r}: counts must be integers")
        if counts.dtype.kind == "f" and not np.all(counts == np.round(counts)):
            raise InvalidInput(f"period {label!r}: counts must be integers")
        counts = counts.astype(np.int64)
        if (counts < 0).any():
            raise InvalidInput(f"period {label!r}: counts must be non-negative")
        if (counts > n).any():
            raise InvalidInput(f"period {label!r}: a count exceeds the number of reports n={n}")
        if is_krr(mechanism) and int(counts.sum()) != n:
            raise InvalidInput(
                f"period {label!r}: {mechanism.name} counts must sum to n={n} "
                "(each report supports exactly one category)"
            )
        if n > 0:
            ns.append(int(n))
            rows.append(counts)
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, k), dtype=np.int64)
    return np.asarray(ns, dtype=np.int64), np.vstack(rows)


def _checked_at_once(
    mechanism: Mechanism, periods: Sequence[PeriodCounts]
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`period_arrays`' answer checked in a few array operations when every period holds
    its counts as an int64 array of k and passes every check (a range read from the
    collector's database: 90 periods checked one by one cost a fifth of the estimate); None
    otherwise, and the period-by-period checks then name the first period that fails."""
    k = mechanism.k
    if not periods or not all(
        isinstance(item, PeriodCounts)
        and isinstance(item.counts, np.ndarray)
        and item.counts.dtype == np.int64
        and item.counts.shape == (k,)
        and type(item.n) is int
        for item in periods
    ):
        return None
    if len({item.period for item in periods}) != len(periods):
        return None
    n = np.fromiter((item.n for item in periods), dtype=np.int64, count=len(periods))
    counts = np.vstack([item.counts for item in periods])
    if (n < 0).any() or (counts < 0).any() or (counts > n[:, None]).any():
        return None
    if is_krr(mechanism) and (counts.sum(axis=1) != n).any():
        return None
    kept = n > 0
    return n[kept], counts[kept]


def no_data(mechanism: Mechanism, categories: Sequence[str], header: Header) -> Estimate:
    """The explicit "no data" estimate: no frequency, no SE, interval [0, 1]."""
    rows = [CategoryEstimate(c, None, None, 0.0, 1.0, None) for c in categories]
    return Estimate(n=0, periods=0, estimates=rows, **header)


def point_estimate(mechanism: Mechanism, pooled: Pooled, method: str) -> np.ndarray:
    """The pooled point estimate for ``method`` (unbiased, Norm-Sub, or maximum likelihood)."""
    if method == "unbiased":
        return pooled.estimate
    if method == "consistent":
        return norm_sub(pooled.estimate)
    if is_krr(mechanism):
        return krr_mle(mechanism, pooled.counts)
    return composite_mle(mechanism, pooled.counts, int(pooled.total))


def intervals_for(
    header: Header, pooled: Pooled, point: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The intervals shown for ``method``: the unbiased ones within [0, 1] (never narrower
    than their margin), for consistent and mle also within the simplex when simultaneous,
    and widened if needed to contain the point."""
    low, high = unit_interval(pooled.low, pooled.high)
    if header["method"] == "unbiased":
        return low, high
    if header["simultaneous"]:
        low, high = intersect_simplex(low, high)
    return np.minimum(low, point), np.maximum(high, point)


def category_rows(
    categories: Sequence[str],
    shown: np.ndarray,
    se: list[float | None],
    low: np.ndarray,
    high: np.ndarray,
    total: int,
    unbiased: np.ndarray,
) -> list[CategoryEstimate]:
    """One row per category: its shown share, standard error, interval, count (share x
    ``total``), unbiased share and whether that fell outside [0, 1]; shared by the categorical
    and the set estimates. Whole arrays become Python floats at once (``.tolist()`` gives
    exactly ``float(x)`` per element)."""
    columns = zip(
        categories,
        shown.tolist(),
        se,
        low.tolist(),
        high.tolist(),
        (shown * total).tolist(),
        unbiased.tolist(),
        ((unbiased < 0.0) | (unbiased > 1.0)).tolist(),
        strict=True,
    )
    return [
        CategoryEstimate(str(c), f, s, lo, hi, count, u, clipped)
        for c, f, s, lo, hi, count, u, clipped in columns
    ]


def finish(
    mechanism: Mechanism,
    categories: Sequence[str],
    header: Header,
    n_periods: int,
    pooled: Pooled,
    point: np.ndarray,
) -> Estimate:
    """Turn pooled arrays and a point estimate into the :class:`Estimate` for ``method``.

    The point shown is clipped into its interval (which moves only an unbiased estimate
    outside [0, 1]); the unbiased estimate itself is kept beside it.
    """
    low, high = intervals_for(header, pooled, point)
    shown = np.clip(point, low, high)
    unbiased = pooled.estimate
    se: list[float | None] = pooled.std_error.tolist()
    if header["method"] != "unbiased":
        se = [None] * len(se)
    total = int(pooled.total)
    margin = (pooled.high - pooled.low) / 2.0
    below = int((shown < margin).sum())
    rows = category_rows(categories, shown, se, low, high, total, unbiased)
    return Estimate(
        n=total,
        periods=n_periods,
        estimates=rows,
        margin=float(np.median(margin)),
        below_margin=below,
        margin_exceeds_most_shares=2 * below > len(rows),
        **header,
    )


def estimate(
    mechanism: Mechanism,
    categories: Sequence[str],
    periods: PeriodCounts | Sequence[PeriodCounts],
    *,
    confidence: float = 0.95,
    method: Method = "unbiased",
    simultaneous: bool = False,
    pooling: Pooling = "overlap-safe",
) -> Estimate:
    """Estimate every category's share over the given periods, with confidence intervals.

    ``simultaneous`` makes the intervals cover all categories jointly (Bonferroni);
    ``pooling`` says how periods combine (see :mod:`.pooling`). Raises
    :class:`~deniable.client.errors.InvalidInput` for bad options or counts.
    """
    return estimate_with(
        mechanism, categories, periods, confidence, method, simultaneous, pooling, None
    )


def estimate_with(
    mechanism: Mechanism,
    categories: Sequence[str],
    periods: PeriodCounts | Sequence[PeriodCounts],
    confidence: float,
    method: Method,
    simultaneous: bool,
    pooling: Pooling,
    point_for: Callable[[], np.ndarray] | None,
) -> Estimate:
    """:func:`estimate`, with the point estimate optionally supplied by ``point_for``."""
    confidence = check_options(confidence, method, pooling)
    if len(categories) != mechanism.k:
        raise InvalidInput(
            f"expected {mechanism.k} categories for this mechanism, got {len(categories)}"
        )
    n, counts = period_arrays(mechanism, periods)
    header: Header = {
        "mechanism": mechanism.name,
        "epsilon": mechanism.epsilon,
        "confidence": confidence,
        "method": method,
        "pooling": pooling,
        "simultaneous": bool(simultaneous),
    }
    if len(n) == 0:
        return no_data(mechanism, categories, header)
    alpha = per_category_alpha(confidence, mechanism.k, simultaneous)
    pooled = pool(mechanism, n, counts, alpha, pooling)
    point = point_for() if point_for else point_estimate(mechanism, pooled, method)
    return finish(mechanism, categories, header, len(n), pooled, point)
