"""Monte Carlo checks of a set metric's shares (docs/STATS.md sections 8 and 16), seeded.

Devices are drawn from a law over sets of at most L items (the super-population estimand: the
share of devices holding category c). Each device's sampled item is then an independent draw
from the mixture m_j = sum_S w_S / max(|S|, L) over the padded sets, so the item classes of n
devices are Multinomial(n, m), and the reports are simulated from those classes as the oracle
randomizes them (krr: a multinomial per class; oue and olh: Bin(n_j, p*) + Bin(n - n_j, q*)
per item, exact for each item's count). Each replicate is estimated by the module's own code
(:func:`deniable.estimators.setfrequency.set_estimate`), one period per replicate.

False-failure budget: this file spends 1e-5 of the suite's 1e-4 over at most CHECKS = 100
checks, a_i = 1e-7 each (two-sided z = 5.33):

* coverage: M = 20,000 nominal 95% intervals per category; a miss count is Binomial(M, 1 - c)
  with c the true coverage, and the pass mark is STATS.md section 8's 4,691/5,000 scaled to
  M: fail below 18,764 covered (93.82%). At c = 95% that fails with probability 6e-14, at a
  Wilson floor of 94.5% with 1.6e-5 (the mark allows for Wilson's oscillation below nominal),
  against 93% the power is 1 - 2e-6. Simultaneous intervals: the same mark on joint coverage.
* bias: |mean - share| / (sigma / sqrt M) <= 5.33, sigma from ``share_variance``;
* variance: s^2 / sigma^2 within 1 +/- z sqrt(2 / (M - 1) + kurtosis / M), the chi-square
  band of section 8 with the binomial count's excess kurtosis.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from deniable.client.mechanisms import KRR, PaddingSampling
from deniable.estimators import PeriodCounts
from deniable.estimators.intervals import per_category_alpha, unit_interval
from deniable.estimators.setfrequency import set_changes, set_estimate, set_shares, share_variance
from testkit.randomness import FastRandomness

CHECKS = 100
ALPHA_I = 1e-5 / CHECKS
Z_CRIT = float(stats.norm.isf(ALPHA_I / 2))
M = 20_000
COVER_LOW = 4_691 * M // 5_000
K, SIZE, EPS = 5, 3, 1.0
CATEGORIES = [f"c{i}" for i in range(K)]

LAWS: dict[str, dict[tuple[int, ...], float]] = {
    "spread": {(0, 1, 2): 0.3, (0,): 0.3, (): 0.1, (1, 3): 0.2, (0, 1): 0.1},
    "edges": {(0, 1): 0.5, (0,): 0.49, (2,): 0.01},
}
"""Laws over sets of at most L = 3 items: shares 0.7, 0.6, 0.3, 0.2, 0 and 0.99, 0.5, 0.01, 0, 0."""


def shares_of(law: dict[tuple[int, ...], float]) -> np.ndarray:
    """Each category's share of devices under ``law``."""
    share = np.zeros(K)
    for items, weight in law.items():
        share[list(items)] += weight
    return share


def item_law(ps: PaddingSampling, law: dict[tuple[int, ...], float]) -> np.ndarray:
    """m_j, the probability that a device drawn from ``law`` samples item j (of k + L)."""
    m = np.zeros(ps.width)
    for items, weight in law.items():
        for j, prob in ps.sample_law(items).items():
            m[j] += weight * prob
    return m


def simulate(
    ps: PaddingSampling, law: dict[tuple[int, ...], float], n: int, rng: np.random.Generator
) -> np.ndarray:
    """Support counts (M, k + L) of n devices drawn from ``law``, M replicates."""
    oracle, width = ps.oracle, ps.width
    p, q = ps.p_star, ps.q_star
    sizes = rng.multinomial(n, item_law(ps, law), size=M)
    if isinstance(oracle, KRR):
        counts = np.zeros((M, width), dtype=np.int64)
        for x in range(width):
            row = np.full(width, oracle.q)
            row[x] = oracle.p
            counts += rng.multinomial(sizes[:, x], row / row.sum())
        return counts
    return rng.binomial(sizes, p) + rng.binomial(n - sizes, q)


def estimates(
    ps: PaddingSampling, counts: np.ndarray, n: int, simultaneous: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unbiased shares, interval lows, interval highs), each (M, k), by the module's code
    (:func:`set_shares`, which :func:`set_estimate` calls, then clipped as it clips)."""
    alpha = per_category_alpha(0.95, K, simultaneous)
    shares = set_shares(ps, np.full((len(counts), 1), n), counts[:, None, :], alpha, "overlap-safe")
    low, high = unit_interval(shares.low, shares.high)
    return shares.estimate, low, high


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng([20261204, *(ord(c) for c in repr(key))])


ORACLES = ["krr", "oue", "olh"]


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("n", [300, 10_000])
@pytest.mark.parametrize("law", sorted(LAWS))
def test_each_share_interval_covers(oracle: str, n: int, law: str) -> None:
    ps = PaddingSampling(K, SIZE, EPS, oracle)
    share = shares_of(LAWS[law])
    counts = simulate(ps, LAWS[law], n, _rng("cover", oracle, n, law))
    unbiased, low, high = estimates(ps, counts, n)
    covered = ((low <= share) & (share <= high)).sum(axis=0)
    assert (covered >= COVER_LOW).all(), dict(zip(share.tolist(), covered.tolist(), strict=True))
    sigma = np.sqrt([share_variance(ps, float(s), n) for s in share])
    bias_z = np.abs(unbiased.mean(axis=0) - share) / (sigma / math.sqrt(M))
    assert (bias_z <= Z_CRIT).all(), bias_z
    p, q = ps.p_star, ps.q_star
    lam = q + (p - q) * share / SIZE
    kurtosis = (1 - 6 * lam * (1 - lam)) / (n * lam * (1 - lam))
    half = Z_CRIT * np.sqrt(2 / (M - 1) + kurtosis / M)
    ratio = unbiased.var(axis=0, ddof=1) / sigma**2
    assert ((1 - half <= ratio) & (ratio <= 1 + half)).all(), ratio


@pytest.mark.parametrize("oracle", ["krr", "oue"])
@pytest.mark.parametrize("n", [300, 10_000])
def test_simultaneous_intervals_cover_jointly(oracle: str, n: int) -> None:
    ps = PaddingSampling(K, SIZE, EPS, oracle)
    share = shares_of(LAWS["spread"])
    counts = simulate(ps, LAWS["spread"], n, _rng("joint", oracle, n))
    _, low, high = estimates(ps, counts, n, simultaneous=True)
    assert ((low <= share) & (share <= high)).all(axis=1).sum() >= COVER_LOW


@pytest.mark.parametrize("oracle", ORACLES)
def test_expected_counts_return_the_shares_and_sets_above_l_count_l_over_their_size(
    oracle: str,
) -> None:
    """Deterministic: at the expected counts n (q* + (p* - q*) m_j) the estimate is exactly
    L sum_S w_S 1{c in S} / max(|S|, L): the share itself when every set holds at most L
    items, and biased low by L / |S| for each device holding more."""
    ps = PaddingSampling(K, 2, EPS, oracle)
    law = {(0, 1, 2, 3): 0.5, (0,): 0.25, (1, 4): 0.25}
    n = 10**6
    expected = n * (ps.q_star + (ps.p_star - ps.q_star) * item_law(ps, law))
    got = set_shares(ps, np.array([n]), expected[None, :], 0.05, "overlap-safe").estimate
    assert got.tolist() == pytest.approx([0.5 * 2 / 4 + 0.25, 0.5 * 2 / 4 + 0.25, 0.25, 0.25, 0.25])
    assert shares_of(law).tolist() == [0.75, 0.75, 0.5, 0.5, 0.25]


def test_the_document_is_the_shares_clipped_into_their_intervals() -> None:
    ps = PaddingSampling(K, SIZE, EPS, "krr")
    counts = simulate(ps, LAWS["edges"], 300, _rng("document"))[:50]
    unbiased, low, high = estimates(ps, counts, 300)
    for i, row in enumerate(counts):
        result = set_estimate(ps, CATEGORIES, PeriodCounts("p", 300, row.tolist()))
        assert [c.unbiased for c in result.estimates] == unbiased[i].tolist()
        assert [c.ci_low for c in result.estimates] == low[i].tolist()
        assert [c.ci_high for c in result.estimates] == high[i].tolist()
        shown = np.clip(unbiased[i], low[i], high[i])
        assert [c.frequency for c in result.estimates] == shown.tolist()


def test_reports_from_the_real_randomizer_estimate_the_shares() -> None:
    """End to end through ``PaddingSampling.randomize`` and ``supported`` (seeded): every
    share within 5.33 standard errors of the truth."""
    ps = PaddingSampling(K, SIZE, EPS, "oue")
    law = LAWS["spread"]
    rng, draws = FastRandomness(39), np.random.default_rng(39)
    sets = list(law)
    n = 20_000
    picks = draws.choice(len(sets), size=n, p=[law[s] for s in sets])
    counts = np.zeros(ps.width, dtype=np.int64)
    for pick in picks:
        for item in ps.supported(ps.randomize(sets[pick], rng)):
            counts[item] += 1
    result = set_estimate(ps, CATEGORIES, PeriodCounts("p", n, counts.tolist()))
    for row, share in zip(result.estimates, shares_of(law), strict=True):
        assert abs(row.unbiased - share) <= Z_CRIT * math.sqrt(share_variance(ps, share, n))
    assert result.max_items == SIZE and result.oracle == "oue" and result.mechanism == "ps"


def test_no_reports_give_the_whole_range_and_bad_counts_are_refused() -> None:
    ps = PaddingSampling(K, SIZE, EPS, "krr")
    empty = set_estimate(ps, CATEGORIES, [])
    assert empty.n == 0 and all((c.ci_low, c.ci_high) == (0.0, 1.0) for c in empty.estimates)
    with pytest.raises(ValueError, match="expected 8 counts"):
        set_estimate(ps, CATEGORIES, PeriodCounts("p", 10, [1] * K))
    with pytest.raises(ValueError, match="expected 5 categories"):
        set_estimate(ps, CATEGORIES[:4], PeriodCounts("p", 8, [1] * 8))


@pytest.mark.parametrize("oracle", ORACLES)
def test_a_change_between_two_windows_is_the_shares_difference(oracle: str) -> None:
    """Deterministic: at (rounded) expected counts of 10^6 devices in each window, each row is
    the difference of the two laws' shares, inside its interval, with the verdict its sign."""
    ps = PaddingSampling(K, SIZE, EPS, oracle)
    n = 10**6

    def window(law: dict[tuple[int, ...], float], label: str) -> list[PeriodCounts]:
        lam = ps.q_star + (ps.p_star - ps.q_star) * item_law(ps, law)
        counts = np.rint(n * lam).astype(np.int64)
        reports = int(counts.sum()) if oracle == "krr" else n  # krr's supports sum to n
        return [PeriodCounts(label, reports, counts.tolist())]

    rows = set_changes(
        ps, CATEGORIES, window(LAWS["spread"], "b"), window(LAWS["edges"], "a"), confidence=0.95
    )
    truth = shares_of(LAWS["spread"]) - shares_of(LAWS["edges"])
    for row, difference in zip(rows, truth, strict=True):
        assert row.difference == pytest.approx(difference, abs=1e-3)
        assert row.ci_low <= difference <= row.ci_high
        if abs(difference) > 0.1:
            assert row.verdict == ("higher" if difference > 0 else "lower"), row
