"""The shuffle accountant against shared STATS.md §12: its reference values, the orderings of
the bounds, eps never above eps0 and never growing with n or delta, and the bound chosen from
the mechanism object."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deniable.client.errors import InvalidInput
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
from deniable.estimators.shufflelimits import MAX_BATCH
from deniable.estimators.shuffling import (
    DEFAULT_DELTA,
    _PairModel,
    central_guarantee,
    fmt21_closed_form_epsilon,
    fmt21_numerical_epsilon,
    krr_epsilon,
    lower_bound_epsilon,
    strong_clone_epsilon,
)
from testkit.shuffle_reference import KRR_REFERENCE, REFERENCE


def agrees(value: float, printed: str) -> bool:
    """Whether ``value`` rounds to ``printed`` (within half a unit of its last digit)."""
    decimals = len(printed.split(".")[1])
    return abs(value - float(printed)) <= 0.5 * 10**-decimals + 1e-12


@pytest.mark.parametrize(("eps0", "n", "cf", "num", "sc", "lb"), REFERENCE)
def test_strong_clone_and_lower_bound_reproduce_the_table(eps0, n, cf, num, sc, lb) -> None:
    assert agrees(strong_clone_epsilon(eps0, n), sc)
    assert agrees(lower_bound_epsilon(eps0, n), lb)


@pytest.mark.parametrize(("eps0", "n", "cf", "num", "sc", "lb"), REFERENCE)
def test_the_closed_form_reproduces_the_table_and_its_invalid_regime(eps0, n, cf, num, sc, lb):
    value = fmt21_closed_form_epsilon(eps0, n)
    assert (value is None) == (cf is None)
    assert value is None or agrees(value, cf)


@pytest.mark.parametrize(("k", "eps0", "n", "printed"), KRR_REFERENCE)
def test_the_krr_bound_reproduces_the_pair_clone_values(k, eps0, n, printed) -> None:
    assert agrees(krr_epsilon(eps0, k, n), printed)


def test_the_krr_bound_is_the_strong_clone_divergence_scaled_by_the_pair_mass() -> None:
    """delta(eps) = (p + q) * delta_pair(eps; clones 2q): at the bound's eps the scaled
    divergence is within delta, a grid step below it is not."""
    eps0, k, n = 2.0, 5, 300
    q = 1 / (math.exp(eps0) + k - 1)
    model = _PairModel(n, eps0, 2 * q, apple_stop=False)
    eps = krr_epsilon(eps0, k, n)
    scaled = (math.exp(eps0) + 1) * q
    assert scaled * model.delta(eps) <= DEFAULT_DELTA < scaled * model.delta(eps - 1e-6)


@pytest.mark.parametrize(("eps0", "n"), [(1, 10**4), (4, 10**5), (8, 10**6)])
def test_krr_with_two_categories_is_the_strong_clone_bound(eps0: float, n: int) -> None:
    assert krr_epsilon(eps0, 2, n) == strong_clone_epsilon(eps0, n)


# Apple's deltacomp (ml-shuffling-amplification at 993d285, its current version; step 1,
# deltaupper 1, its deltaqadd defect fixed) run on these points: delta at eps, to compare the
# divergence computed here, not only the eps it bisects to.
APPLE_DELTAS = [
    (10000, 4, 0.625, 1.0048169832854725e-06),
    (10000, 4, 0.6256, 8.610228768857198e-07),
    (10000, 1, 0.0555, 1.035306110175327e-06),
    (10000, 1, 0.0557, 9.55068765295941e-07),
    (100000, 4, 0.1769, 1.0215854503448085e-06),
    (100000, 4, 0.1771, 9.72410601596252e-07),
]


@pytest.mark.parametrize(("n", "eps0", "eps", "delta"), APPLE_DELTAS)
def test_apples_stopping_rule_gives_apples_delta(n: int, eps0: float, eps: float, delta: float):
    model = _PairModel(n, eps0, math.exp(-eps0), apple_stop=True)
    assert model.delta(eps) == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize(("eps0", "n", "cf", "num", "sc", "lb"), REFERENCE)
def test_fmt21_with_apples_rule_reproduces_the_table(eps0, n, cf, num, sc, lb) -> None:
    assert agrees(fmt21_numerical_epsilon(eps0, n, apple_stop=True), num)


@pytest.mark.parametrize(("eps0", "n", "cf", "num", "sc", "lb"), REFERENCE)
def test_the_bounds_are_ordered(eps0, n, cf, num, sc, lb) -> None:
    """LB <= SC <= FMT21 (full sum) <= FMT21 (Apple's rule) <= FMT21 closed form <= eps0."""
    chain = [
        lower_bound_epsilon(eps0, n),
        strong_clone_epsilon(eps0, n),
        fmt21_numerical_epsilon(eps0, n),
        fmt21_numerical_epsilon(eps0, n, apple_stop=True),
    ]
    closed = fmt21_closed_form_epsilon(eps0, n)
    if closed is not None:
        chain.append(closed)
    chain.append(eps0)
    assert chain == sorted(chain)


def test_apples_rule_is_not_monotone_in_n_and_the_full_sum_is() -> None:
    """Why the guarantee is the full sum: Apple's stopping rule lets eps grow from n = 35 to
    36 at eps0 0.05."""
    assert fmt21_numerical_epsilon(0.05, 36, apple_stop=True) > fmt21_numerical_epsilon(
        0.05, 35, apple_stop=True
    )
    assert fmt21_numerical_epsilon(0.05, 36) <= fmt21_numerical_epsilon(0.05, 35)


EPS0 = [0.05, 0.1, 0.5, 0.69, 0.7, 1.0, 2.0, 4.0, 8.0, 12.0]
SIZES = [1, 2, 3, 10, 50, 139, 140, 141, 500, 1_000, 4_321, 10_000, 54_321, 100_000]
DELTAS = [1e-10, 1e-8, 1e-6, 1e-4, 1e-2]
BOUNDS = {
    "strong clone": strong_clone_epsilon,
    "fmt21": fmt21_numerical_epsilon,
    "krr k=5": lambda eps0, n, delta: krr_epsilon(eps0, 5, n, delta),
    "lower bound": lower_bound_epsilon,
}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    bound=st.sampled_from(sorted(BOUNDS)),
    eps0=st.sampled_from(EPS0),
    sizes=st.lists(st.sampled_from(SIZES), min_size=2, max_size=2, unique=True),
    delta=st.sampled_from(DELTAS),
)
def test_eps_never_grows_with_n_and_never_exceeds_eps0(bound, eps0, sizes, delta) -> None:
    small, large = sorted(sizes)
    at_small = BOUNDS[bound](eps0, small, delta)
    assert BOUNDS[bound](eps0, large, delta) <= at_small <= eps0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    bound=st.sampled_from(sorted(BOUNDS)),
    eps0=st.sampled_from(EPS0),
    n=st.sampled_from(SIZES),
    deltas=st.lists(st.sampled_from(DELTAS), min_size=2, max_size=2, unique=True),
)
def test_eps_never_grows_with_delta(bound, eps0, n, deltas) -> None:
    small, large = sorted(deltas)
    assert BOUNDS[bound](eps0, n, large) <= BOUNDS[bound](eps0, n, small)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(eps0=st.sampled_from(EPS0), n=st.sampled_from(SIZES), delta=st.sampled_from(DELTAS))
def test_no_bound_is_below_the_exact_lower_bound(eps0: float, n: int, delta: float) -> None:
    floor = lower_bound_epsilon(eps0, n, delta)
    assert strong_clone_epsilon(eps0, n, delta) >= floor
    assert fmt21_numerical_epsilon(eps0, n, delta) >= strong_clone_epsilon(eps0, n, delta)


@pytest.mark.parametrize(
    ("mechanism", "bound"),
    [
        (BRR(2, 4.0), "strong-clone"),
        (KRR(2, 4.0), "strong-clone"),
        (KRR(5, 4.0), "krr-pair-clone"),
        (OUE(10, 4.0), "fmt21-numerical"),
        (OLH(10, 4.0), "fmt21-numerical"),
        (PrefixSketch(16, 4.0), "fmt21-numerical"),
        (Duchi(4.0), "fmt21-numerical"),
        (Piecewise(4.0), "fmt21-numerical"),
        (Hybrid(4.0), "fmt21-numerical"),
    ],
)
def test_the_bound_comes_from_the_mechanism(mechanism, bound: str) -> None:
    guarantee = central_guarantee(mechanism, 10**5)
    assert guarantee.bound == bound and guarantee.amplified
    assert guarantee.delta == DEFAULT_DELTA and guarantee.local_epsilon == 4.0
    expected = {
        "strong-clone": strong_clone_epsilon(4.0, 10**5),
        "krr-pair-clone": krr_epsilon(4.0, 5, 10**5),
        "fmt21-numerical": fmt21_numerical_epsilon(4.0, 10**5),
    }[bound]
    assert guarantee.epsilon == expected


def test_the_oue_bound_is_not_the_strong_clone_one() -> None:
    """OUE fails the pointwise split: its guarantee is FMT21's, above the strong clone's."""
    assert not OUE.pointwise_split and KRR.pointwise_split and BRR.pointwise_split
    assert central_guarantee(OUE(2, 4.0), 10**5).epsilon > strong_clone_epsilon(4.0, 10**5)


@pytest.mark.parametrize(("eps0", "n"), [(4.0, 1), (8.0, 2), (12.0, 1_000)])
def test_no_amplification_gives_the_local_eps(eps0: float, n: int) -> None:
    guarantee = central_guarantee(OUE(4, eps0), n)
    assert guarantee.bound == "none" and not guarantee.amplified
    assert guarantee.epsilon == eps0


@pytest.mark.parametrize(("k", "eps0", "n"), [(10, 1.0, 10**4), (100, 4.0, 10**5), (3, 0.5, 100)])
def test_krr_takes_fmt21_where_that_is_lower(k: int, eps0: float, n: int) -> None:
    """Both bounds hold for k-RR; at large k (or small eps0) clones of a pair are rare and
    FMT21's is the lower."""
    generic = fmt21_numerical_epsilon(eps0, n)
    assert generic < krr_epsilon(eps0, k, n)
    guarantee = central_guarantee(KRR(k, eps0), n)
    assert (guarantee.epsilon, guarantee.bound) == (generic, "fmt21-numerical")


def test_a_memoized_reports_own_eps_is_used_when_given() -> None:
    guarantee = central_guarantee(KRR(4, 2.0), 10**4, local_epsilon=1.0)
    assert guarantee.local_epsilon == 1.0
    assert guarantee.epsilon == krr_epsilon(1.0, 4, 10**4)


@pytest.mark.parametrize(
    ("n", "delta", "words"),
    [
        (0, 1e-6, "batch size"),
        (MAX_BATCH + 1, 1e-6, "batch size"),
        (1.5, 1e-6, "batch size"),
        (True, 1e-6, "batch size"),
        (1000, 0.0, "delta"),
        (1000, 0.5, "delta"),
        (1000, math.nan, "delta"),
    ],
)
def test_out_of_range_arguments_are_refused_by_name(n, delta, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        fmt21_numerical_epsilon(4.0, n, delta)
