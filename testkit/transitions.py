"""A randomizer's exact output distribution, read off its code rather than restated from formulas.

:func:`explore` runs a function of a ``Randomness`` with scripted draws and walks every branch:
a ``randbelow(m)`` draw is enumerated over all m values, and a ``random()`` draw is split at the
threshold the code compares it with, found by bisection to the last bit. :func:`transition`
applies it to ``randomize``, giving P(payload | x) for every input x; the exact privacy checks
of the mechanisms and the exact moment checks of the estimators both start from it.
:func:`explore_branches` does the same for code that only compares each ``random()`` draw once
with a threshold (``draw < p``, as krr, brr and oue do) without bisecting: the draw itself
answers the comparison, so whole client paths (a Recorder and its Ledger) can be walked.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import struct
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import Any
from unittest import mock

from deniable.client import recorder as recorder_module
from deniable.client.account import DeviceSettings
from deniable.client.ledger import Ledger
from deniable.client.mechanisms import OLH, OLH_PRIME, Mechanism
from deniable.client.recorder import Recorder
from deniable.client.spec import MetricSpec
from deniable.client.stats import Counters

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
        """``n / 8`` little-endian 64-bit words, each a scripted uniform draw f given as the word
        ``floor(f 2^53) 2^11``: what ``random()`` would turn back into f (oue, pem draw so)."""
        assert n % 8 == 0, "a randomizer draws whole 64-bit words"
        words = []
        for _ in range(n // 8):
            self.calls.append(("random", 0))
            words.append(int(float(self._next(0.0)) * 2**53) << 11)
        return struct.pack(f"<{len(words)}Q", *words)


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


class Branching:
    """A Randomness whose draws follow a script of choices and carry their probability.

    ``randbelow(n)`` takes each of its n values with probability 1/n; ``random()`` returns a
    draw whose one comparison ``draw < p`` is true with probability p. ``widths`` records how
    many choices each draw had and ``weight`` the probability of the path taken.
    """

    def __init__(self, script: list[int], cuts: Sequence[int] = ()) -> None:
        self.script = script
        self.cuts = sorted(set(cuts))
        self.widths: list[int] = []
        self.weight = 1.0

    def choose(self, weights: list[float]) -> int:
        """The scripted choice of the next draw (0 past the script), weighing the path."""
        i = len(self.widths)
        choice = self.script[i] if i < len(self.script) else 0
        self.widths.append(len(weights))
        self.weight *= weights[choice]
        return choice

    def random(self) -> _Draw:
        """A uniform draw, answered when compared."""
        return _Draw(self)

    def randbelow(self, n: int) -> int:
        """Each value below ``n`` in turn, with probability 1/n."""
        return self.choose([1.0 / n] * n)

    def token_bytes(self, n: int) -> bytes:
        """``n / 8`` 64-bit words, each one of the intervals the ``cuts`` split [0, 2^64) into
        (given as its lowest word), with the interval's probability: exact for code that
        compares each word with cuts only (``word < cut``, as oue does)."""
        assert n % 8 == 0, "a randomizer draws whole 64-bit words"
        assert self.cuts, "pass the word thresholds the code compares with (word_cuts)"
        bounds = [0, *self.cuts, 2**64]
        weights = [(high - low) / 2**64 for low, high in itertools.pairwise(bounds)]
        words = [bounds[self.choose(weights)] for _ in range(n // 8)]
        return struct.pack(f"<{len(words)}Q", *words)


def word_cuts(mechanism: object) -> tuple[int, ...]:
    """The word thresholds a mechanism that draws 64-bit words compares them with (oue's
    ``word_thresholds``; a set randomizer's oracle's), or none."""
    oracle = getattr(mechanism, "oracle", mechanism)
    return tuple(getattr(oracle, "word_thresholds", ()))


class _Draw:
    """A uniform draw in [0, 1) that answers exactly one comparison ``draw < p``."""

    def __init__(self, rng: Branching) -> None:
        self._rng: Branching | None = rng

    def __lt__(self, threshold: float) -> bool:
        rng, self._rng = self._rng, None
        assert rng is not None, "a draw compared twice cannot be walked by explore_branches"
        p = min(1.0, max(0.0, float(threshold)))
        return rng.choose([p, 1.0 - p]) == 0


def explore_branches(
    run: Callable[[Branching], Any], cuts: Sequence[int] = ()
) -> dict[Hashable, float]:
    """The exact output distribution of ``run``, walking every path of its draws in turn;
    ``cuts`` are the thresholds its drawn 64-bit words are compared with (:func:`word_cuts`)."""
    result: dict[Hashable, float] = defaultdict(float)
    script: list[int] = []
    while True:
        rng = Branching(script, cuts)
        out = _freeze(run(rng))
        if rng.weight > 0:
            result[out] += rng.weight
        script = (script + [0] * len(rng.widths))[: len(rng.widths)]
        while script and script[-1] + 1 >= rng.widths[len(script) - 1]:
            script.pop()
        if not script:
            return dict(result)
        script[-1] += 1


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


def reports_of_history(
    spec: MetricSpec, settings: DeviceSettings, history: Sequence[Any]
) -> dict[Hashable, float]:
    """P(the payloads a fresh device sends | it records ``history`` in one period), exactly.

    A real :class:`~deniable.client.recorder.Recorder` and :class:`~deniable.client.ledger.Ledger`
    with ``settings`` (memoization, its fresh layer) record each value in turn; the memo
    starts empty, as on a new device, and every report is admitted.
    """
    moment = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)

    def run(rng: Branching) -> tuple:
        ledger = Ledger(
            b"enumeration-secret".ljust(32, b"."),
            max_reports_per_period=len(history),
            lifetime_epsilon=None,
        )
        recorder = Recorder(
            ledger,
            Counters(),
            on_unknown=lambda name: None,
            memoize=settings.memoize,
            instantaneous_ratio=settings.instantaneous_ratio,
            max_queue=len(history) + 1,
            clock=lambda: moment,
            randomness=rng,  # type: ignore[arg-type]
        )
        recorder.install([spec])
        for value in history:
            assert recorder.record(spec.name, value)
        return tuple(report[4] for report in recorder.pending)

    with mock.patch.object(recorder_module, "_UUID_BLOCK", 1):  # ids one at a time: faster
        return explore_branches(run, _spec_cuts(spec))


def _spec_cuts(spec: MetricSpec) -> tuple[int, ...]:
    """The word thresholds of a categorical spec's randomizer (none for other kinds)."""
    try:
        return word_cuts(spec.randomizer)
    except (AttributeError, TypeError, ValueError):
        return ()


def max_log_ratio(first: dict[Hashable, float], second: dict[Hashable, float]) -> float:
    """The largest ln P1(y)/P2(y) over outputs y (``inf`` where only the first can occur)."""
    worst = -math.inf
    for output, p in first.items():
        q = second.get(output, 0.0)
        worst = max(worst, math.inf if q == 0.0 else math.log(p / q))
    return worst


def outputs_over_days(
    spec: MetricSpec, settings: DeviceSettings, days: Sequence[Sequence[Any]]
) -> dict[Hashable, float]:
    """P(what a fresh device sends on each day | it records ``days[d]`` on day d), exactly.

    A real Recorder and Ledger with all of ``settings`` (reports per period, memoization and
    its fresh layer, the lifetime cap) record each day's values in turn on a clock that moves
    one UTC day at a time; the output is, per day, the tuple of payloads sent (empty when the
    ledger refused), so whether and how many reports go out is part of it.
    """
    start = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)

    def run(rng: Branching) -> tuple:
        today = [start]
        ledger = Ledger(
            b"enumeration-secret".ljust(32, b"."),
            max_reports_per_period=settings.max_reports_per_period,
            lifetime_epsilon=settings.lifetime_epsilon,
        )
        recorder = Recorder(
            ledger,
            Counters(),
            on_unknown=lambda name: None,
            memoize=settings.memoize,
            instantaneous_ratio=settings.instantaneous_ratio,
            max_queue=sum(len(values) for values in days) + 1,
            clock=lambda: today[0],
            randomness=rng,  # type: ignore[arg-type]
        )
        recorder.install([spec])
        sent = []
        for index, values in enumerate(days):
            today[0] = start + dt.timedelta(days=index)
            for value in values:
                recorder.record(spec.name, value)
            sent.append(tuple(report[4] for report in recorder.pending))
            recorder.pending.clear()
        return tuple(sent)

    with mock.patch.object(recorder_module, "_UUID_BLOCK", 1):
        return explore_branches(run, _spec_cuts(spec))
