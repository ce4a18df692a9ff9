"""Two windows of periods reported by the same devices, simulated from the exact sampling
distribution of the counts (any n, cost independent of n), for the coverage of period
differences (tests/estimators/test_differences.py, bench/breakdown_coverage.py).

One category v at a time: each device's indicator x = 1{value is v} in window A and x' in
window B, and its report's support of v, is all a share's interval reads (C_v and n), so the
marginal law of one row's counts is exact. Devices behave as a ``scenario`` says:

* ``same``: x' = x (nothing changed);
* ``toggle``: x' = 1 - x (each device's value moves against itself: the windows' estimates
  are negatively correlated, what an interval assuming independent windows misses);
* ``change``: x' = x, except that a fifth of the devices outside v move into it;
* ``disjoint``: window B's devices are other devices (independent windows).

and report as ``memo`` says:

* ``fresh``: every report randomized afresh (support with p* if x, else q*);
* ``permanent``: one remembered support bit per (device, value), repeated in every report
  of that value (memoized payloads without a fresh layer: oue, olh, any mechanism with
  ``instantaneous_ratio=None``);
* ``two-layer``: krr/brr's memoized reports (client.mechanisms.TwoLayers): a remembered
  permanent answer per value, randomized afresh on every report (projected on v: the answer
  is v with p1 or q1, the report supports v with p2 if it is, q2 if not).

Each device takes part in period t with probability ``participation[t]``, independently.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from deniable.client.mechanisms import KRR, Mechanism, TwoLayers

SCENARIOS = ("same", "toggle", "change", "disjoint")
MEMOS = ("fresh", "permanent", "two-layer")
MOVE = 0.2
"""The share of devices outside v that move into it in the ``change`` scenario."""


@dataclass(frozen=True)
class Windows:
    """Per-period n and support counts of each window, shapes (reps, T) and (reps, T, 1), and
    the true report-weighted shares theta_A, theta_B of the row."""

    n_a: np.ndarray
    counts_a: np.ndarray
    n_b: np.ndarray
    counts_b: np.ndarray
    truth_a: float
    truth_b: float


def _moves(scenario: str, f: float) -> dict[tuple[int, int], float]:
    """P(x, x') of one device."""
    if scenario == "same":
        return {(1, 1): f, (0, 0): 1 - f}
    if scenario == "toggle":
        return {(1, 0): f, (0, 1): 1 - f}
    if scenario == "change":
        return {(1, 1): f, (0, 1): MOVE * (1 - f), (0, 0): (1 - MOVE) * (1 - f)}
    raise ValueError(scenario)


def _bit_probabilities(mechanism: Mechanism, memo: str) -> tuple[float, float]:
    """P(remembered bit = 1 | x = 1), P(... | x = 0): the support itself, or the permanent
    answer being v."""
    if memo == "permanent":
        return mechanism.p_star, mechanism.q_star
    layers = TwoLayers(mechanism, 2.0)  # type: ignore[arg-type]
    return layers.permanent.p, layers.permanent.q


def _support(
    mechanism: Mechanism,
    memo: str,
    present: np.ndarray,
    x: np.ndarray,
    bit: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Support counts of v from ``present`` devices per group (reps, groups), each group's
    value indicator ``x`` and remembered bit ``bit`` (groups,)."""
    if memo == "fresh":
        p = np.where(x == 1, mechanism.p_star, mechanism.q_star)
        return rng.binomial(present, p).sum(axis=-1)
    if memo == "permanent":
        return (present * bit).sum(axis=-1)
    layers = TwoLayers(mechanism, 2.0)  # type: ignore[arg-type]
    p = np.where(bit == 1, layers.instantaneous.p, layers.instantaneous.q)
    return rng.binomial(present, p).sum(axis=-1)


def _window(
    mechanism: Mechanism,
    memo: str,
    groups: np.ndarray,
    x: np.ndarray,
    bit: np.ndarray,
    participation: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    reps, periods = groups.shape[0], len(participation)
    n = np.zeros((reps, periods), dtype=np.int64)
    counts = np.zeros((reps, periods, 1), dtype=np.int64)
    for t, share in enumerate(participation):
        present = rng.binomial(groups, share)
        n[:, t] = present.sum(axis=-1)
        counts[:, t, 0] = _support(mechanism, memo, present, x, bit, rng)
    return n, counts


def simulate(
    mechanism: Mechanism,
    f: float,
    devices: int,
    scenario: str,
    memo: str,
    participation: np.ndarray,
    reps: int,
    rng: np.random.Generator,
) -> Windows:
    """Two windows of ``len(participation)`` periods each from ``devices`` devices (window B's
    own ``devices`` when ``disjoint``), row v with share ``f`` in window A."""
    if memo == "two-layer" and not isinstance(mechanism, KRR):
        raise ValueError("two layers are krr/brr's memoization")
    if scenario == "disjoint":
        first = simulate(mechanism, f, devices, "same", memo, participation, reps, rng)
        second = simulate(mechanism, f, devices, "same", memo, participation, reps, rng)
        return Windows(first.n_a, first.counts_a, second.n_b, second.counts_b, f, f)
    moves = _moves(scenario, f)
    one, zero = (1.0, 0.0) if memo == "fresh" else _bit_probabilities(mechanism, memo)
    types, probs = [], []
    for (xa, xb), share in moves.items():
        pa = one if xa else zero
        pb = one if xb else zero
        if memo == "fresh":
            patterns = [((0, 0), 1.0)]
        elif xa == xb:  # the same value: the same remembered bit in both windows
            patterns = [((1, 1), pa), ((0, 0), 1 - pa)]
        else:
            patterns = [
                ((ba, bb), (pa if ba else 1 - pa) * (pb if bb else 1 - pb))
                for ba, bb in itertools.product((0, 1), repeat=2)
            ]
        for (ba, bb), weight in patterns:
            types.append((xa, xb, ba, bb))
            probs.append(share * weight)
    table = np.array(types)
    groups = rng.multinomial(devices, np.array(probs) / sum(probs), size=reps)
    n_a, counts_a = _window(mechanism, memo, groups, table[:, 0], table[:, 2], participation, rng)
    n_b, counts_b = _window(mechanism, memo, groups, table[:, 1], table[:, 3], participation, rng)
    truth_b = sum(share for (_, xb), share in moves.items() if xb)
    return Windows(n_a, counts_a, n_b, counts_b, f, truth_b)
