"""Exact privacy checks of the set randomizer, padding-and-sampling (docs/STATS.md section 16).

For k <= 4 categories and a declared maximum size L <= 3, every subset of the categories is an
input (sizes 0..k, so sets above L, which are sampled down, are included), and every pair of
them is a pair of neighbours: local DP compares any two inputs. The output law P(payload | S)
is read off the code (:func:`testkit.transitions.explore_branches` walks every draw of
``PaddingSampling.randomize``), not restated from formulas, and the largest ratio
P(y | S) / P(y | S') over outputs and pairs must be at most e^eps.

Where the bound is attained is part of the check: with oue and k >= L two padded sets can be
disjoint and a vector can set exactly one set's bits, so the ratio is e^eps exactly; with krr
one output supports one item, which the sampling picks with probability at most 1/L, so the
ratio is exactly 1 + (e^eps - 1)/L (e^eps at L = 1): the bound holds with room to spare.
olh draws its hash seed from 2^62 values, so it is checked conditionally on fixed seeds (the
seed does not depend on the set, so a bound given every seed is a bound).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable

import pytest

from deniable.client.mechanisms import OLH_PRIME, PaddingSampling
from testkit.transitions import explore, explore_branches, word_cuts

TIGHT = 1e-12
EPSILONS = (0.5, 1.0, 2.0)
SHAPES = [(k, size) for k in (2, 3, 4) for size in (1, 2, 3)]
OLH_SEEDS = [(1, 0), (OLH_PRIME - 1, OLH_PRIME - 1), (123_456_789, 987_654_321), (2, 5)]


def every_set(k: int) -> list[tuple[int, ...]]:
    """Every subset of the k categories, as sorted index tuples (the empty set included)."""
    return [s for size in range(k + 1) for s in itertools.combinations(range(k), size)]


def output_laws(ps: PaddingSampling, seed: tuple[int, int] | None = None) -> list[dict]:
    """P(payload | S) for every set S, read off ``ps.randomize``; olh given a fixed ``seed``."""
    if seed is None:
        cuts = word_cuts(ps)
        return [
            explore_branches(lambda rng, s=s: ps.randomize(s, rng), cuts) for s in every_set(ps.k)
        ]
    fixed = {1: seed[0] - 1, 2: seed[1]}  # draw 0 samples the item, draws 1 and 2 are a - 1, b
    return [explore(lambda rng, s=s: ps.randomize(s, rng), fixed) for s in every_set(ps.k)]


def worst_ratio(laws: list[dict[Hashable, float]]) -> float:
    """The largest P(y | S) / P(y | S') over outputs y and inputs S, S'."""
    worst = 0.0
    for y in set().union(*laws):
        probs = [law.get(y, 0.0) for law in laws]
        assert min(probs) > 0, "an output possible under one set is impossible under another"
        worst = max(worst, max(probs) / min(probs))
    return worst


def exact_figures(k: int, size: int, epsilon: float, oracle: str) -> float:
    """The exact worst ratio of one case (for olh the worst over :data:`OLH_SEEDS`)."""
    ps = PaddingSampling(k, size, epsilon, oracle)
    if oracle != "olh":
        return worst_ratio(output_laws(ps))
    return max(worst_ratio(output_laws(ps, seed)) for seed in OLH_SEEDS)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize(("k", "size"), SHAPES)
def test_krr_ratio_is_within_e_eps_and_exactly_one_plus_its_excess_over_l(
    k: int, size: int, epsilon: float
) -> None:
    ratio = exact_figures(k, size, epsilon, "krr")
    e = math.exp(epsilon)
    assert ratio <= e * (1 + TIGHT)
    assert math.isclose(ratio, 1 + (e - 1) / size, rel_tol=TIGHT)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize(("k", "size"), SHAPES)
def test_oue_ratio_is_within_e_eps_and_attained_when_padded_sets_can_be_disjoint(
    k: int, size: int, epsilon: float
) -> None:
    ratio = exact_figures(k, size, epsilon, "oue")
    e = math.exp(epsilon)
    assert ratio <= e * (1 + TIGHT)
    if k >= size:
        assert ratio >= e * (1 - TIGHT)
    else:
        assert ratio < e * (1 - 1e-6)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize(("k", "size"), SHAPES)
def test_olh_ratio_given_the_seed_is_within_e_eps(k: int, size: int, epsilon: float) -> None:
    assert exact_figures(k, size, epsilon, "olh") <= math.exp(epsilon) * (1 + TIGHT)


@pytest.mark.parametrize(("k", "size"), SHAPES)
def test_the_sampled_item_is_uniform_over_the_padded_set(k: int, size: int) -> None:
    ps = PaddingSampling(k, size, 1.0, "krr")
    for items in every_set(k):
        law = explore_branches(lambda rng, s=items: ps.sample(s, rng))
        assert law == pytest.approx(ps.sample_law(items), abs=TIGHT)
        width = max(len(items), size)
        assert sorted(law) == [*items, *range(k, k + width - len(items))]


@pytest.mark.parametrize("oracle", ["krr", "oue"])
@pytest.mark.parametrize(("k", "size"), [(3, 2), (4, 3), (2, 3)])
def test_support_probability_is_q_plus_p_minus_q_over_the_padded_size(
    k: int, size: int, oracle: str
) -> None:
    """What the estimator relies on: an item j is supported with probability
    q* + (p* - q*) / max(|S|, L) when j is in the padded set, else q*."""
    ps = PaddingSampling(k, size, 1.0, oracle)
    p, q = ps.p_star, ps.q_star
    for items, law in zip(every_set(k), output_laws(ps), strict=True):
        sampled = ps.sample_law(items)
        for j in range(ps.width):
            supports = sum(prob for y, prob in law.items() if j in ps.supported(_thaw(ps, y)))
            expected = q + (p - q) * sampled.get(j, 0.0)
            assert math.isclose(supports, expected, rel_tol=1e-12, abs_tol=1e-15)


def _thaw(ps: PaddingSampling, frozen: Hashable) -> object:
    """A payload as the oracle parses it (the walk keeps dict payloads as item tuples)."""
    return ps.parse_payload(dict(frozen) if isinstance(frozen, tuple) else frozen)


def test_the_same_law_for_every_input_shape_and_a_refusal_for_a_string() -> None:
    ps = PaddingSampling(4, 2, 1.0, "oue")
    laws = [
        explore_branches(lambda rng, v=value: ps.randomize(v, rng), word_cuts(ps))
        for value in ({2, 0}, frozenset({0, 2}), [2, 0, 2], (0, 2))
    ]
    assert all(law == laws[0] for law in laws)
    for bad in ("ab", {0: 1}, [4], [-1], [True], 3):
        with pytest.raises(ValueError):
            ps.check_value(bad)


def test_a_set_metric_is_never_memoized() -> None:
    """A set's values, the subsets, are too many to remember: asked to memoize it, with or
    without the fresh layer, a device still reports it afresh at the metric's eps."""
    from deniable.client.ledger import report_cost
    from deniable.client.spec import MetricSpec

    spec = MetricSpec.set_of("features", ["a", "b", "c"], max_items=2, epsilon=1.0)
    for ratio in (None, 0.5):
        cost, layers = report_cost(spec, True, ratio)
        assert not cost.memoized and layers is None and cost.epsilon == spec.epsilon
