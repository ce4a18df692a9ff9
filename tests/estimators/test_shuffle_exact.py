"""Every central eps the shuffle accountant publishes, against the exact eps of pairs of
shuffled batches computed apart from it (testkit.shuffle_exact; shared STATS.md section 13).

A published eps(delta) claims every pair of neighbouring batches, so for each pair computed
here the pair's delta at the published eps must be at most delta: equivalently, the published
eps is at least the pair's exact eps. The pairs: k-RR (brr, k 3, 4, 5) with every other device
at one value, both directions; brr with any number m of the others at 1; every composition of
the others' values over the whole histogram at small n (k 2 and 3 to n 30, k 4 to 14, k 5 to
10: testkit's COMPOSITION_SIZES); OUE, OLH, pem, duchi, pm and hybrid through a post-processing
whose exact eps is cheap (a lower bound on the truth). The comparison allows the sums' float
rounding only (1e-12 on a delta of 1e-6).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.signal import convolve

from deniable.client.mechanisms import (
    BRR,
    KRR,
    OLH,
    OUE,
    Duchi,
    Hybrid,
    Piecewise,
    PrefixSketch,
)
from deniable.estimators.shuffling import central_guarantee
from testkit import shuffle_exact as exact

DELTA = 1e-6
ROUNDING = 1e-12
EPS0 = [0.5, 1.0, 2.0, 4.0, 6.0, 8.0]
SIZES = [20, 50, 100, 300, 1000]
SMALL = [10, 20, 30]


def agrees(value: float, printed: str) -> bool:
    """Whether ``value`` rounds to ``printed`` (within half a unit of its last digit)."""
    decimals = len(printed.split(".")[1])
    return abs(value - float(printed)) <= 0.5 * 10**-decimals + 1e-12


SECTION_13 = [
    (3, 1, 30, "0.7992"),
    (3, 4, 100, "3.99996"),
    (4, 3, 60, "2.9958"),
    (3, 6, 1000, "5.99986"),
    (5, 6, 1000, "5.981"),
]
"""Shared STATS.md section 13's exact values, others all at x1 (k, eps0, n, eps at 1e-6)."""


@pytest.mark.parametrize(("k", "eps0", "n", "printed"), SECTION_13)
def test_the_exact_pair_reproduces_section_13(k: int, eps0: float, n: int, printed: str) -> None:
    """Section 13's reference values (independent code), others all at x1: the oracle here
    computes what it says."""
    assert agrees(exact.epsilon(exact.krr_pairs(k, eps0, n)[:1], DELTA, eps0), printed)


def test_the_worst_number_of_ones_need_not_be_an_end() -> None:
    """Section 13: brr at n 100, eps0 0.5, m = 98 of the others at 1 gives 0.20284 against
    0.20268 at m = 0."""
    at = {m: exact.epsilon(exact.brr_pairs(0.5, 100, [m]), DELTA, 0.5) for m in (0, 98)}
    assert agrees(at[0], "0.20268") and agrees(at[98], "0.20284")


def guarantee(mechanism, n: int) -> float:
    """The central eps published for ``n`` reports of ``mechanism`` at :data:`DELTA`."""
    return central_guarantee(mechanism, n, DELTA).epsilon


def holds(pairs, eps: float) -> bool:
    """Whether every pair's delta at ``eps`` is within :data:`DELTA` (both directions)."""
    return exact.hockey_stick(pairs, eps) <= DELTA + ROUNDING


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("eps0", EPS0)
@pytest.mark.parametrize("k", [3, 4, 5])
def test_krr_is_at_least_every_pair_with_the_others_at_one_value(k, eps0, n) -> None:
    pairs = exact.krr_pairs(k, eps0, n)
    eps = guarantee(KRR(k, eps0), n)
    assert holds(pairs, eps), (eps, exact.epsilon(pairs, DELTA, eps0))


def ones(n: int) -> list[int]:
    """The numbers m of others at 1 checked at n: every m up to n = 300; at larger n the 20
    at each end (where the worst m lies: section 13) and every 10th between, to keep the
    module fast (bench/shuffle_exact.py maximises over every m)."""
    if n <= 300:
        return list(range(n))
    return sorted({*range(20), *range(n - 20, n), *range(0, n, 10)})


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("eps0", EPS0)
def test_brr_is_at_least_every_pair_with_any_number_of_others_at_one(eps0, n) -> None:
    pairs = exact.brr_pairs(eps0, n, ones(n)) + exact.krr_pairs(2, eps0, n)
    eps = guarantee(BRR(2, eps0), n)
    assert holds(pairs, eps), (eps, exact.epsilon(pairs, DELTA, eps0))


WIDE = [(4, n) for n in (6, 10, exact.COMPOSITION_SIZES[4])] + [
    (5, n) for n in (6, 8, exact.COMPOSITION_SIZES[5])
]
"""(k, n) checked over every composition for k 4 and 5: the full histogram's grid grows as
(n + 1)^(k - 1), so n stops at testkit's COMPOSITION_SIZES."""


@pytest.mark.parametrize("n", SMALL)
@pytest.mark.parametrize("eps0", EPS0)
@pytest.mark.parametrize("k", [2, 3])
def test_small_batches_hold_for_every_composition_of_the_others(k, eps0, n) -> None:
    eps = guarantee(BRR(2, eps0) if k == 2 else KRR(3, eps0), n)
    pair = exact.composition_pairs(k, eps0, n)
    assert exact.stacked_delta(pair, eps) <= DELTA + ROUNDING


@pytest.mark.parametrize("eps0", EPS0)
@pytest.mark.parametrize(("k", "n"), WIDE)
def test_small_batches_of_four_or_five_values_hold_for_every_composition(k, eps0, n) -> None:
    """k 4 and 5: every composition of the others over the k values (up to relabelling
    x2..x_{k-1}), the analyst seeing the whole histogram ((N0, N1) alone is not sufficient)."""
    eps = guarantee(KRR(k, eps0), n)
    pair = exact.composition_pairs(k, eps0, n)
    assert exact.stacked_delta(pair, eps) <= DELTA + ROUNDING


def test_compositions_up_to_relabelling_match_every_labelled_one() -> None:
    """The oracle's symmetry: listing c2 >= c3 >= .. only drops relabellings of x2..x_{k-1},
    which give the same pair; the worst over all labelled compositions (each pair built by
    repeated convolution of the devices' own reports, apart from the stacked grid) agrees."""
    k, eps0, n = 4, 1.0, 6
    p, q = exact.krr_probabilities(k, eps0)

    def report(value: int) -> np.ndarray:
        cell = np.full((2,) * (k - 1), 0.0)
        for v in range(k - 1):
            cell[tuple(1 if a == v else 0 for a in range(k - 1))] = p if v == value else q
        cell[(0,) * (k - 1)] = p if value == k - 1 else q
        return cell

    pairs = []
    for comp in itertools.product(range(n), repeat=k):
        if sum(comp) != n - 1:
            continue
        grid = np.ones((1,) * (k - 1))
        for value, count in enumerate(comp):
            for _ in range(count):
                grid = convolve(grid, report(value), method="direct")
        pairs.append(
            (convolve(grid, report(0), method="direct"), convolve(grid, report(1), method="direct"))
        )
    labelled = exact.epsilon(pairs, 0.1, eps0, steps=40)
    assert abs(exact.composition_epsilon(k, eps0, n, 0.1) - labelled) < 1e-9


def test_every_composition_is_at_least_the_pairs_with_one_value() -> None:
    """The oracle's own consistency: the worst composition is no better than the pairs with
    the others at one value (which are among the compositions), at k 3 and at k 4 (there on
    the full histogram against krr_pairs' (N0, N1))."""
    worst = exact.composition_epsilon(3, 1.0, 30, DELTA, steps=30)
    assert worst >= exact.epsilon(exact.krr_pairs(3, 1.0, 30), DELTA, 1.0) - 1e-9
    for eps0 in (1.0, 4.0):
        n = exact.COMPOSITION_SIZES[4]
        worst = exact.composition_epsilon(4, eps0, n, DELTA, steps=30)
        assert worst >= exact.epsilon(exact.krr_pairs(4, eps0, n), DELTA, eps0) - 1e-9


OTHERS = {
    "oue": (lambda eps0: OUE(8, eps0), exact.oue_pairs),
    "olh": (lambda eps0: OLH(8, eps0), exact.olh_pairs),
    "pem": (lambda eps0: PrefixSketch(16, eps0), exact.oue_pairs),
    "duchi": (Duchi, lambda eps0, n: exact.numeric_pairs("duchi", eps0, n)),
    "pm": (Piecewise, lambda eps0, n: exact.numeric_pairs("pm", eps0, n)),
    "hybrid": (Hybrid, lambda eps0, n: exact.numeric_pairs("hybrid", eps0, n)),
}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("eps0", EPS0)
@pytest.mark.parametrize("name", sorted(OTHERS))
def test_the_generic_bound_is_at_least_each_mechanisms_exact_lower_bound(name, eps0, n) -> None:
    make, pairs_of = OTHERS[name]
    eps = guarantee(make(eps0), n)
    pairs = pairs_of(eps0, n)
    assert holds(pairs, eps), (eps, exact.epsilon(pairs, DELTA, eps0))


def test_pems_two_strings_never_share_a_cell_so_its_bits_are_oues() -> None:
    """pem's lower bound is OUE's: two strings that differ in their first byte land on
    different cells at every level and row (checked here), so the bits of their two cells
    in one report are independent, 1/2 on the device's own cell, q elsewhere, as OUE's."""
    sketch = PrefixSketch(16, 1.0)
    x0, x1 = sketch.encode("a"), sketch.encode("b")
    for level in range(1, sketch.levels + 1):
        cut = sketch.prefix_length(level)
        for row in range(sketch.rows):
            assert sketch.cell(row, x0[:cut]) != sketch.cell(row, x1[:cut])


@pytest.mark.parametrize("delta", [1e-3, 1e-2, 0.1])
@pytest.mark.parametrize("n", [4, 8, 20])
@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_large_deltas_hold_for_the_small_batches_they_amplify(k, eps0, n, delta) -> None:
    """A large delta is what amplifies a batch of a few devices (the account may be asked
    for one: tests/shuffler/test_privacy_released.py): there too every pair and, up to
    testkit's COMPOSITION_SIZES, every composition is within it."""
    eps = central_guarantee(BRR(2, eps0) if k == 2 else KRR(k, eps0), n, delta).epsilon
    assert exact.hockey_stick(exact.krr_pairs(k, eps0, n), eps) <= delta + ROUNDING
    if n <= exact.COMPOSITION_SIZES[k]:
        pair = exact.composition_pairs(k, eps0, n)
        assert exact.stacked_delta(pair, eps) <= delta + ROUNDING
