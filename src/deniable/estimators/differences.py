"""Differences between two estimates, with a covering interval and a plain verdict.

One source of truth for how a difference is read (:func:`verdict`: "higher", "lower" or
"no detectable change at 95%") and for its interval, for both comparisons deniable answers:

* **Two slices** (``compare=ios,android``): :func:`interval_difference` of the two slices'
  shown intervals. Every shown interval of a breakdown holds at once, so on that event each
  difference lies in [low1 - high2, high1 - low2], whatever the slices' dependence.
* **Two windows of periods** (``compare_to=``, this week minus last week): :func:`share_changes`
  and :func:`mean_change`. The same devices may report in both windows (and in several periods
  of each), memoized or not, so the two estimates may be correlated either way. The difference
  D^ = theta^_A - theta^_B is a linear combination of per-period estimates with coefficients
  +-w_t, so by Minkowski SD(D^) <= sum_t w_t SD(f^_t) + sum_s w'_s SD(f^_s), whatever the
  correlations (equality when the windows are perfectly anti-correlated). The interval is
  therefore [L_A - U_B, U_A - L_B] from each window's *unclipped* overlap-safe interval at the
  row's own level, not a Bonferroni split: to first order D^ +- z (SE_A + SE_B), which covers
  at that level under any dependence between and within the windows (STATS.md section 13;
  ``bench/breakdown_coverage.py`` measures it). Root-sum-of-squares (independent windows)
  would undercover when devices' values move against each other between the windows.

Each row's level is 1 - alpha / (slices x rows), so every difference shown holds at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from deniable.client.mechanisms import Mechanism, NumericMechanism

from .choices import Pooling, check_options
from .frequency import period_arrays, point_estimate
from .numeric import pooled_interval, sums_arrays
from .pooling import pool
from .results import PeriodCounts, PeriodSums

HIGHER = "higher"
LOWER = "lower"


def dependence(pooling: str) -> str:
    """What a period comparison's ``dependence`` field says (docs/DESIGN.md): how the interval
    treats devices reporting in both windows (always: whatever they do) and in several periods
    of one window (as ``pooling`` says)."""
    within = (
        "or in several periods of one, memoized or not"
        if pooling == "overlap-safe"
        else "(each window pooled as independent: valid only if no device reports twice in it)"
    )
    return (
        f"{pooling}: each interval adds the two windows' half-widths (Minkowski), so it holds"
        f" whatever devices report in both windows {within}; it never assumes the windows"
        " independent"
    )


def no_change(confidence: float) -> str:
    """The verdict of an interval containing 0: ``no detectable change at 95%`` (99.99%)."""
    return f"no detectable change at {confidence * 100:.4g}%"


def verdict(low: float, high: float, confidence: float) -> str:
    """``higher`` if the difference's interval lies above 0, ``lower`` below, otherwise no
    detectable change at ``confidence`` (so a false "changed" happens at most 1 - confidence
    of the time when the intervals hold at that level)."""
    if low > 0:
        return HIGHER
    if high < 0:
        return LOWER
    return no_change(confidence)


def interval_difference(
    first: tuple[float, float], second: tuple[float, float]
) -> tuple[float, float]:
    """The interval of first minus second from their intervals: [low1 - high2, high1 - low2]."""
    return first[0] - second[1], first[1] - second[0]


@dataclass(frozen=True)
class Change:
    """One category's share (or a mean) in the current window, in the baseline window, and
    the difference current minus baseline with its interval and verdict. Without reports in
    either window the points are null and the interval the whole possible range."""

    category: str
    current: float | None
    baseline: float | None
    difference: float | None
    ci_low: float
    ci_high: float
    verdict: str


def row_alpha(confidence: float, rows: int, tests: int = 1) -> float:
    """The miss probability of each difference interval when ``tests`` × ``rows`` are shown
    at once (Bonferroni)."""
    return (1.0 - confidence) / (max(1, tests) * max(1, rows))


def finished_change(
    category: str,
    points: tuple[float | None, float | None],
    bounds: tuple[tuple[float, float], tuple[float, float]] | None,
    span: float,
    confidence: float,
) -> Change:
    """A :class:`Change` from the two windows' points and unclipped intervals (None: a window
    without reports): the interval widened to contain the shown difference, within +-span."""
    current, baseline = points
    if bounds is None or current is None or baseline is None:
        return Change(category, current, baseline, None, -span, span, no_change(confidence))
    difference = current - baseline
    low, high = interval_difference(*bounds)
    low = float(np.clip(min(low, difference), -span, span))
    high = float(np.clip(max(high, difference), -span, span))
    return Change(
        category, current, baseline, difference, low, high, verdict(low, high, confidence)
    )


def share_changes(
    mechanism: Mechanism,
    categories: Sequence[str],
    current: Sequence[PeriodCounts],
    baseline: Sequence[PeriodCounts],
    *,
    confidence: float = 0.95,
    tests: int = 1,
    method: str = "consistent",
    pooling: Pooling = "overlap-safe",
) -> list[Change]:
    """Each category's share in ``current`` minus ``baseline`` (each window pooled as
    ``pooling``), every row's interval at 1 - alpha/(tests × k) so that all ``tests`` × k rows
    hold at once at ``confidence``. The points are ``method``'s (as the estimate shows them);
    the interval is the unbiased windows' (Minkowski, module docstring), widened to contain
    the shown difference. :class:`~deniable.client.errors.InvalidInput` for bad counts."""
    confidence = check_options(confidence, method, pooling)
    alpha = row_alpha(confidence, mechanism.k, tests)
    first = _share_window(mechanism, current, alpha, method, pooling)
    second = _share_window(mechanism, baseline, alpha, method, pooling)
    return window_changes(categories, first, second, confidence)


Window = tuple[np.ndarray, np.ndarray, np.ndarray]
"""One window's shown point, unclipped low and unclipped high bound per category."""


def window_changes(
    categories: Sequence[str], first: Window | None, second: Window | None, confidence: float
) -> list[Change]:
    """Each category's change from the ``second`` window to the ``first`` (None: a window
    without reports, so no interval), as :func:`share_changes` and the set's changes state it."""
    rows = []
    for i, category in enumerate(categories):
        if first is None or second is None:
            points = (
                None if first is None else float(first[0][i]),
                None if second is None else float(second[0][i]),
            )
            rows.append(finished_change(str(category), points, None, 1.0, confidence))
            continue
        (a, a_low, a_high), (b, b_low, b_high) = first, second
        bounds = ((float(a_low[i]), float(a_high[i])), (float(b_low[i]), float(b_high[i])))
        rows.append(
            finished_change(str(category), (float(a[i]), float(b[i])), bounds, 1.0, confidence)
        )
    return rows


def _share_window(
    mechanism: Mechanism,
    periods: Sequence[PeriodCounts],
    alpha: float,
    method: str,
    pooling: Pooling,
) -> Window | None:
    """One window's shown points and unclipped pooled bounds per category (None: no reports)."""
    n, counts = period_arrays(mechanism, periods)
    if len(n) == 0:
        return None
    pooled = pool(mechanism, n, counts, alpha, pooling)
    point = np.clip(point_estimate(mechanism, pooled, method), 0.0, 1.0)
    return point, pooled.low, pooled.high


def mean_change(
    mechanism: NumericMechanism,
    lower: float,
    upper: float,
    current: Sequence[PeriodSums],
    baseline: Sequence[PeriodSums],
    *,
    confidence: float = 0.95,
    tests: int = 1,
    pooling: Pooling = "overlap-safe",
) -> Change:
    """The mean in ``current`` minus ``baseline`` in value units (each window pooled as
    ``pooling``), its interval at 1 - alpha/tests (Minkowski over the windows' unclipped
    intervals on the [-1, 1] axis, then scaled by (upper - lower)/2)."""
    confidence = check_options(confidence, "unbiased", pooling)
    level = 1.0 - row_alpha(confidence, 1, tests)
    scale = (upper - lower) / 2.0
    first = _mean_window(mechanism, current, level, pooling)
    second = _mean_window(mechanism, baseline, level, pooling)
    points = (
        None if first is None else lower + scale * (first[0] + 1.0),
        None if second is None else lower + scale * (second[0] + 1.0),
    )
    if first is None or second is None:
        return finished_change("mean", points, None, upper - lower, confidence)
    (_, a_low, a_high), (_, b_low, b_high) = first, second
    bounds = ((a_low * scale, a_high * scale), (b_low * scale, b_high * scale))
    return finished_change("mean", points, bounds, upper - lower, confidence)


def _mean_window(
    mechanism: NumericMechanism, periods: Sequence[PeriodSums], level: float, pooling: Pooling
) -> tuple[float, float, float] | None:
    """One window's pooled mean (clipped to [-1, 1]) and unclipped bounds (None: no reports)."""
    n, total, squares = sums_arrays(mechanism, periods)
    if len(n) == 0:
        return None
    mean, _, low, high = pooled_interval(mechanism, n, total, squares, level, pooling)
    return float(np.clip(mean, -1.0, 1.0)), float(low), float(high)
