"""A plan meets its margin with the product's own interval (issue 23 items 4 and 9).

For shares: at the planned n, every support count a share in [0, 1] gives on average (n q* to
n p*, rounded outward) is put through the estimates' own interval function
(:func:`~deniable.estimators.intervals.share_interval`: Wilson, hulled with Clopper-Pearson at
small counts, Bonferroni when simultaneous), and the widest half-width must be within the
margin; at n - 1 it must not be (the plan claims the fewest reports). This enumerates the
counts, so it also checks the planner's choice of the worst-case count.

For means: at the planned n, the product's :func:`~deniable.estimators.numeric.estimate_mean`
on the expected sums of each population of a grid (two-point populations at the ends with
every weight, point masses, a uniform spread) must be within the margin, and at n - 1 the
worst-case population (half at each end) must exceed it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from deniable.client.mechanisms import NUMERIC_MECHANISMS, make_mechanism, make_numeric_mechanism
from deniable.estimators import PeriodSums, estimate_mean
from deniable.estimators.advisor import (
    candidate_mechanisms,
    margin_of_error,
    mean_margin,
    mean_reports_needed,
    numeric_plan_document,
    plan_document,
    reports_needed,
    worst_means,
)
from deniable.estimators.intervals import per_category_alpha, share_interval

KS = (2, 5, 30, 200)
EPSILONS = (0.5, 1.0, 4.0, 8.0)
MARGINS = (0.04, 0.2)
MOST_COUNTS = 200_000
"""Plans needing more reports than this are left out of the enumeration (time)."""


def widest(name: str, k: int, epsilon: float, n: int, alpha: float) -> float:
    """The widest half-width of the product's share interval over every count from
    floor(n q*) to ceil(n p*)."""
    mech = make_mechanism(name, k, epsilon)
    low = math.floor(n * min(mech.p_star, mech.q_star))
    high = min(n, math.ceil(n * max(mech.p_star, mech.q_star)))
    counts = np.arange(low, high + 1, dtype=np.float64)
    lo, hi = share_interval(mech, counts, np.full_like(counts, float(n)), alpha)
    return float(np.max(hi - lo) / 2)


@pytest.mark.parametrize("simultaneous", [True, False])
def test_the_planned_n_meets_the_margin_with_the_products_interval(simultaneous: bool) -> None:
    checked = 0
    for k in KS:
        alpha = per_category_alpha(0.95, k, simultaneous)
        for epsilon in EPSILONS:
            for margin in MARGINS:
                for name in candidate_mechanisms(k):
                    if name == "krr" and k > 100:
                        continue
                    n = reports_needed(k, epsilon, margin, 0.95, name, simultaneous)
                    if n > MOST_COUNTS:
                        continue
                    case = (name, k, epsilon, margin, n)
                    assert widest(name, k, epsilon, n, alpha) <= margin, case
                    assert n == 1 or widest(name, k, epsilon, n - 1, alpha) > margin, case
                    checked += 1
    assert checked >= 60


def test_the_plan_documents_defaults_are_the_estimates_intervals() -> None:
    """The issue's cases: k = 5, eps 1, ±2 points for all categories at once (what the
    estimates show) needs more reports than for each category alone; at k = 30, eps 8,
    ±10 points per category, krr's 98 reports (the Wald plan) give ±10.4 points."""
    together = reports_needed(5, 1.0, 0.02)
    alone = reports_needed(5, 1.0, 0.02, simultaneous=False)
    assert together > 1.6 * alone
    assert margin_of_error(30, 8.0, 98, mechanism="krr", simultaneous=False) > 0.1
    n = reports_needed(30, 8.0, 0.1, mechanism="krr", simultaneous=False)
    assert widest("krr", 30, 8.0, n, 0.05) <= 0.1 < widest("krr", 30, 8.0, n - 1, 0.05)
    document = plan_document(5, 1.0, margin=0.02, reports=None, confidence=0.95, simultaneous=True)
    rows = {r["mechanism"]: r["reports_needed"] for r in document["mechanisms"]}
    assert rows[document["advised"]] == together == min(rows.values())


def populations(mech, n: int) -> list[tuple[str, float, float]]:  # type: ignore[no-untyped-def]
    """(name, mean of t, E[y^2] per report) of a grid of populations on [-1, 1], with the
    two-point ones the planner names as the widest at n reports."""
    out = []
    weights = [*np.linspace(0.0, 1.0, 11), *((1 + m) / 2 for m in worst_means(mech, n))]
    for weight in weights:  # a share `weight` at +1, the rest at -1
        mean = 2 * weight - 1
        moment = weight * (mech.variance(1.0) + 1) + (1 - weight) * (mech.variance(-1.0) + 1)
        out.append((f"ends {weight:.1f}", mean, moment))
    for t in (-1.0, -0.5, 0.0, 0.3, 1.0):
        out.append((f"all at {t}", t, mech.variance(t) + t * t))
    grid = np.linspace(-1.0, 1.0, 2001)
    uniform = float(np.mean(mech.variance(grid) + grid * grid))
    out.append(("uniform", 0.0, uniform))
    return out


def half_width(mech, n: int, mean: float, moment: float) -> float:  # type: ignore[no-untyped-def]
    """The product's interval half-width (t axis) from the expected sums of n reports."""
    result = estimate_mean(mech, PeriodSums("p", n, n * mean, n * moment))
    return (result.ci_high - result.ci_low) / 2


@pytest.mark.parametrize("name", list(NUMERIC_MECHANISMS))
def test_the_planned_n_meets_the_mean_margin_for_every_population(name: str) -> None:
    for epsilon in (0.5, 1.0, 2.0, 4.0, 8.0):
        mech = make_numeric_mechanism(name, epsilon)
        for lower, upper, share in ((0, 1000, 0.02), (-3, 5, 0.05), (0, 1000, 0.1), (0, 1, 0.3)):
            margin = share * (upper - lower)
            n = mean_reports_needed(lower, upper, epsilon, margin, mechanism=name)
            wanted = margin / ((upper - lower) / 2)
            case = (name, epsilon, lower, upper, margin, n)
            for label, mean, moment in populations(mech, n):
                assert half_width(mech, n, mean, moment) <= wanted, (*case, label)
            fewer = [half_width(mech, n - 1, m, w) for _, m, w in populations(mech, n - 1)]
            assert n == 1 or max(fewer) > wanted, case
            assert mean_margin(lower, upper, epsilon, n, mechanism=name) <= margin


def test_the_reported_numeric_case() -> None:
    """Range [0, 1000], eps 8, ±50: the old plan marked hybrid at 10 reports, whose interval
    with half the population at each end is ±384; the plan now meets ±50 there."""
    assert mean_margin(0, 1000, 8.0, 10, mechanism="hybrid") > 350
    document = numeric_plan_document(0, 1000, 8.0, margin=50, reports=None, confidence=0.95)
    rows = {r["mechanism"]: r["reports_needed"] for r in document["mechanisms"]}
    assert rows["hybrid"] > 300
    assert rows[document["advised"]] == min(rows.values())
    mech = make_numeric_mechanism(document["advised"], 8.0)
    assert half_width(mech, rows[document["advised"]], 0.0, 1.0 + mech.variance(1.0)) <= 0.1
