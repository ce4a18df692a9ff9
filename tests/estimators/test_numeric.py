"""The mean of a numeric metric (STATS.md section 10): exact checks and coverage by simulation.

Coverage: a fixed finite population (values on a grid of 33 points of [-1, 1]; the estimand
is its true mean), the randomization varying across M = 5,000 trials, simulated as sufficient
statistics (testkit/numeric_draws.py: exact up to 2,000 reports, exact segment counts
with normal uniform sums at 100,000). Pass mark 4,691/5,000 (STATS.md section 8), whose false
failure at a true 95% is 9.3e-5 per check. Under a fixed population the intervals are
conservative (the population's spread counts in the sample variance): in exploratory runs the
lowest coverage over the 81 configurations was 4,726/5,000 and most were 4,750-5,000, so the
suite's seeds fail with far smaller probability. "independent undercovers" fails if >= 80% of
the intervals cover; its coverage over 7 memoized periods is about 57% (2,859-2,864/5,000; overlap-safe 4,817-4,850).
Devices drawn iid with 5% at the upper bound (pm, hybrid; eps 4 and 8; n 20 to 200) are the case a
plain t-interval missed (72% at eps 8, n 20); bench/mean_coverage.py prints the whole grid.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import Duchi, make_numeric_mechanism
from deniable.estimators import MeanEstimate, PeriodSums
from deniable.estimators.numeric import (
    axis_interval,
    estimate_mean,
    in_value_units,
    pooled_interval,
)
from testkit.numeric_draws import payloads, period_sums

M = 5_000
COVER_LOW = 4_691
GRID = np.linspace(-1.0, 1.0, 33)
MECHANISMS = ("duchi", "pm", "hybrid")


def apportion(weights: np.ndarray, n: int) -> np.ndarray:
    """Integer counts summing to n in proportion to weights (largest remainders)."""
    w = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    counts = np.floor(w * n).astype(np.int64)
    counts[np.argsort(-(w * n - counts))[: n - counts.sum()]] += 1
    return counts


def population(kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct t, counts) of a fixed population of n devices."""
    if kind == "uniform":
        return GRID, apportion(np.ones(len(GRID)), n)
    if kind == "skewed":  # lognormal(0, 1) in value units on [0, 10], clamped, on the grid
        x = (GRID + 1) / 2 * 10
        edges = np.concatenate([[0.0], (x[1:] + x[:-1]) / 2, [np.inf]])
        return GRID, apportion(np.diff(stats.lognorm.cdf(edges, 1.0)), n)
    return np.array([-1.0, 1.0]), apportion(np.array([0.9, 0.1]), n)


def covered(
    mech, n: np.ndarray, total: np.ndarray, squares: np.ndarray, truth: float, pooling: str
) -> int:
    """How many of the replicate rows' intervals (shown, clipped) contain ``truth``."""
    _, _, low, high = pooled_interval(mech, n, total, squares, 0.95, pooling)
    low, high = axis_interval(low, high)
    return int(np.sum((low <= truth) & (truth <= high)))


def test_duchi_interval_is_the_wilson_interval_mapped() -> None:
    """n = 400, 260 reports of +C1 at eps 1: Wilson by hand, mapped through t = C1(2b - 1)."""
    mech = Duchi(1.0)
    c1 = (math.e + 1) / (math.e - 1)
    n, plus = 400, 260
    result = estimate_mean(mech, PeriodSums("d", n, c1 * (2 * plus - n), n * c1 * c1))
    z = 1.959963984540054
    b = plus / n
    centre = (b + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(b * (1 - b) / n + z * z / (4 * n * n))
    assert result.estimate == pytest.approx(c1 * (2 * b - 1), rel=1e-12)
    assert result.ci_low == pytest.approx(c1 * (2 * (centre - half) - 1), rel=1e-12)
    assert result.ci_high == pytest.approx(c1 * (2 * (centre + half) - 1), rel=1e-12)
    assert result.std_error == pytest.approx(2 * c1 * math.sqrt(b * (1 - b) / (n - 1)), rel=1e-12)


@pytest.mark.parametrize("name", MECHANISMS)
def test_variance_of_the_mean_is_the_mean_of_the_variances(name: str) -> None:
    """Var(t_hat) = sum_i Var(y | t_i)/n^2: the simulated sums against the formula (R = 20,000;
    the chi-square band at a_i = 1e-6 is about +-5%)."""
    mech = make_numeric_mechanism(name, 1.0)
    values, counts = population("skewed", 200)
    total, _ = period_sums(mech, values, counts, 20_000, np.random.default_rng(11))
    formula = float(np.sum(counts * mech.variance(values))) / 200**2  # type: ignore[arg-type]
    ratio = np.var(total / 200, ddof=1) / formula
    assert abs(np.mean(total / 200) - np.sum(values * counts) / 200) < 5 * math.sqrt(
        formula / 20_000
    )
    assert 0.94 < ratio < 1.06


def test_no_reports_is_a_null_estimate_over_the_whole_range() -> None:
    mech = make_numeric_mechanism("pm", 1.0)
    assert estimate_mean(mech, []) == MeanEstimate(None, None, -1.0, 1.0)
    assert in_value_units(estimate_mean(mech, [PeriodSums("a", 0, 0.0, 0.0)]), 0, 5000) == (
        MeanEstimate(None, None, 0.0, 5000.0)
    )


def test_value_units_map_the_ends_and_the_point_stays_inside() -> None:
    mech = make_numeric_mechanism("pm", 2.0)
    rng = np.random.default_rng(3)
    y = payloads(mech, np.full(30, 0.98), rng)
    result = estimate_mean(mech, PeriodSums("a", 30, float(y.sum()), float((y * y).sum())))
    assert -1 <= result.ci_low <= result.estimate <= result.ci_high <= 1
    shown = in_value_units(result, 0, 5000)
    assert shown.ci_low == pytest.approx(2500 * (result.ci_low + 1))
    assert shown.ci_high == pytest.approx(2500 * (result.ci_high + 1))
    assert shown.std_error == pytest.approx(2500 * result.std_error)
    assert shown.ci_low <= shown.estimate <= shown.ci_high


def test_sums_out_of_bounds_are_refused() -> None:
    mech = make_numeric_mechanism("duchi", 1.0)
    with pytest.raises(InvalidInput):
        estimate_mean(mech, PeriodSums("a", 2, 10.0, 8.0))
    with pytest.raises(InvalidInput):
        estimate_mean(mech, [PeriodSums("a", 2, 0.0, 8.0), PeriodSums("a", 2, 0.0, 8.0)])
    with pytest.raises(InvalidInput):
        estimate_mean(mech, PeriodSums("a", 2, 0.0, 8.0), pooling="everything")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", MECHANISMS)
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_mean_interval_covers(name: str, eps: float) -> None:
    """95% intervals cover the population mean in >= 4,691/5,000 trials, 9 cases per test."""
    mech = make_numeric_mechanism(name, eps)
    rng = np.random.default_rng(int(eps * 100) + len(name))
    misses = []
    for n in (50, 1_000, 100_000):
        for kind in ("uniform", "skewed", "two-point"):
            values, counts = population(kind, n)
            truth = float(np.sum(values * counts)) / n
            total, squares = period_sums(mech, values, counts, M, rng)
            got = covered(
                mech, np.full((M, 1), n), total[:, None], squares[:, None], truth, "overlap-safe"
            )
            if got < COVER_LOW:
                misses.append((n, kind, got))
    assert not misses


T = 7
PARTICIPATION = np.array([1.0, 0.9, 0.8, 1.0, 0.7, 0.95, 0.85])


@pytest.mark.parametrize("name", MECHANISMS)
def test_memoized_devices_over_seven_periods(name: str) -> None:
    """1,000 devices (skewed population, eps 1) each repeat one randomized payload in every
    period they take part in: overlap-safe covers, independent (7 periods counted as distinct
    devices, about sqrt(6.2) too narrow) does not."""
    mech = make_numeric_mechanism(name, 1.0)
    rng = np.random.default_rng(70 + len(name))
    values, counts = population("skewed", 1_000)
    t = np.repeat(values, counts)
    y = payloads(mech, np.broadcast_to(t, (M, len(t))), rng)
    present = rng.random((M, T, len(t))) < PARTICIPATION[None, :, None]
    n = present.sum(axis=2).astype(np.float64)
    total = np.einsum("rtd,rd->rt", present, y)
    squares = np.einsum("rtd,rd->rt", present, y * y)
    # the estimand: the report-weighted mean of t over the range, per trial
    weighted = np.einsum("rtd,d->r", present, t) / n.sum(axis=1)
    safe_low, safe_high = axis_interval(
        *pooled_interval(mech, n, total, squares, 0.95, "overlap-safe")[2:]
    )
    ind_low, ind_high = axis_interval(
        *pooled_interval(mech, n, total, squares, 0.95, "independent")[2:]
    )
    assert np.sum((safe_low <= weighted) & (weighted <= safe_high)) >= COVER_LOW
    assert np.sum((ind_low <= weighted) & (weighted <= ind_high)) < 0.8 * M


def test_planner_for_the_mean() -> None:
    """Margin at n and reports for a margin invert each other; the margin is the product's
    interval for half the values at each end (tests/estimators/test_planner.py checks it
    over populations); auto is planned as the mechanism a spec's auto resolves to."""
    from deniable.client.mechanisms import least_worst_case_variance
    from deniable.estimators import mean_margin, mean_reports_needed

    mech = make_numeric_mechanism("pm", 1.0)
    sums = PeriodSums("d", 10_000, 0.0, 10_000 * (mech.variance(1.0) + 1.0))
    worst = in_value_units(estimate_mean(mech, sums), 0, 5000)
    margin = mean_margin(0, 5000, 1.0, 10_000, mechanism="pm")
    assert margin == pytest.approx((worst.ci_high - worst.ci_low) / 2, rel=1e-12)
    n = mean_reports_needed(0, 5000, 1.0, 50.0, mechanism="pm")
    assert (
        mean_margin(0, 5000, 1.0, n, mechanism="pm")
        <= 50.0
        < mean_margin(0, 5000, 1.0, n - 1, mechanism="pm")
    )
    for eps in (0.25, 1.0, 4.0):
        auto = least_worst_case_variance(eps)
        assert mean_margin(0, 1, eps, 100) == mean_margin(0, 1, eps, 100, mechanism=auto)


def bound_population(n: int, rng: np.random.Generator, reps: int) -> np.ndarray:
    """n devices drawn iid per replicate: t = 1 with probability 5%, else t = -1."""
    return np.where(rng.random((reps, n)) < 0.05, 1.0, -1.0)


@pytest.mark.parametrize("name", ["pm", "hybrid"])
@pytest.mark.parametrize(("eps", "n"), [(8.0, 20), (8.0, 50), (4.0, 20), (4.0, 200)])
def test_rare_values_at_a_bound_are_covered_at_small_n(name: str, eps: float, n: int) -> None:
    """Devices drawn iid, 5% at the upper bound (issue 23 item 5): a sample of 20 misses them
    36% of the time and the plain t-interval covered 72%; the variance bound must cover the
    population mean (-0.9) in >= 4,691/5,000 trials."""
    mech = make_numeric_mechanism(name, eps)
    rng = np.random.default_rng(int(eps) * 1_000 + n + len(name))
    y = payloads(mech, bound_population(n, rng, M), rng)
    got = covered(
        mech,
        np.full((M, 1), n),
        y.sum(axis=1)[:, None],
        (y * y).sum(axis=1)[:, None],
        -0.9,
        "overlap-safe",
    )
    assert got >= COVER_LOW
