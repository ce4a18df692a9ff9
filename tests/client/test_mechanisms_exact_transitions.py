"""Exact privacy checks of the randomizers (STATS.md section 8, deterministic checks): no false failures.

The transition probabilities are not restated from formulas: they are read off the code itself
(:func:`testkit.transitions.transition`), giving the exact output distribution
P(payload | x) of the real function, against which the mechanism's own parameters p*, q* and
the eps-LDP bound are checked.
"""

from __future__ import annotations

import math

import pytest

from deniable.client.mechanisms import (
    BRR,
    KRR,
    MAX_EPSILON,
    MIN_EPSILON,
    OLH,
    OLH_PRIME,
    OUE,
    Mechanism,
    make_mechanism,
)
from testkit.transitions import Scripted, olh_exact_q, transition


def _worst_ratio(rows: list[dict]) -> float:
    """The largest ratio P(y | x) / P(y | x') over outputs y and inputs x, x'."""
    outputs = set().union(*rows)
    worst = 0.0
    for y in outputs:
        probs = [row.get(y, 0.0) for row in rows]
        assert min(probs) > 0, "an output possible under one input is impossible under another"
        worst = max(worst, max(probs) / min(probs))
    return worst


SMALL = [BRR(2, 1.0), KRR(2, 0.5), KRR(3, 1.0), KRR(4, 2.5), OUE(3, 1.0), OUE(4, 0.7)]


@pytest.mark.parametrize("mechanism", SMALL, ids=repr)
def test_transition_rows_sum_to_one_and_ratio_is_e_eps_attained(mechanism: Mechanism) -> None:
    rows = transition(mechanism)
    for row in rows:
        assert math.isclose(sum(row.values()), 1.0, abs_tol=1e-12)
    e = math.exp(mechanism.epsilon)
    assert _worst_ratio(rows) <= e * (1 + 1e-12)
    assert _worst_ratio(rows) >= e * (1 - 1e-12)


@pytest.mark.parametrize("mechanism", SMALL, ids=repr)
def test_support_probabilities_of_the_code_are_p_star_and_q_star(mechanism: Mechanism) -> None:
    rows = transition(mechanism)
    payloads = {y: mechanism.parse_payload(y) for y in set().union(*rows)}
    for x, row in enumerate(rows):
        for v in range(mechanism.k):
            supports = sum(p for y, p in row.items() if v in mechanism.supported(payloads[y]))
            expected = mechanism.p_star if v == x else mechanism.q_star
            assert math.isclose(supports, expected, rel_tol=1e-12, abs_tol=1e-15)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_oue_bit_ratio_is_e_eps(epsilon: float) -> None:
    m = OUE(5, epsilon)
    p, q = m.p_star, m.q_star
    assert math.isclose(p * (1 - q) / ((1 - p) * q), math.exp(epsilon), rel_tol=1e-12)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.0])
def test_krr_with_two_categories_is_brr(epsilon: float) -> None:
    assert transition(KRR(2, epsilon)) == transition(BRR(2, epsilon))
    assert transition(BRR(2, epsilon))[1][1] == pytest.approx(
        1 / (1 + math.exp(-epsilon)), abs=1e-15
    )


OLH_CASES = [OLH(4, 1.0), OLH(6, 2.0), OLH(3, 0.4)]
SEEDS = [(1, 0), (OLH_PRIME - 1, OLH_PRIME - 1), (123_456_789, 987_654_321), (2, 5)]


@pytest.mark.parametrize("mechanism", OLH_CASES, ids=repr)
@pytest.mark.parametrize(("a", "b"), SEEDS)
def test_olh_conditional_on_a_b_rows_sum_to_one_and_ratio_is_e_eps(
    mechanism: OLH, a: int, b: int
) -> None:
    rows = transition(mechanism, fixed={0: a - 1, 1: b})
    for row in rows:
        assert math.isclose(sum(row.values()), 1.0, abs_tol=1e-12)
        assert {dict(y)["a"] for y in row} == {a} and {dict(y)["b"] for y in row} == {b}
    e = math.exp(mechanism.epsilon)
    ratio = _worst_ratio(rows)
    hashes = {mechanism.hash(a, b, x) for x in range(mechanism.k)}
    assert ratio <= e * (1 + 1e-12)
    if len(hashes) > 1:  # two inputs hash apart, so the bound is attained
        assert ratio >= e * (1 - 1e-12)
    for x, row in enumerate(rows):
        kept = sum(p for y, p in row.items() if dict(y)["y"] == mechanism.hash(a, b, x))
        assert math.isclose(kept, mechanism.p_star, rel_tol=1e-12)


def test_olh_draws_a_and_b_uniformly_over_the_whole_range() -> None:
    m = OLH(4, 1.0)
    rng = Scripted([])
    m.randomize(0, rng)
    assert rng.calls[:2] == [("randbelow", OLH_PRIME - 1), ("randbelow", OLH_PRIME)]
    low = m.randomize(0, Scripted([0, 0]))
    high = m.randomize(0, Scripted([OLH_PRIME - 2, OLH_PRIME - 1]))
    assert (low["a"], low["b"]) == (1, 0)
    assert (high["a"], high["b"]) == (OLH_PRIME - 1, OLH_PRIME - 1)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_olh_q_star_is_the_exact_collision_rate_within_1e8(epsilon: float) -> None:
    """Averaged over (a, b), a report on x supports v != x with probability q*, up to O(g/P)."""
    m = OLH(8, epsilon)
    assert abs(olh_exact_q(m) - m.q_star) < 1e-8


AT_THE_CAP = [
    BRR(2, MAX_EPSILON),
    KRR(2, MAX_EPSILON),
    KRR(3, MAX_EPSILON),
    KRR(10, MAX_EPSILON),
    OUE(3, MAX_EPSILON),
    OUE(4, MAX_EPSILON),
    OLH(3, MAX_EPSILON),
    OLH(10, MAX_EPSILON),
]


@pytest.mark.parametrize("mechanism", AT_THE_CAP, ids=repr)
def test_at_max_epsilon_every_mechanism_still_randomizes(mechanism: Mechanism) -> None:
    """Each randomized choice goes either way with probability far above the draws' 2^-53.

    The probabilities are read off ``randomize`` itself (the thresholds its float draws are
    compared with): for brr/krr/oue, P(a report supports v | x) and its complement; for olh,
    with its seeds pinned, P(y = H(x)) and P(y = any one other value), the "other value" draw
    being pinned too and uniform over g - 1 values. The privacy ratio attained is still e^eps.
    """
    e = math.exp(mechanism.epsilon)
    if isinstance(mechanism, OLH):
        assert mechanism.g < OLH_PRIME
        a, b = 123_456_789, 987_654_321
        rows = transition(mechanism, fixed={0: a - 1, 1: b, 3: 0})
        kept = [
            sum(p for y, p in row.items() if dict(y)["y"] == mechanism.hash(a, b, x))
            for x, row in enumerate(rows)
        ]
        other = [(1.0 - p) / (mechanism.g - 1) for p in kept]
        assert min(other) >= 2.0**-32
        assert max(kept) / min(other) == pytest.approx(e, rel=1e-6)
        return
    rows = transition(mechanism)
    payloads = {y: mechanism.parse_payload(y) for y in set().union(*rows)}
    supports = [
        sum(p for y, p in row.items() if v in mechanism.supported(payloads[y]))
        for row in rows
        for v in range(mechanism.k)
    ]
    assert min(min(s, 1.0 - s) for s in supports) >= 2.0**-32
    assert _worst_ratio(rows) == pytest.approx(e, rel=1e-6)


@pytest.mark.parametrize("name", ["brr", "krr", "oue", "olh"])
@pytest.mark.parametrize(
    ("epsilon", "bound"),
    [(math.nextafter(MAX_EPSILON, math.inf), "at most 20"), (MIN_EPSILON * 0.999, "at least")],
)
def test_epsilon_outside_the_bounds_is_refused(name: str, epsilon: float, bound: str) -> None:
    k = 2 if name == "brr" else 5
    with pytest.raises(ValueError, match=f"epsilon must be {bound}"):
        make_mechanism(name, k, epsilon)
    assert make_mechanism(name, k, MAX_EPSILON).epsilon == MAX_EPSILON
    assert make_mechanism(name, k, MIN_EPSILON).epsilon == MIN_EPSILON
