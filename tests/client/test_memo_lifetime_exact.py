"""A lifetime cap on memoized (and fresh) reports, checked by exact enumeration of everything a
device sends (issue 37, item 2; docs/STATS.md section 13, "Memoization and caps").

Every history of true values over T days is recorded by a real Recorder and Ledger with the
cap, one UTC day per period, and every path of their randomness is walked exactly
(``testkit.transitions.outputs_over_days``). The output is the whole of what the device sends:
on which days a report goes out, how many, and their payloads. Whether a report is sent must
not depend on the values (the send pattern is the same for every history), and every figure
the account publishes (each window of d days, per day, 7 and 30 days, lifetime, per value)
must be at least the largest log likelihood ratio between the outputs of any two histories
(infinite where one can occur and the other not).

The caps include the issue's: one that the old rule (the lifetime cap counted per distinct
memoized value at eps_perm) read as "two values", under which a device that changed value sent
fewer reports (an infinite likelihood ratio against an account of 14 over 7 days).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import defaultdict
from collections.abc import Hashable

import numpy as np
import pytest

from deniable.client import MetricSpec
from deniable.client.account import DeviceSettings, privacy_account
from deniable.client.mechanisms import two_layers
from testkit.transitions import outputs_over_days

TIGHT = 1e-9
EPSILON = 1.0


def spec_for(k: int) -> MetricSpec:
    """A daily boolean (brr, k = 2) or a daily krr categorical metric with k categories."""
    if k == 2:
        return MetricSpec.boolean("m", epsilon=EPSILON)
    return MetricSpec.categorical(
        "m", [f"c{i}" for i in range(k)], epsilon=EPSILON, mechanism="krr"
    )


def values_of(spec: MetricSpec) -> list:
    """The values a device can record for ``spec``."""
    return [False, True] if spec.type == "boolean" else list(spec.categories)


def two_values(k: int, ratio: float | None) -> float:
    """A cap the old rule read as exactly two distinct memoized values (2 eps_perm)."""
    if ratio is None:
        return 2 * EPSILON
    layers = two_layers(spec_for(k).randomizer, ratio)
    assert layers is not None
    return 2 * layers.permanent_epsilon


def largest_log_ratio(distributions: list[dict[Hashable, float]]) -> float:
    """The largest ln P_a(y) / P_b(y) over every ordered pair (a, b) and output y."""
    outputs = sorted({y for d in distributions for y in d}, key=repr)
    table = np.array([[d.get(y, 0.0) for y in outputs] for d in distributions])
    with np.errstate(divide="ignore"):
        logs = np.log(table)
    spread = logs.max(axis=0) - logs.min(axis=0)
    return float(spread.max())


def marginal(distribution: dict[Hashable, float], start: int, length: int) -> dict:
    """The distribution of what is sent on days start .. start + length - 1."""
    window: dict[Hashable, float] = defaultdict(float)
    for output, p in distribution.items():
        window[output[start : start + length]] += p  # type: ignore[index]
    return dict(window)


def pattern(distribution: dict[Hashable, float]) -> dict[tuple[int, ...], float]:
    """The distribution of how many reports are sent on each day."""
    counts: dict[tuple[int, ...], float] = defaultdict(float)
    for output, p in distribution.items():
        counts[tuple(len(day) for day in output)] += p  # type: ignore[union-attr]
    return dict(counts)


CASES = [
    # (k, memoize, instantaneous_ratio, lifetime cap, days, records per day); None as the cap
    # means the issue's: two distinct values under the old rule.
    *[(2, True, 2.0, cap, 4, 1) for cap in (None, 1.0, 4.0, 6.0)],
    (3, True, 2.0, None, 4, 1),
    (3, True, 2.0, 1.0, 4, 1),
    (3, True, 2.0, 4.0, 3, 1),
    (3, True, 2.0, 6.0, 3, 1),
    (2, True, None, None, 4, 1),
    (3, True, None, None, 3, 1),
    (3, False, 2.0, 2.0, 4, 1),
    (2, True, 2.0, 6.0, 2, 2),
]


@pytest.fixture(autouse=True)
def quiet_refusals():
    """The recorder logs each refused period once; the enumeration runs thousands of them."""
    logger = logging.getLogger("deniable.client")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.mark.parametrize(("k", "memoize", "ratio", "cap", "days", "per_day"), CASES)
def test_every_published_figure_bounds_the_exact_output_of_every_pair_of_histories(
    k: int, memoize: bool, ratio: float | None, cap: float | None, days: int, per_day: int
) -> None:
    spec = spec_for(k)
    lifetime = two_values(k, ratio) if cap is None else cap
    settings = DeviceSettings(per_day, memoize, lifetime, ratio)
    account = privacy_account([spec], settings)
    figures = account.metrics[0]
    day_values = list(itertools.product(values_of(spec), repeat=per_day))
    histories = list(itertools.product(day_values, repeat=days))
    outputs = [outputs_over_days(spec, settings, history) for history in histories]
    for distribution in outputs:
        assert math.isclose(sum(distribution.values()), 1.0, abs_tol=1e-12)

    # Whether and how many reports go out depends on no value: one pattern for every history.
    first = pattern(outputs[0])
    for distribution in outputs[1:]:
        sent = pattern(distribution)
        assert sent.keys() == first.keys()
        assert all(abs(sent[key] - first[key]) <= TIGHT for key in first)

    def published(figure: float | None) -> float:
        return math.inf if figure is None else figure

    everything = largest_log_ratio(outputs)
    for length in range(1, days + 1):
        claimed = account.over_days(length)
        for start in range(days - length + 1):
            window = largest_log_ratio([marginal(d, start, length) for d in outputs])
            assert window <= claimed + TIGHT, (length, start, window, claimed)
            if length == 1:
                assert window <= published(figures.per_day) + TIGHT
                assert window <= published(figures.per_period) + TIGHT
    assert everything <= published(figures.per_7_days) + TIGHT
    assert everything <= published(figures.per_30_days) + TIGHT
    assert everything <= published(figures.lifetime) + TIGHT
    assert everything <= published(account.totals.lifetime) + TIGHT

    constant = [
        o
        for o, h in zip(outputs, histories, strict=True)
        if len({v for day in h for v in day}) == 1
    ]
    assert largest_log_ratio(constant) <= published(figures.per_value_lifetime) + TIGHT

    # The cap stops reports (the test is not vacuous): fewer are sent than recorded, and
    # what is sent differs between histories, boundedly.
    reports = sum(next(iter(first)))
    assert 1 <= reports <= days * per_day
    assert 0 < everything < math.inf
