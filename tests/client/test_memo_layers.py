"""Memoized reports in two layers (RAPPOR's permanent answer, then a fresh randomization on every
report): the privacy account checked against the exact output distribution of the real client.

Every history of true values of length T is recorded by a real Recorder and Ledger, and every
path of their randomness is walked exactly (``testkit.transitions.reports_of_history``),
so the largest log likelihood ratio between the reports of any two histories is computed, not
sampled. The account's figure for T reports must bound it, and equal it where the account is
tight (one report; fresh reports; memoized without the fresh layer, where it is unbounded).
The collector debiases memoized reports like anyone's: the two layers compose exactly into the
metric's own mechanism, and the estimate's expectation and coverage hold for them.
bench/memo_enumeration.py prints the same comparison for longer histories.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from deniable.client import MetricSpec
from deniable.client.account import DeviceSettings, privacy_account
from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import BRR, KRR, two_layers
from deniable.estimators import PeriodCounts, estimate
from deniable.estimators.pooling import debias
from testkit.transitions import max_log_ratio, reports_of_history

TIGHT = 1e-9


def spec_for(k: int, epsilon: float, mechanism: str = "krr") -> MetricSpec:
    """A boolean metric (k = 2) or a categorical one with k categories."""
    if k == 2 and mechanism == "krr":
        return MetricSpec.boolean("m", epsilon=epsilon)
    categories = [f"c{i}" for i in range(k)]
    return MetricSpec.categorical("m", categories, epsilon=epsilon, mechanism=mechanism)


def values_of(spec: MetricSpec) -> list:
    """The values a device can record for ``spec``."""
    return [False, True] if spec.type == "boolean" else list(spec.categories)


def largest_log_ratios(spec: MetricSpec, settings: DeviceSettings, length: int):
    """The largest log-LR over every pair of histories, and over pairs of constant histories."""
    histories = list(itertools.product(values_of(spec), repeat=length))
    reports = {h: reports_of_history(spec, settings, h) for h in histories}
    for distribution in reports.values():
        assert math.isclose(sum(distribution.values()), 1.0, abs_tol=1e-12)
    every = max(max_log_ratio(reports[a], reports[b]) for a in histories for b in histories)
    constant = [tuple([v] * length) for v in values_of(spec)]
    same = max(max_log_ratio(reports[a], reports[b]) for a in constant for b in constant)
    return every, same


CASES = [
    # (k, eps, memoize, instantaneous_ratio, T)
    *[(2, 1.0, True, 2.0, t) for t in (1, 2, 3)],
    *[(3, 1.0, True, 2.0, t) for t in (1, 2)],
    (2, 0.5, True, 3.0, 2),
    *[(2, 1.0, True, None, t) for t in (1, 2)],
    (3, 1.0, True, None, 2),
    *[(2, 1.0, False, 2.0, t) for t in (1, 2)],
]


@pytest.mark.parametrize(("k", "epsilon", "memoize", "ratio", "length"), CASES)
def test_the_account_bounds_every_pair_of_histories_of_the_real_client(
    k: int, epsilon: float, memoize: bool, ratio: float | None, length: int
) -> None:
    spec = spec_for(k, epsilon)
    settings = DeviceSettings(length, memoize, None, ratio)
    account = privacy_account([spec], settings).metrics[0]
    figure = math.inf if account.per_period is None else account.per_period
    every, same = largest_log_ratios(spec, settings, length)
    assert every <= figure + TIGHT
    tight = length == 1 or not memoize or ratio is None
    if tight:
        assert every == figure or abs(every - figure) <= TIGHT
    if memoize:
        assert account.permanent_epsilon is not None
        assert same <= account.permanent_epsilon + TIGHT  # reports of unchanged values
        if ratio is None:
            assert abs(same - epsilon) <= TIGHT  # the permanent answer is the mechanism
    if memoize and ratio is not None and length > 1:
        assert math.isfinite(every)
        assert every > length * epsilon * 0.5  # the figure is not vacuous: reports do add up


@pytest.mark.parametrize(
    ("mechanism", "ratio"),
    [(BRR(2, 1.0), 2.0), (BRR(2, 0.3), 1.5), (KRR(3, 1.0), 2.0), (KRR(50, 2.0), 3.0)],
    ids=repr,
)
def test_two_layers_compose_into_the_metric_mechanism(mechanism: KRR, ratio: float) -> None:
    """STATS.md section 6: p* = p1 p2 + (1 - p1) q2, q* = q1 p2 + (1 - q1) q2, equal to the
    metric's own p and q, so one report through both layers is the metric's mechanism."""
    layers = two_layers(mechanism, ratio)
    assert layers is not None
    p1, q1 = layers.permanent.p, layers.permanent.q
    p2, q2 = layers.instantaneous.p, layers.instantaneous.q
    assert abs(p1 * p2 + (1 - p1) * q2 - mechanism.p) <= 1e-12
    assert abs(q1 * p2 + (1 - q1) * q2 - mechanism.q) <= 1e-12
    assert abs(layers.instantaneous_epsilon - ratio * mechanism.epsilon) <= 1e-12
    assert layers.permanent_epsilon > mechanism.epsilon


def one_report(spec: MetricSpec, settings: DeviceSettings) -> np.ndarray:
    """P(payload j | value i) of one report through the real client path (k x k)."""
    values = values_of(spec)
    matrix = np.zeros((spec.k, spec.k))
    for i, value in enumerate(values):
        for (payload,), p in reports_of_history(spec, settings, [value]).items():
            matrix[i, payload] += p
    return matrix


@pytest.mark.parametrize("k", [2, 3])
def test_memoized_reports_debias_exactly(k: int) -> None:
    """Expected counts of memoized reports (read off the client path) give back f to 1e-12
    through the collector's debiasing with the metric's own p* and q*."""
    spec = spec_for(k, 1.0)
    matrix = one_report(spec, DeviceSettings(memoize=True))
    shares = np.array([0.5, 0.5] if k == 2 else [0.5, 0.3, 0.2])
    n = 10_000
    expected = n * shares @ matrix
    assert np.abs(debias(spec.randomizer, expected, n) - shares).max() <= 1e-12


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("n", [1, 20, 60])
def test_memoized_reports_have_exact_coverage(k: int, n: int) -> None:
    """STATS.md section 8 (d), through estimate() itself: for devices reporting once each, the
    count C of category 0 is Bin(n, q* + (p* - q*) f) with p* and q* read off the memoized
    client path; sum over every C of P(C) 1{f in interval(C)} >= 95%."""
    spec = spec_for(k, 1.0)
    matrix = one_report(spec, DeviceSettings(memoize=True))
    p, q = matrix[0, 0], matrix[1, 0]
    assert abs(p - spec.randomizer.p_star) <= 1e-12 and abs(q - spec.randomizer.q_star) <= 1e-12
    intervals = []
    for c in range(n + 1):
        counts = PeriodCounts("d", n, [c, n - c] + [0] * (k - 2))
        row = estimate(spec.randomizer, spec.categories, counts).estimates[0]
        intervals.append((row.ci_low, row.ci_high))
    for f in (0.0, 1 / n, 0.3, 0.5, 1.0):
        pmf = stats.binom.pmf(np.arange(n + 1), n, q + (p - q) * f)
        covered = sum(pr for pr, (lo, hi) in zip(pmf, intervals, strict=True) if lo <= f <= hi)
        assert covered >= 0.95 - 1e-12


@pytest.mark.parametrize("mechanism", ["oue", "olh"])
def test_without_two_layers_a_memoized_metric_is_reported_afresh(mechanism: str) -> None:
    """oue and olh have no two layers that keep their reports' distribution: with the fresh
    layer asked (the default), their reports are drawn afresh and the account says so."""
    spec = spec_for(4, 1.0, mechanism)
    settings = DeviceSettings(2, True)
    account = privacy_account([spec], settings).metrics[0]
    assert not account.memoized and account.per_period == 2.0
    if mechanism == "oue":  # two reports of one value are independent draws
        two = reports_of_history(spec, settings, ["c1", "c1"])
        one = reports_of_history(spec, settings, ["c1"])
        for (a, b), p in two.items():
            assert abs(p - one[(a,)] * one[(b,)]) <= 1e-12


@pytest.mark.parametrize("ratio", [1.0, 0.5, -2.0, math.inf, math.nan, True, "2"])
def test_the_ratio_must_exceed_one(ratio: object) -> None:
    with pytest.raises(InvalidInput, match="instantaneous_ratio"):
        DeviceSettings(instantaneous_ratio=ratio)  # type: ignore[arg-type]
