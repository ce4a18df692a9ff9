"""A randomizer's exact output distribution, read off its code rather than restated from formulas.

:func:`explore` runs a function of a ``Randomness`` with scripted draws and walks every branch:
a ``randbelow(m)`` draw is enumerated over all m values, and a ``random()`` draw is split at the
threshold the code compares it with, found by bisection to the last bit. :func:`transition`
applies it to ``randomize``, giving P(payload | x) for every input x; the exact privacy checks
of the mechanisms and the exact moment checks of the estimators both start from it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Any

from deniable.client.mechanisms import OLH, OLH_PRIME, Mechanism

_TOP = 1.0 - 2.0**-53
"""The largest float ``random()`` can return."""


class Scripted:
    """A Randomness that replays a script of draws (then answers 0) and records every call."""

    def __init__(self, script: list[float | int]) -> None:
        """Replay ``script``, one entry per draw in order."""
        self.script = script
        self.calls: list[tuple[str, int]] = []

    def _next(self, default: float | int) -> float | int:
        """The scripted value of the draw just recorded, or ``default`` past the script."""
        i = len(self.calls) - 1
        return self.script[i] if i < len(self.script) else default

    def random(self) -> float:
        """The next scripted uniform draw."""
        self.calls.append(("random", 0))
        return float(self._next(0.0))

    def randbelow(self, n: int) -> int:
        """The next scripted integer draw below ``n``."""
        self.calls.append(("randbelow", n))
        return int(self._next(0))

    def token_bytes(self, n: int) -> bytes:
        """Refused: a randomizer draws no raw bytes."""
        raise AssertionError("randomizers are not expected to draw raw bytes")


def _freeze(payload: Any) -> Hashable:
    """A payload as a dictionary key (an OLH payload is a dict)."""
    return tuple(sorted(payload.items())) if isinstance(payload, dict) else payload


def explore(
    run: Callable[[Scripted], Any], fixed: dict[int, int] | None = None
) -> dict[Hashable, float]:
    """The exact output distribution of ``run`` over its draws; ``fixed`` pins some randbelow draws."""
    fixed = fixed or {}

    def signature(script: list[float | int]) -> tuple:
        rng = Scripted(script)
        out = _freeze(run(rng))
        return out, tuple(rng.calls)

    def walk(prefix: list[float | int]) -> dict[Hashable, float]:
        out, calls = signature(prefix)
        if len(calls) == len(prefix):
            return {out: 1.0}
        kind, bound = calls[len(prefix)]
        result: dict[Hashable, float] = defaultdict(float)
        if kind == "randbelow":
            if len(prefix) in fixed:
                branches = [(fixed[len(prefix)], 1.0)]
            else:
                assert bound <= 4096, "too many values to enumerate; pin this draw"
                branches = [(j, 1.0 / bound) for j in range(bound)]
        else:
            low_sig, high_sig = signature([*prefix, 0.0]), signature([*prefix, _TOP])
            if low_sig == high_sig:
                branches = [(0.0, 1.0)]
            else:
                lo, hi = 0.0, _TOP
                while math.nextafter(lo, 1.0) < hi:
                    mid = (lo + hi) / 2
                    if mid in (lo, hi):
                        break
                    if signature([*prefix, mid]) == low_sig:
                        lo = mid
                    else:
                        hi = mid
                branches = [(0.0, hi), (_TOP, 1.0 - hi)]
        for value, weight in branches:
            for key, prob in walk([*prefix, value]).items():
                result[key] += weight * prob
        return dict(result)

    return walk([])


def transition(mechanism: Mechanism, fixed: dict[int, int] | None = None) -> list[dict]:
    """P(payload | x) for every input x, read off ``mechanism.randomize``."""
    return [
        explore(lambda rng, x=x: mechanism.randomize(x, rng), fixed) for x in range(mechanism.k)
    ]


def olh_exact_q(mechanism: OLH) -> float:
    """P(a report on x supports v != x), averaged exactly over the seeds (a, b).

    For a != 0 the map (a, b) -> (a v + b mod P, a x + b mod P) is a bijection onto pairs of
    distinct residues, so P(H(v) = H(x)) = sum_j c_j (c_j - 1) / (P (P - 1)) exactly, with c_j
    the number of residues r < P with r mod g = j.
    """
    g, big = mechanism.g, OLH_PRIME
    sizes = [big // g + (1 if j < big % g else 0) for j in range(g)]
    collide = sum(c * (c - 1) for c in sizes) / (big * (big - 1))
    p = mechanism.p_star
    return collide * p + (1 - collide) * (1 - p) / (g - 1)
