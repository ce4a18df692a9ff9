"""The mean of a numeric metric from per-period sums, with an honest confidence interval.

STATS.md section 10. Each report's payload y is unbiased for its scaled value t in [-1, 1], so
t_hat = sum(y)/n estimates the mean of t; everything here is on that axis, and
:func:`in_value_units` maps a result to [lower, upper] (an increasing affine map: the ends map
to the ends).

One period:

* ``duchi`` (and ``hybrid`` at eps <= 0.6094, which is duchi): y = +-C1, so the count of +C1,
  recovered as round((total/C1 + n)/2), is Bin(n, b) with t = C1(2b - 1). The interval is the
  brr one (Wilson, hulled with Clopper-Pearson where fewer than 50 reports lie on a side,
  :func:`~.intervals.rate_interval`) mapped through that increasing map: Wald undercovers near
  b = 0 or 1.
* ``pm`` and ``hybrid``: a t-interval t_hat +- t_{n-1} sqrt(v/n) whose v is an upper
  confidence bound of the per-report variance (:func:`variance_bound`): the mechanism's own
  noise at the observed mean (a floor, by Jensen) plus the devices' spread, the sample's
  excess over the floor widened by an empirical-Bernstein allowance (Maurer & Pontil 2009)
  that fades like 1/sqrt(n). The estimand is the mean of a population the devices are drawn
  from at random (iid), as for shares; a fixed population of devices is covered too (its
  variance is smaller). A plain t-interval undercovers when a few dozen devices miss a rare
  value at a bound (eps 8, n 20, 5% at the upper bound: 72% coverage); with the allowance the
  lowest coverage over duchi, pm and hybrid, eps 0.25-8, n 10-100,000, fixed and iid, a
  two-point and a skewed population is 0.946 (bench/mean_coverage.py prints the table). The
  cost is width where the spread dominates the noise: iid at eps 8, 1.3-1.4 times the Wald
  width at n = 1,000 and 1.03-1.04 at 100,000; at eps <= 1 within 4% from n = 1,000.
  ``std_error`` is the plain sqrt(max(s^2, floor)/n). The planner
  (:func:`~.advisor.mean_half_width`) plans against this interval.

The point shown lies inside its interval, both clipped to [-1, 1] consistently
(:func:`~.intervals.unit_interval` on the axis (t + 1)/2: an interval the data pushed past an
end keeps its margin).

Several periods (section 9): ``overlap-safe`` (the default) averages the per-period unclipped
ends and standard errors with weights n_t / N, valid whatever the overlap of devices;
``independent`` pools the sums as one period of N distinct devices, valid only if no device
reports twice in the range (memoized devices repeat their payload, and it undercovers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import Duchi, Hybrid, NumericMechanism

from .choices import Pooling, check_options
from .intervals import rate_interval, unit_interval
from .results import MeanEstimate, PeriodSums

SLACK = 1e-9
"""Relative tolerance on the sums' bounds (the collector's tolerance on each payload)."""


def is_two_point(mechanism: NumericMechanism) -> bool:
    """Whether every payload is +-C1 (duchi, or hybrid at or below eps*)."""
    return isinstance(mechanism, Duchi) or (
        isinstance(mechanism, Hybrid) and mechanism.pm_probability == 0.0
    )


def sums_arrays(
    mechanism: NumericMechanism, periods: PeriodSums | Sequence[PeriodSums]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate the periods; return (n, total, total_squares) arrays of shape (T,), n = 0 dropped."""
    if isinstance(periods, PeriodSums):
        periods = [periods]
    bound = mechanism.bound
    seen: set[str] = set()
    rows: list[tuple[int, float, float]] = []
    for item in periods:
        if not isinstance(item, PeriodSums):
            raise InvalidInput("periods must be PeriodSums")
        if item.period in seen:
            raise InvalidInput(f"period {item.period!r} appears more than once")
        seen.add(item.period)
        n = item.n
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise InvalidInput(f"period {item.period!r}: n must be a non-negative integer")
        total, squares = float(item.total), float(item.total_squares)
        if not (math.isfinite(total) and math.isfinite(squares)):
            raise InvalidInput(f"period {item.period!r}: the sums must be finite")
        if abs(total) > n * bound * (1 + SLACK) or not (
            -SLACK <= squares <= n * bound * bound * (1 + SLACK)
        ):
            raise InvalidInput(f"period {item.period!r}: the sums exceed n payloads of |y| <= C")
        if n > 0:
            rows.append((int(n), total, squares))
    n_arr = np.array([r[0] for r in rows], dtype=np.float64)
    return n_arr, np.array([r[1] for r in rows]), np.array([r[2] for r in rows])


def largest_variance(mechanism: NumericMechanism) -> float:
    """The largest Var(y) of one report over every population of t in [-1, 1]: Var(y | 1) + 1.

    Var(y) = E[Var(y | t)] + Var(t), and Var(y | t) = a + b t^2 (pm: b = 1/(s - 1), hybrid:
    b = 0), so Var(y) = a + b mu^2 + (1 + b) Var(t) <= a + b + 1, reached by half the
    devices at each bound.
    """
    return mechanism.variance(1.0) + 1.0


def variance_bound(
    mechanism: NumericMechanism, n: np.ndarray, sample: np.ndarray, mean: np.ndarray, alpha: float
) -> np.ndarray:
    """An upper confidence bound v on the per-report variance of pm and hybrid payloads.

    v = floor + (sqrt(max(s^2 - floor, 0)) + sqrt(1 + b) * e)^2 with floor = Var(y | clamp(t_hat))
    (the mechanism's own noise, a lower bound of its mean over devices by Jensen), s^2 the sample
    variance and e = 2 sqrt(2 ln(1/alpha)/(n - 1)) the empirical-Bernstein allowance for the
    devices' spread (Maurer & Pontil 2009, Theorem 10: the SD of variables with range 2 exceeds
    the sample SD by more than e with probability at most alpha), scaled by sqrt(1 + b) because
    the spread enters Var(y) as (1 + b) Var(t) (:func:`largest_variance`). A sample of a few
    dozen devices that missed a rare value at a bound shows a small s^2; e is what keeps the
    interval honest then, and it fades like 1/sqrt(n). Never above :func:`largest_variance`;
    that alone with a single report.
    """
    floor = mechanism.variance(np.clip(mean, -1.0, 1.0))
    slope = 1.0 + mechanism.variance(1.0) - mechanism.variance(0.0)
    cap = largest_variance(mechanism)
    with np.errstate(divide="ignore", invalid="ignore"):
        allowance = 2.0 * np.sqrt(slope * 2.0 * math.log(1.0 / alpha) / (n - 1.0))
        spread = np.sqrt(np.maximum(sample - floor, 0.0))
        bound = floor + (spread + allowance) ** 2
    return np.where(n > 1, np.minimum(bound, cap), cap)


def period_intervals(
    mechanism: NumericMechanism,
    n: np.ndarray,
    total: np.ndarray,
    squares: np.ndarray,
    confidence: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-period (mean, SE, unclipped low, unclipped high) on the t axis; arrays broadcast
    (leading axes such as simulation replicates are kept), every n > 0."""
    from scipy import stats  # lazy: scipy.stats costs ~0.5 s at collector start-up

    n = np.asarray(n, dtype=np.float64)
    mean = np.asarray(total, dtype=np.float64) / n
    alpha = 1.0 - confidence
    with np.errstate(divide="ignore", invalid="ignore"):
        sample = np.maximum(np.asarray(squares) - total * mean, 0.0) / (n - 1.0)
    if is_two_point(mechanism):
        c1 = mechanism.bound
        plus = np.clip(np.round((total / c1 + n) / 2.0), 0.0, n)
        low, high = rate_interval(plus, n, alpha)
        variance = np.where(n > 1, sample, c1 * c1)
        return mean, np.sqrt(variance / n), c1 * (2 * low - 1), c1 * (2 * high - 1)
    floor = mechanism.variance(np.clip(mean, -1.0, 1.0))
    variance = np.where(n > 1, np.maximum(sample, floor), mechanism.worst_case_variance)
    bound = variance_bound(mechanism, n, sample, mean, alpha)
    half = stats.t.isf(alpha / 2, np.maximum(n - 1.0, 1.0)) * np.sqrt(bound / n)
    return mean, np.sqrt(variance / n), mean - half, mean + half


def axis_interval(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clip intervals to [-1, 1], never leaving one narrower than its margin (as
    :func:`~.intervals.unit_interval` does on [0, 1])."""
    new_low, new_high = unit_interval((np.asarray(low) + 1) / 2, (np.asarray(high) + 1) / 2)
    return 2 * new_low - 1, 2 * new_high - 1


def pooled_interval(
    mechanism: NumericMechanism,
    n: np.ndarray,
    total: np.ndarray,
    squares: np.ndarray,
    confidence: float,
    pooling: Pooling,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(pooled mean, SE, unclipped low, unclipped high) over the last axis (periods)."""
    n = np.asarray(n, dtype=np.float64)
    big_n = n.sum(axis=-1)
    mean = np.asarray(total).sum(axis=-1) / big_n
    if pooling == "independent":
        _, se, low, high = period_intervals(
            mechanism, big_n, np.sum(total, axis=-1), np.sum(squares, axis=-1), confidence
        )
        return mean, se, low, high
    weights = n / big_n[..., None]
    _, se_t, low_t, high_t = period_intervals(mechanism, n, total, squares, confidence)
    return (
        mean,
        (weights * se_t).sum(axis=-1),
        (weights * low_t).sum(axis=-1),
        (weights * high_t).sum(axis=-1),
    )


def estimate_mean(
    mechanism: NumericMechanism,
    periods: PeriodSums | Sequence[PeriodSums],
    *,
    confidence: float = 0.95,
    pooling: Pooling = "overlap-safe",
) -> MeanEstimate:
    """The mean of t in [-1, 1] over the given periods with its confidence interval.

    Without reports: a null estimate and SE with the interval [-1, 1] (as a categorical
    estimate without reports has [0, 1]). Raises :class:`~deniable.client.errors.InvalidInput`
    for bad options or sums.
    """
    confidence = check_options(confidence, "unbiased", pooling)
    n, total, squares = sums_arrays(mechanism, periods)
    if len(n) == 0:
        return MeanEstimate(None, None, -1.0, 1.0)
    mean, se, low, high = pooled_interval(mechanism, n, total, squares, confidence, pooling)
    low, high = axis_interval(low, high)
    return MeanEstimate(float(np.clip(mean, low, high)), float(se), float(low), float(high))


def to_value(t: float, lower: float, upper: float) -> float:
    """A point of the [-1, 1] axis in value units: lower + (upper - lower)(t + 1)/2, in
    [lower, upper] (the fraction is taken first, so no intermediate exceeds the range's width)."""
    return min(max(lower + (upper - lower) * ((t + 1) / 2), lower), upper)


def in_value_units(result: MeanEstimate, lower: float, upper: float) -> MeanEstimate:
    """``result`` in value units: the map is increasing and affine, so the ends map to the
    ends and the standard error scales by (upper - lower)/2."""
    if not lower < upper:
        raise InvalidInput("lower must be less than upper")
    return MeanEstimate(
        None if result.estimate is None else to_value(result.estimate, lower, upper),
        None if result.std_error is None else result.std_error * (upper - lower) / 2,
        to_value(result.ci_low, lower, upper),
        to_value(result.ci_high, lower, upper),
    )
