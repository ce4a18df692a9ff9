"""Differences between two windows of periods (estimators/differences.py, STATS.md section 13):
the interval covers when the same devices report in both windows and in several periods of
each, memoized or not, where intervals that assume independence do not.

Simulated from the exact sampling distribution of one row's counts (testkit/windows.py), each
row's interval at 95% (ALPHA; share_changes splits alpha over the rows shown, the same
construction at a smaller level).
Budget as tests/estimators/test_multiperiod.py: M = 20,000 replicates per case, pass mark
4,691/5,000 scaled (18,764); a naive interval "undercovers" when it covers below 90% of M,
which its true coverage (about 84%, or 54% for pooled memoized windows) passes with
probability below 1e-40; the false "changed" rate must stay below 5% + 4.89 SE.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import BRR, KRR, OUE, Duchi, Mechanism
from deniable.estimators import PeriodCounts, PeriodSums, estimate
from deniable.estimators.differences import (
    HIGHER,
    LOWER,
    interval_difference,
    mean_change,
    no_change,
    row_alpha,
    share_changes,
    verdict,
)
from deniable.estimators.numeric import pooled_interval
from deniable.estimators.pooling import pool
from testkit.windows import simulate

M = 20_000
COVER_LOW = 4_691 * M // 5_000
WEEK = np.array([1.0, 0.9, 0.8, 1.0, 0.7, 0.95, 0.85])
DAY = np.array([1.0])
ALPHA = 0.05


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng([20261126, *(ord(c) for c in repr(key))])


def test_the_verdict_reads_the_interval() -> None:
    assert verdict(0.01, 0.2, 0.95) == HIGHER == "higher"
    assert verdict(-0.2, -0.01, 0.95) == LOWER == "lower"
    assert verdict(-0.01, 0.2, 0.95) == no_change(0.95) == "no detectable change at 95%"
    assert verdict(0.0, 0.2, 0.99) == "no detectable change at 99%"
    assert interval_difference((0.2, 0.4), (0.1, 0.15)) == pytest.approx((0.05, 0.3))


def _bounds(mechanism: Mechanism, windows, alpha: float, pooling: str = "overlap-safe"):
    """Each window's unclipped interval and SE for every replicate, as share_changes pools."""
    a = pool(mechanism, windows.n_a, windows.counts_a, alpha, pooling)
    b = pool(mechanism, windows.n_b, windows.counts_b, alpha, pooling)
    return a, b


def _as_periods(n: np.ndarray, counts: np.ndarray, k: int, row: int) -> list[PeriodCounts]:
    """One replicate's window as PeriodCounts of a k-category metric whose row ``row`` has
    the simulated counts (the other rows' counts are n - C spread, irrelevant to row)."""
    periods = []
    for t, (size, count) in enumerate(zip(n, counts[:, 0], strict=True)):
        rows = [0] * k
        rows[row] = int(count)
        rows[1 - row] = int(size - count)
        periods.append(PeriodCounts(f"2026-11-{t + 1:02d}", int(size), rows))
    return periods


def test_share_changes_is_the_difference_of_the_windows_unclipped_intervals() -> None:
    """The vectorized form the coverage tests use is what share_changes computes."""
    mechanism = BRR(2, 1.0)
    windows = simulate(mechanism, 0.3, 400, "change", "two-layer", WEEK, 5, _rng("same-code"))
    alpha = row_alpha(0.95, mechanism.k)
    a, b = _bounds(mechanism, windows, alpha)
    low, high = interval_difference((a.low[:, 0], a.high[:, 0]), (b.low[:, 0], b.high[:, 0]))
    for i in range(5):
        rows = share_changes(
            mechanism,
            ["false", "true"],
            _as_periods(windows.n_a[i], windows.counts_a[i], 2, 1),
            _as_periods(windows.n_b[i], windows.counts_b[i], 2, 1),
            method="unbiased",
        )
        true = rows[1]
        assert true.difference == pytest.approx(
            float(np.clip(a.estimate[i, 0], 0, 1) - np.clip(b.estimate[i, 0], 0, 1))
        )
        assert true.ci_low <= min(low[i], true.difference) + 1e-12
        assert true.ci_low == pytest.approx(max(min(low[i], true.difference), -1.0))
        assert true.ci_high == pytest.approx(min(max(high[i], true.difference), 1.0))
        assert true.verdict == verdict(true.ci_low, true.ci_high, 0.95)
        shown = estimate(
            mechanism,
            ["false", "true"],
            _as_periods(windows.n_a[i], windows.counts_a[i], 2, 1),
            method="consistent",
            simultaneous=True,
        )
        consistent = share_changes(
            mechanism,
            ["false", "true"],
            _as_periods(windows.n_a[i], windows.counts_a[i], 2, 1),
            _as_periods(windows.n_b[i], windows.counts_b[i], 2, 1),
        )
        assert consistent[1].current == pytest.approx(shown.estimates[1].frequency)


@pytest.mark.parametrize(
    ("mechanism", "memo"),
    [(BRR(2, 4.0), "two-layer"), (KRR(4, 4.0), "two-layer"), (BRR(2, 4.0), "permanent")],
    ids=repr,
)
def test_devices_whose_values_move_against_themselves_break_independent_windows_not_ours(
    mechanism: Mechanism, memo: str
) -> None:
    """The same memoized devices in both days, each one's value flipped (f = 1/2, so nothing
    changed in the population): the two days' estimates are negatively correlated, so the
    difference's SD exceeds sqrt(SE_A^2 + SE_B^2), never SE_A + SE_B (Minkowski)."""
    windows = simulate(mechanism, 0.5, 1_000, "toggle", memo, DAY, M, _rng("toggle", mechanism))
    alpha = ALPHA
    a, b = _bounds(mechanism, windows, alpha)
    truth = windows.truth_a - windows.truth_b
    assert truth == 0.0
    low, high = interval_difference((a.low[:, 0], a.high[:, 0]), (b.low[:, 0], b.high[:, 0]))
    ours = int(((low <= truth) & (truth <= high)).sum())
    assert ours >= COVER_LOW, ours
    assert ((low > 0) | (high < 0)).mean() <= 0.05 + 4.89 * math.sqrt(0.05 * 0.95 / M)
    z = stats.norm.isf(alpha / 2)
    half = z * np.hypot(a.std_error[:, 0], b.std_error[:, 0])
    centre = a.estimate[:, 0] - b.estimate[:, 0]
    naive = int((np.abs(centre - truth) <= half).sum())
    assert naive < 0.9 * M, naive


@pytest.mark.parametrize("mechanism", [BRR(2, 1.0), KRR(4, 1.0), OUE(4, 1.0)], ids=repr)
def test_weeks_of_memoized_devices_break_pooled_independent_windows_not_ours(
    mechanism: Mechanism,
) -> None:
    """Two weeks of devices that report most days with a remembered answer: each week pooled
    as independent reports is sqrt(7) too narrow, and so is their difference unless the two
    weeks' devices and values are the same (``change``: the positive correlation between the
    weeks hides it); ours covers in every case."""
    memo = "permanent" if isinstance(mechanism, OUE) else "two-layer"
    for scenario in ("change", "disjoint", "toggle"):
        windows = simulate(
            mechanism, 0.3, 1_000, scenario, memo, WEEK, M, _rng(scenario, mechanism)
        )
        truth = windows.truth_a - windows.truth_b
        alpha = ALPHA
        a, b = _bounds(mechanism, windows, alpha)
        low, high = interval_difference((a.low[:, 0], a.high[:, 0]), (b.low[:, 0], b.high[:, 0]))
        ours = int(((low <= truth) & (truth <= high)).sum())
        assert ours >= COVER_LOW, (scenario, ours)
        a, b = _bounds(mechanism, windows, alpha, "independent")
        z = stats.norm.isf(alpha / 2)
        half = z * np.hypot(a.std_error[:, 0], b.std_error[:, 0])
        naive = int((np.abs(a.estimate[:, 0] - b.estimate[:, 0] - truth) <= half).sum())
        if scenario != "change":
            assert naive < 0.9 * M, (scenario, naive)


def test_a_mean_whose_devices_move_against_themselves_is_covered() -> None:
    """duchi at eps 4, the same 1,000 devices on two days, each at t = +-1 and flipped on the
    second day (the mean unchanged): sums drawn exactly (counts of +C1)."""
    mechanism = Duchi(4.0)
    rng = _rng("duchi-toggle")
    devices = 1_000
    up = rng.binomial(devices, 0.5, size=M)
    plus = mechanism.plus_probability
    plus_a = rng.binomial(up, plus(1.0)) + rng.binomial(devices - up, plus(-1.0))
    plus_b = rng.binomial(up, plus(-1.0)) + rng.binomial(devices - up, plus(1.0))
    c1 = mechanism.bound
    sums = [c1 * (2 * plus_a - devices), c1 * (2 * plus_b - devices)]
    n = np.full((M, 1), float(devices))
    squares = np.full((M, 1), devices * c1 * c1)
    a, b = (pooled_interval(mechanism, n, s[:, None], squares, 0.95, "overlap-safe") for s in sums)
    low, high = interval_difference((a[2], a[3]), (b[2], b[3]))
    ours = int(((low <= 0) & (high >= 0)).sum())
    assert ours >= COVER_LOW, ours
    naive = int((np.abs(a[0] - b[0]) <= 1.959964 * np.hypot(a[1], b[1])).sum())
    assert naive < 0.9 * M, naive
    change = mean_change(
        mechanism,
        0.0,
        10.0,
        [PeriodSums("2026-11-02", devices, float(sums[0][0]), devices * c1 * c1)],
        [PeriodSums("2026-11-01", devices, float(sums[1][0]), devices * c1 * c1)],
    )
    scale = 5.0
    assert change.difference == pytest.approx(scale * (a[0][0] - b[0][0]))
    assert change.ci_low == pytest.approx(min(scale * low[0], change.difference))
    assert change.ci_high == pytest.approx(max(scale * high[0], change.difference))


def test_a_window_without_reports_gives_no_difference() -> None:
    mechanism = BRR(2, 1.0)
    rows = share_changes(
        mechanism,
        ["false", "true"],
        [PeriodCounts("2026-11-02", 100, [40, 60])],
        [PeriodCounts("2026-11-01", 0, [0, 0])],
    )
    assert [(r.difference, r.ci_low, r.ci_high, r.baseline) for r in rows] == [
        (None, -1.0, 1.0, None)
    ] * 2
    assert rows[1].current is not None and rows[1].verdict == no_change(0.95)
    with pytest.raises(InvalidInput):
        share_changes(mechanism, ["false", "true"], [PeriodCounts("x", 1, [2, 0])], [])
