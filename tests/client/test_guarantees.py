"""The typed privacy guarantees (deniable.client.guarantees): composition, scaling, comparison,
the one rounding rule (declared floats read as their decimals, results rounded up), frozen
values and the parameters they refuse."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import pytest

from deniable.client.errors import DeniableError, InvalidInput
from deniable.client.guarantees import ApproxDP, PureDP, compose, exact, round_up
from deniable.client.ledger import ReportCost, lifetime_reports
from deniable.client.mechanisms import make_mechanism, make_numeric_mechanism, two_layers


def test_composition_adds_the_epsilons_and_the_deltas() -> None:
    assert PureDP(0.5) + PureDP(0.25) == PureDP(0.75)
    assert ApproxDP(1.0, 1e-6) + ApproxDP(0.5, 2e-6) == ApproxDP(1.5, 3e-6)
    mixed = PureDP(2.0) + ApproxDP(1.0, 1e-7)
    assert isinstance(mixed, ApproxDP) and mixed == ApproxDP(3.0, 1e-7)
    assert compose([PureDP(0.1), PureDP(0.2), PureDP(0.3)]) == PureDP(0.6)
    assert compose([]) == PureDP(0.0)


def test_scaling_by_a_count_is_repeated_composition() -> None:
    assert 10 * PureDP(0.1) == PureDP(1.0) == PureDP(0.1) * 10
    assert 3 * ApproxDP(0.5, 1e-6) == ApproxDP(1.5, 3e-6)
    assert 0 * PureDP(math.inf) == PureDP(0.0)
    assert 4 * PureDP(math.inf) == PureDP(math.inf)
    with pytest.raises(InvalidInput):
        PureDP(1.0) * -1
    with pytest.raises(TypeError):
        PureDP(1.0) * True


def test_comparison_is_exact_and_keeps_local_and_central_apart() -> None:
    assert PureDP(0.3) < PureDP(0.30000000000000004) <= PureDP(math.inf)
    assert 3 * PureDP(0.1) <= PureDP(0.3) and 3 * PureDP(0.1) >= PureDP(0.3)
    assert not 4 * PureDP(0.1) <= PureDP(0.3)
    assert ApproxDP(1.0, 1e-7) <= ApproxDP(1.0, 1e-6) < ApproxDP(2.0, 1e-6)
    assert not ApproxDP(0.5, 1e-5) <= ApproxDP(1.0, 1e-6)  # incomparable: a partial order
    assert not ApproxDP(1.0, 1e-6) <= ApproxDP(0.5, 1e-5)
    assert PureDP(1.0) != ApproxDP(1.0, 0.0)
    assert PureDP(1.0).approx() == ApproxDP(1.0, 0.0)
    with pytest.raises(TypeError):
        PureDP(1.0) <= ApproxDP(1.0, 0.0)  # noqa: B015
    with pytest.raises(TypeError):
        PureDP(1.0) <= 1.0  # noqa: B015


def test_float_addition_rounds_down_where_the_guarantee_rounds_up() -> None:
    """0.1 + 0.7 is 0.7999999999999999 in floats, below the exact sum of either reading; the
    guarantee's eps is never below it: not the decimals' 4/5 nor the binary floats' sum."""
    assert Fraction(4, 5) > 0.1 + 0.7 and Fraction(0.1 + 0.7) < Fraction(0.1) + Fraction(0.7)
    total = PureDP(0.1) + PureDP(0.7)
    assert total.epsilon == 0.8
    assert exact(total.epsilon) >= Fraction(4, 5)
    assert Fraction(total.epsilon) >= Fraction(0.1) + Fraction(0.7)
    assert total.figure == 0.1 + 0.7  # the published figure, computed as it always was
    composed = ApproxDP(0.1, 0.1) + ApproxDP(0.7, 0.7)
    assert composed.delta > 0.1 + 0.7 and exact(composed.delta) >= Fraction(4, 5)


@pytest.mark.parametrize(
    "parts",
    [[0.1, 0.2], [0.1, 0.7], [0.3] * 7, [1 / 3, 1 / 3, 1 / 3], [0.001] * 1000, [2.675, 1e-9]],
)
def test_a_composed_eps_is_never_below_the_exact_sum_of_its_parts(parts: list[float]) -> None:
    total = compose(PureDP(p) for p in parts)
    decimals = sum((exact(p) for p in parts), Fraction(0))
    assert exact(total.epsilon) >= decimals
    assert exact(math.nextafter(total.epsilon, 0.0)) < decimals  # and the least such float
    assert total.value == decimals


def test_the_rounding_rule_rounds_up_only_when_inexact() -> None:
    assert round_up(Fraction(1, 10)) == 0.1  # 0.1 reads as 1/10 exactly
    assert round_up(Fraction(1, 2)) == 0.5
    third = round_up(Fraction(1, 3))
    assert exact(third) >= Fraction(1, 3) > exact(math.nextafter(third, 0.0))
    for declared in (0.1, 0.3, 1.41, 2.5, 1e-6, 7.0, 1 / 3):
        assert PureDP(declared).epsilon == declared  # a declared float reads back as itself


def test_ten_reports_at_point_one_fit_a_cap_of_one_without_a_slack() -> None:
    assert 10 * PureDP(0.1) <= PureDP(1.0) < 11 * PureDP(0.1)
    assert PureDP(0.1).reports_within(PureDP(1.0)) == 10
    assert PureDP(0.2).reports_within(PureDP(1.0)) == 5
    assert PureDP(0.3).reports_within(PureDP(0.95)) == 3
    assert PureDP(0.0).reports_within(PureDP(1.0)) is None
    assert PureDP(1.0).reports_within(PureDP(math.inf)) is None


def overwrite(value: object, name: str) -> None:
    """Try to change the field ``name`` of ``value`` in place."""
    setattr(value, name, Fraction(0))


def test_guarantees_are_frozen_values() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        overwrite(PureDP(1.0), "value")
    with pytest.raises(dataclasses.FrozenInstanceError):
        overwrite(ApproxDP(1.0, 1e-6), "delta_value")
    assert {PureDP(1.0), PureDP(1), 10 * PureDP(0.1)} == {PureDP(1.0)}
    assert len({ApproxDP(1.0, 1e-6), ApproxDP(1, 1e-6)}) == 1
    assert repr(ApproxDP(0.5, 1e-6)) == "ApproxDP(epsilon=0.5, delta=1e-06)"


NOT_A_NUMBER: Any = "1"
A_BOOL: Any = True


@pytest.mark.parametrize(
    "make",
    [
        lambda: PureDP(-0.1),
        lambda: PureDP(math.nan),
        lambda: PureDP(NOT_A_NUMBER),
        lambda: PureDP(A_BOOL),
        lambda: ApproxDP(-1.0, 0.0),
        lambda: ApproxDP(1.0, -1e-9),
        lambda: ApproxDP(1.0, 1.0),
        lambda: ApproxDP(1.0, 1.5),
        lambda: ApproxDP(1.0, math.nan),
        lambda: ApproxDP(1.0, 0.6) + ApproxDP(1.0, 0.4),
    ],
)
def test_invalid_parameters_are_refused_by_class(make) -> None:
    with pytest.raises(InvalidInput) as refused:
        make()
    assert isinstance(refused.value, DeniableError)


def test_each_randomizer_and_both_memo_layers_declare_their_guarantee() -> None:
    for name in ("brr", "krr", "oue", "olh"):
        k = 2 if name == "brr" else 5
        assert make_mechanism(name, k, 0.7).guarantee == PureDP(0.7)
    for name in ("duchi", "pm", "hybrid"):
        assert make_numeric_mechanism(name, 1.5).guarantee == PureDP(1.5)
    layers = two_layers(make_mechanism("krr", 4, 0.1), 3.0)
    assert layers is not None
    assert layers.instantaneous_guarantee == PureDP(0.3)  # ratio x eps exactly: 3/10
    assert layers.instantaneous_guarantee.figure == layers.instantaneous_epsilon == 3.0 * 0.1
    assert layers.permanent_guarantee == PureDP(layers.permanent_epsilon)
    assert 3 * layers.instantaneous_guarantee <= PureDP(0.9)


def slack_rule_reports(cap: float, epsilon: float) -> int:
    """The most reports the ledger admitted before the typed guarantees: n x eps <= cap + 1e-9
    in floats (its slack), an oracle for the no-behaviour-change check."""
    n = 0
    while (n + 1) * epsilon <= cap + 1e-9:
        n += 1
    return n


def test_the_exact_cap_admits_what_the_float_slack_admitted_on_declared_decimals() -> None:
    """On declared decimals (eps and caps in hundredths, ratios in halves) the exact rule stops
    the ledger where the 1e-9 slack did, fresh and memoized (the fresh layer ratio x eps)."""
    for epsilon in (i / 100 for i in range(1, 201, 3)):
        for cap in (j / 20 for j in range(1, 101, 2)):
            assert lifetime_reports(cap, epsilon) == slack_rule_reports(cap, epsilon)
            for ratio in (1.5, 2.0, 2.5, 3.0):
                layers = ReportCost(
                    epsilon, True, epsilon, ratio * epsilon, PureDP(epsilon) * ratio
                )
                assert layers.lifetime_reports(cap) == max(
                    1, slack_rule_reports(cap, ratio * epsilon)
                ) * (epsilon <= cap)
