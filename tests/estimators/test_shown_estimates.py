"""What every estimate shows (issue 14): the point within its interval, no zero-width interval,
the raw unbiased value beside a clipped one, the margin's warning, and an exact mle that stops."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest

from deniable.client.mechanisms import OLH, OUE, Mechanism
from deniable.estimators import PeriodCounts, estimate, estimate_reports
from deniable.estimators.intervals import unit_interval

K, N = 200, 3_100


def _counts(mechanism: Mechanism, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    f = 1 / np.arange(1, K + 1)
    sizes = rng.multinomial(N, f / f.sum())
    return rng.binomial(sizes, mechanism.p_star) + rng.binomial(N - sizes, mechanism.q_star)


@pytest.mark.parametrize("mechanism", [OUE(K, 1.0), OLH(K, 1.0)], ids=repr)
@pytest.mark.parametrize("method", ["unbiased", "consistent", "mle"])
@pytest.mark.parametrize("simultaneous", [False, True])
def test_at_k_200_every_point_lies_in_a_real_interval(
    mechanism: Mechanism, method: str, simultaneous: bool
) -> None:
    cats = [str(v) for v in range(K)]
    result = estimate(
        mechanism,
        cats,
        PeriodCounts("d", N, _counts(mechanism, 1)),
        method=method,
        simultaneous=simultaneous,
    )
    for row in result.estimates:
        assert row.ci_low <= row.frequency <= row.ci_high, row
        assert row.ci_high - row.ci_low > 1e-3, row
        assert row.clipped == (row.unbiased < 0 or row.unbiased > 1)
        assert row.count == pytest.approx(N * row.frequency)
    assert any(row.clipped for row in result.estimates)
    assert result.margin_exceeds_most_shares and 2 * result.below_margin > K
    assert 0.05 < result.margin < 0.3


def test_a_plain_estimate_does_not_warn_about_its_margin() -> None:
    result = estimate(
        OUE(4, 4.0), list("abcd"), PeriodCounts("d", 50_000, [30000, 15000, 9000, 6000])
    )
    assert not result.margin_exceeds_most_shares and result.below_margin == 0


def test_clipping_keeps_at_least_the_margin_and_never_narrows() -> None:
    low = np.array([-0.30, -0.02, 0.10, 0.95, 1.2])
    high = np.array([-0.10, 0.04, 0.20, 1.05, 1.4])
    new_low, new_high = unit_interval(low, high)
    assert new_low.tolist() == pytest.approx([0.0, 0.0, 0.10, 0.95, 0.9])
    assert new_high.tolist() == pytest.approx([0.10, 0.04, 0.20, 1.0, 1.0])
    assert ((new_high - new_low) >= np.minimum((high - low) / 2, 1) - 1e-12).all()


def test_exact_mle_at_k_200_stops_and_reports_progress() -> None:
    """Issue 14: 3,100 olh reports at k = 200 took 4 m 45 s, silently."""
    mechanism = OLH(K, 1.0)
    rng = np.random.default_rng(3)
    f = 1 / np.arange(1, K + 1)
    values = rng.choice(K, size=N, p=f / f.sum())
    prime = 2**31 - 1
    a, b = rng.integers(1, prime, N), rng.integers(0, prime, N)
    h = ((a * values + b) % prime) % mechanism.g
    other = rng.integers(0, mechanism.g - 1, N)
    y = np.where(rng.random(N) < mechanism.p_star, h, other + (other >= h))
    table = pl.DataFrame({"period": ["2026-11-21"] * N, "a": a, "b": b, "y": y})
    gaps: list[float] = []
    started = time.perf_counter()
    result = estimate_reports(
        mechanism,
        [str(v) for v in range(K)],
        table,
        method="mle",
        progress=lambda _, gap: gaps.append(gap),
    )
    assert time.perf_counter() - started < 60
    assert gaps and gaps[-1] <= 1e-3 < gaps[0]
    shares = np.array([row.frequency for row in result.estimates])
    assert (shares >= 0).all() and abs(shares.sum() - 1) < 1e-9
