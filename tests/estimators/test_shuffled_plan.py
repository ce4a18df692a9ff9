"""The shuffled plan: the largest local eps under a central target, and the margins through
a shuffler and without one."""

from __future__ import annotations

import math

import pytest

from deniable.client.mechanisms import make_mechanism
from deniable.estimators.advisor import (
    largest_local_epsilon,
    margin_of_error,
    shuffled_plan_document,
)
from deniable.estimators.shuffling import central_guarantee


@pytest.mark.parametrize(
    ("mechanism", "k", "target", "batch"),
    [("brr", 2, 0.5, 10_000), ("krr", 10, 0.2, 100_000), ("oue", 50, 0.3, 50_000)],
)
def test_the_largest_local_eps_meets_the_target_and_a_step_more_does_not(
    mechanism: str, k: int, target: float, batch: int
) -> None:
    eps0 = largest_local_epsilon(mechanism, k, target, batch, 1e-6)
    assert eps0 > target
    at = central_guarantee(make_mechanism(mechanism, k, eps0), batch, 1e-6)
    assert at.epsilon <= target and at.amplified
    step = 10.0 ** (math.floor(math.log10(eps0)) - 2)
    beyond = central_guarantee(make_mechanism(mechanism, k, eps0 + 2 * step), batch, 1e-6)
    assert beyond.epsilon > target


def test_without_amplification_the_local_eps_is_the_target() -> None:
    assert largest_local_epsilon("oue", 10, 0.5, 2, 1e-6) == 0.5


def test_the_shuffler_narrows_the_margin_at_the_same_central_eps() -> None:
    document = shuffled_plan_document(
        10, 0.2, batch=100_000, delta=1e-6, reports=None, confidence=0.95, simultaneous=True
    )
    assert document["reports"] == 100_000
    for row in document["mechanisms"]:
        local = margin_of_error(10, 0.2, 100_000, mechanism=row["mechanism"])
        assert row["local_only_margin"] == pytest.approx(local)
        assert row["margin"] == pytest.approx(
            margin_of_error(10, row["local_epsilon"], 100_000, mechanism=row["mechanism"])
        )
        assert row["margin"] < row["local_only_margin"] / 5
        assert row["central_epsilon_reached"] <= 0.2
    advised = next(r for r in document["mechanisms"] if r["mechanism"] == document["advised"])
    assert all(advised["margin"] <= r["margin"] for r in document["mechanisms"])
