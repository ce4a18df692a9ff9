"""The randomizers and the parameters their privacy proofs and estimators need, defined once.

Every mechanism is a frequency oracle in the sense of Wang et al. (USENIX Security 2017):
a report *supports* category v with probability ``p_star`` when the true value is v and
``q_star`` otherwise. The estimators in :mod:`deniable.estimators` read these numbers from
here and never restate them. The wire payloads are part of the contract in DESIGN.md.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import struct
from abc import ABC, abstractmethod
from functools import cache
from itertools import compress
from typing import Any, ClassVar

from .errors import SpecError
from .guarantees import PureDP
from .randomness import Randomness, system_randomness

Payload = int | float | str | dict[str, Any]
"""A report's payload as it travels in JSON: an index, base64 bits, an OLH triple, or a
numeric metric's randomized number, or a text metric's sketch report."""

OLH_PRIME = 2**31 - 1
"""P of the OLH hash H(v) = ((a*v + b) mod P) mod g, part of the wire format."""

MAX_EPSILON = 20.0
"""The largest eps a mechanism accepts, so that every report is really randomized.

The randomizers compare a float draw, a multiple of 2^-53 (client/randomness.py), with a
probability: krr/brr keep the value while ``random() < p`` and oue sets another bit while
``random() < q``. The smaller side of each comparison, krr's 1 - p = (k-1)/(e^eps+k-1) or
oue's q = 1/(e^eps+1), is at least about e^-eps: at 20 about 2e-9 (~2^-29), 24 bits above the
draws' granularity, so the realized probabilities match the nominal ones to a relative 1e-7
and the realized eps is the nominal one to within 1e-7. Near 37, 1 - p rounds to 0 and krr
would report every true value. olh's hash range g = round(e^eps) + 1 also stays below
2^31 - 1. And an eps of 20 already lets a report favour its true value half a billion to one:
no deployment wants more.
"""

MIN_EPSILON = 1e-3
"""The smallest eps a mechanism accepts, so that estimates stay finite and affordable.

The debiasing factor 1/(p* - q*) grows like 2/eps (brr), 4/eps (oue, olh) or k/eps (krr): at
eps = 1e-3 a boolean needs about 4e10 reports for a margin of +-1 point at 95%, already more
than any deployment collects, and below it p* and q* approach each other until they are equal
in floating point and every estimate divides by zero.
"""


def check_epsilon(epsilon: float) -> float:
    """Return eps as a float, or raise :class:`~.errors.SpecError` (a ``ValueError``) naming
    the accepted range."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float):
        raise SpecError("epsilon must be a number")
    epsilon = float(epsilon)
    if not math.isfinite(epsilon) or epsilon <= 0:
        raise SpecError("epsilon must be finite and > 0")
    if epsilon < MIN_EPSILON:
        raise SpecError(
            f"epsilon must be at least {MIN_EPSILON:g}: below it no feasible number of reports"
            " gives a usable estimate"
        )
    if epsilon > MAX_EPSILON:
        raise SpecError(
            f"epsilon must be at most {MAX_EPSILON:g}: above it reports are barely randomized"
        )
    return epsilon


MAX_CATEGORIES = 10_000
"""The most categories a metric may have (oue, olh): the collector keeps k support counts per
period and an estimate reads and debiases all of them, so k bounds every estimate's cost
(about 10 ms per period at k = 10,000). Larger domains want a sketch, not a category list."""

MAX_KRR_CATEGORIES = 2_000
"""krr's cap is lower: its variance grows with k (k - 2 + e^eps over (e^eps - 1)^2), so past
a few thousand categories krr beats oue and olh only at an eps no deployment should use, and
``auto`` never picks it there."""


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise SpecError("k (the number of categories) must be an integer >= 2")
    if k > MAX_CATEGORIES:
        raise SpecError(f"at most {MAX_CATEGORIES:,} categories are supported, got {k:,}")
    return k


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class OracleParameters:
    """What a randomizer whose report supports the true item with probability ``p`` and each
    other item with ``q`` answers alike: the eps-LDP one report guarantees, and the oracle
    parameters p*, q*, V* the estimators use (the frequency oracles, and a text sketch's cells)."""

    epsilon: float
    p: float
    q: float

    @property
    def guarantee(self) -> PureDP:
        """What one report of this randomizer guarantees: eps-LDP."""
        return PureDP(self.epsilon)

    @property
    def p_star(self) -> float:
        """P(report supports v | true value v), the oracle parameter the estimators use."""
        return self.p

    @property
    def q_star(self) -> float:
        """P(report supports v | true value w != v), the oracle parameter the estimators use."""
        return self.q

    @property
    def v_star(self) -> float:
        """The per-report variance constant q*(1-q*)/(p*-q*)^2 (STATS.md, the general oracle)."""
        p, q = self.p_star, self.q_star
        return q * (1 - q) / (p - q) ** 2


class Mechanism(OracleParameters, ABC):
    """A randomizer over the categories 0..k-1 with its oracle parameters p*, q*."""

    name: ClassVar[str]
    max_k: ClassVar[int] = MAX_CATEGORIES
    """The most categories this mechanism accepts."""
    pointwise_split: ClassVar[bool] = False
    """Whether every output's probability under any value is at least (R(x0) + R(x1))/(e^eps + 1)
    for any two values x0, x1: the class of randomizers for which the strong-clone shuffle
    bound holds after its erratum (k-ary and binary RR; not OUE, OLH or sketches). The shuffle
    accountant (``estimators.shuffling``) picks its bound from it."""

    def __init__(self, k: int, epsilon: float) -> None:
        self.k = _check_k(k)
        if self.k > self.max_k:
            raise SpecError(
                f"{self.name} supports at most {self.max_k:,} categories, got {self.k:,}:"
                " use oue or olh"
            )
        self.epsilon = check_epsilon(epsilon)

    p: float
    """p* in each mechanism's own terms: krr's keep probability, oue's bit-v probability 1/2, olh's hash-keep probability."""
    q: float
    """q* in each mechanism's own terms: krr's probability of one other value, oue's other-bit probability, olh's 1/g."""

    def variance(self, frequency: float, n: int) -> float:
        """Exact fixed-population variance of the unbiased estimate of one category's share."""
        p, q = self.p_star, self.q_star
        return (self.v_star + frequency * (1 - p - q) / (p - q)) / n

    def check_value(self, value: int) -> int:
        """Return ``value`` as an index, or raise ``ValueError`` without echoing it."""
        if not _is_int(value) or not 0 <= value < self.k:
            raise ValueError(f"value is not a category index in 0..{self.k - 1}")
        return value

    @abstractmethod
    def randomize(self, value: int, rng: Randomness = system_randomness) -> Payload:
        """Randomize a true category index into a report payload (eps-LDP)."""

    @abstractmethod
    def parse_payload(self, payload: Any) -> Payload:
        """Return the payload in canonical form, or raise ``ValueError`` naming the problem."""

    @abstractmethod
    def supported(self, payload: Payload) -> list[int]:
        """The categories a (valid) payload supports."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k}, epsilon={self.epsilon!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self) and (other.k, other.epsilon) == (self.k, self.epsilon)  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((self.name, self.k, self.epsilon))


class KRR(Mechanism):
    """k-ary randomized response: keep the value w.p. p = e^eps/(e^eps+k-1), else another."""

    name = "krr"
    max_k = MAX_KRR_CATEGORIES
    pointwise_split = True

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon)
        e = math.exp(self.epsilon)
        self.p = e / (e + self.k - 1)
        self.q = 1 / (e + self.k - 1)

    def randomize(self, value: int, rng: Randomness = system_randomness) -> int:
        value = self.check_value(value)
        if rng.random() < self.p:
            return value
        other = rng.randbelow(self.k - 1)
        return other + (other >= value)

    def parse_payload(self, payload: Any) -> int:
        if not _is_int(payload) or not 0 <= payload < self.k:
            raise ValueError(f"payload must be an integer in 0..{self.k - 1}")
        return payload

    def supported(self, payload: Payload) -> list[int]:
        return [int(payload)]  # type: ignore[arg-type]


class BRR(KRR):
    """Warner's binary randomized response: flip the bit w.p. r = 1/(1+e^eps).

    It is k-ary randomized response with k = 2 (the same distribution, a test says so);
    the boolean categories are ``["false", "true"]`` and payload 1 means true.
    """

    name = "brr"

    def __init__(self, k: int = 2, epsilon: float = 1.0) -> None:
        if k != 2:
            raise SpecError("brr is for booleans: k must be 2")
        super().__init__(2, epsilon)

    @property
    def flip_probability(self) -> float:
        """r = 1/(1+e^eps), the probability that the reported bit is not the true one."""
        return self.q

    def check_value(self, value: int) -> int:
        if value is True or value is False:
            return int(value)
        return super().check_value(value)


PLAUSIBLE_TAIL = 1e-9
"""The probability, on each side, that an honest bit-vector report lies outside the range of
set bits the collector accepts (:func:`plausible_set_bits`).

An honest oue or text report sets each of its cells independently: its own cell with
probability p = 1/2, every other with q = 1/(e^eps + 1). A payload far outside that law is
no device's report, only a poisoner's: all ones makes every read of a 1024-cell text metric
count every cell and decode invented strings (issue 38). At 1e-9 per side an honest report
is refused about once in 500 million, and then only that report (a 422 names it, and the
SDK drops only the named reports); a poisoner gets no more than an honest report's bits.
"""


@cache
def plausible_set_bits(
    cells: int, p: float, q: float, tail: float = PLAUSIBLE_TAIL
) -> tuple[int, int]:
    """(low, high): an honest report of ``cells`` bits sets fewer than ``low`` bits with
    probability at most ``tail``, and more than ``high`` with probability at most ``tail``.

    The count is S = B + X with B ~ Bernoulli(p) (its own cell) and X ~ Binomial(cells - 1, q)
    (the others), computed exactly in log space; ``low`` is the largest and ``high`` the
    smallest bound with its tail within ``tail``, so each is as tight as the law allows.
    """
    n = cells - 1
    log_q, log_not_q = math.log(q), math.log1p(-q)
    others = [
        math.exp(
            math.lgamma(n + 1)
            - math.lgamma(j + 1)
            - math.lgamma(n - j + 1)
            + j * log_q
            + (n - j) * log_not_q
        )
        for j in range(n + 1)
    ]
    law = [
        (1 - p) * (others[s] if s <= n else 0.0) + p * (others[s - 1] if s >= 1 else 0.0)
        for s in range(cells + 1)
    ]
    low, below = 0, 0.0
    while below + law[low] <= tail:
        below += law[low]
        low += 1
    high, above = cells, 0.0
    while above + law[high] <= tail:
        above += law[high]
        high -= 1
    return low, high


class BitVectorPayload:
    """What the mechanisms whose payload carries an OUE bit vector share (``oue``, the text
    sketch's rows): how many bits a payload sets, and whether an honest device could have
    sent it."""

    p: float
    q: float
    epsilon: float
    name: ClassVar[str]

    @property
    def vector_cells(self) -> int:
        """The bits of one payload's vector."""
        raise NotImplementedError

    def vector_bytes(self, payload: Any) -> bytes:
        """The raw bit vector of a valid payload."""
        raise NotImplementedError

    @property
    def plausible_set_bits(self) -> tuple[int, int]:
        """The fewest and most set bits an honest report has, but for :data:`PLAUSIBLE_TAIL`."""
        return plausible_set_bits(self.vector_cells, self.p, self.q)

    def implausible(self, payload: Any) -> str | None:
        """None for a valid payload an honest device may send, else why no device sends it."""
        bits = int.from_bytes(self.vector_bytes(payload), "little").bit_count()
        low, high = self.plausible_set_bits
        if low <= bits <= high:
            return None
        return (
            f"payload sets {bits} of {self.vector_cells} bits; an honest {self.name} report at"
            f" eps {self.epsilon:g} sets {low} to {high} (beyond them with probability below"
            f" {PLAUSIBLE_TAIL:g} each side): refused as no device's report"
        )


_OUE_INT_CELLS = 512
"""Up to this k an oue report's bits are summed as one Python integer (fastest for small k);
above it they are set in a byte array (summing wide integers grows with k squared)."""


class OUE(BitVectorPayload, Mechanism):
    """Optimized unary encoding: bit v is 1 w.p. 1/2 if v is the value, else q = 1/(e^eps+1)."""

    name = "oue"

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon)
        self.p = 0.5
        self.q = 1 / (math.exp(self.epsilon) + 1)
        self.n_bytes = (self.k + 7) // 8
        self._below_p = math.ceil(self.p * 2**53) << 11
        self._below_q = math.ceil(self.q * 2**53) << 11
        self._words = struct.Struct(f"<{self.k}Q").unpack
        self._powers = [1 << v for v in range(self.k)] if self.k <= _OUE_INT_CELLS else []

    def __getstate__(self) -> dict[str, Any]:
        """The state to pickle (a process pool's auditor): the word reader is rebuilt."""
        return {key: value for key, value in self.__dict__.items() if key != "_words"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled state, rebuilding the word reader."""
        self.__dict__.update(state)
        self._words = struct.Struct(f"<{self.k}Q").unpack

    def randomize(self, value: int, rng: Randomness = system_randomness) -> str:
        value = self.check_value(value)
        # One 64-bit word w per category, as the text sketch draws them: random() would be
        # (w >> 11) * 2^-53, and (w >> 11) * 2^-53 < x <=> w < ceil(x 2^53) 2^11, so each bit has
        # exactly the probability ``random() < p`` (or ``< q``) gives, from one block of bytes.
        words = self._words(rng.token_bytes(8 * self.k))
        below_q = self._below_q
        chosen = compress(self._powers or range(self.k), [w < below_q for w in words])
        if self._powers:
            vector = sum(chosen)
            bit = 1 << value
            vector = vector | bit if words[value] < self._below_p else vector & ~bit
            return base64.b64encode(vector.to_bytes(self.n_bytes, "little")).decode("ascii")
        bits = bytearray(self.n_bytes)
        for v in chosen:
            bits[v >> 3] |= 1 << (v & 7)
        mask = 1 << (value & 7)
        if words[value] < self._below_p:
            bits[value >> 3] |= mask
        else:
            bits[value >> 3] &= ~mask & 0xFF
        return base64.b64encode(bytes(bits)).decode("ascii")

    @property
    def word_thresholds(self) -> tuple[int, int]:
        """The 64-bit word bounds a drawn word is compared with (q's, then p's): a bit is set
        when its word is below its bound, so its probability is the bound over 2^64."""
        return self._below_q, self._below_p

    def parse_payload(self, payload: Any) -> str:
        if not isinstance(payload, str):
            raise ValueError("payload must be a base64 string")
        try:
            raw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("payload is not valid standard base64") from None
        if len(raw) != self.n_bytes:
            raise ValueError(f"payload must encode exactly {self.n_bytes} bytes for k={self.k}")
        if self.k % 8 and raw[-1] >> (self.k % 8):
            raise ValueError(f"payload sets bits past k={self.k}")
        return base64.b64encode(raw).decode("ascii")

    def supported(self, payload: Payload) -> list[int]:
        raw = base64.b64decode(payload)  # type: ignore[arg-type]
        return [v for v in range(self.k) if (raw[v >> 3] >> (v & 7)) & 1]

    @property
    def vector_cells(self) -> int:
        """k: one bit per category."""
        return self.k

    def vector_bytes(self, payload: Any) -> bytes:
        return base64.b64decode(payload)


class OLH(Mechanism):
    """Optimized local hashing: g-ary randomized response on a Carter-Wegman hash of the value.

    H(v) = ((a*v + b) mod P) mod g with P = 2^31 - 1, a in [1, P-1], b in [0, P-1] and
    g = round(e^eps) + 1. A report supports v when H(v) = y.
    """

    name = "olh"

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon)
        e = math.exp(self.epsilon)
        self.g = round(e) + 1
        self.p = e / (e + self.g - 1)
        self.q = 1 / self.g

    def hash(self, a: int, b: int, value: int) -> int:
        """The wire-format hash H_(a,b)(value)."""
        return ((a * value + b) % OLH_PRIME) % self.g

    def randomize(self, value: int, rng: Randomness = system_randomness) -> dict[str, int]:
        value = self.check_value(value)
        a = 1 + rng.randbelow(OLH_PRIME - 1)
        b = rng.randbelow(OLH_PRIME)
        h = self.hash(a, b, value)
        if rng.random() < self.p:
            y = h
        else:
            other = rng.randbelow(self.g - 1)
            y = other + (other >= h)
        return {"a": a, "b": b, "y": y}

    def parse_payload(self, payload: Any) -> dict[str, int]:
        if not isinstance(payload, dict) or set(payload) != {"a", "b", "y"}:
            raise ValueError('payload must be an object with exactly the keys "a", "b", "y"')
        a, b, y = payload["a"], payload["b"], payload["y"]
        if not all(_is_int(x) for x in (a, b, y)):
            raise ValueError("payload a, b and y must be integers")
        if not 1 <= a < OLH_PRIME:
            raise ValueError("payload a must be in [1, 2^31 - 2]")
        if not 0 <= b < OLH_PRIME:
            raise ValueError("payload b must be in [0, 2^31 - 2]")
        if not 0 <= y < self.g:
            raise ValueError(f"payload y must be in [0, {self.g - 1}]")
        return {"a": a, "b": b, "y": y}

    def supported(self, payload: Payload) -> list[int]:
        a, b, y = payload["a"], payload["b"], payload["y"]  # type: ignore[index]
        return [v for v in range(self.k) if self.hash(a, b, v) == y]


DEFAULT_INSTANTANEOUS_RATIO = 2.0
"""The SDK's default ``instantaneous_ratio``: a memoized report's fresh layer has twice the
metric's eps (a brr metric at eps 1 then keeps a permanent answer at eps 1.41 per value)."""


class TwoLayers:
    """RAPPOR's two layers for a memoized krr or brr metric (Erlingsson, Pihur & Korolova,
    CCS 2014): a permanent answer per true value, then a fresh randomization on every report.

    The permanent answer is k-ary randomized response of the value at ``permanent_epsilon``,
    drawn once and remembered; each report randomizes that answer again with k-ary randomized
    response at ``instantaneous_epsilon`` (= ratio x the metric's eps). Two krr layers compose
    into krr with p* - q* = (p1 - q1)(p2 - q2) (STATS.md section 6, chained GRR), and the
    permanent eps is solved so that the composition is exactly the metric's own mechanism: a
    memoized report has the same distribution as anyone's, so the collector debiases both
    alike and never needs to know which devices memoize. Because every report is randomized
    afresh, a change of value no longer shows for certain: over any two histories of n
    reports the reports differ in probability by at most e^(n x instantaneous_epsilon).
    """

    def __init__(self, mechanism: KRR, ratio: float) -> None:
        k, epsilon = mechanism.k, mechanism.epsilon
        instantaneous = min(ratio * epsilon, MAX_EPSILON)
        if not instantaneous > epsilon:
            raise SpecError(f"eps {epsilon:g} leaves no room for an instantaneous layer")
        self.mechanism = mechanism
        self.ratio = ratio
        self.instantaneous = type(mechanism)(k, instantaneous)
        spread = (mechanism.p - mechanism.q) / (self.instantaneous.p - self.instantaneous.q)
        self.permanent = type(mechanism)(k, math.log((1 + spread * (k - 1)) / (1 - spread)))

    @property
    def permanent_epsilon(self) -> float:
        """eps of the permanent answer: what all reports of one unchanged value reveal."""
        return self.permanent.epsilon

    @property
    def instantaneous_epsilon(self) -> float:
        """eps of the fresh layer each report adds to the permanent answer."""
        return self.instantaneous.epsilon

    @property
    def permanent_guarantee(self) -> PureDP:
        """What the permanent answer guarantees, once for every report of one unchanged value."""
        return self.permanent.guarantee

    @property
    def instantaneous_guarantee(self) -> PureDP:
        """What each report's fresh layer guarantees: ratio x the metric's eps, exactly (the
        declared ratio and eps as the rounding rule reads them), or the largest eps where that
        is clamped to it. n reports of any two histories differ by n times it at most."""
        if self.instantaneous.epsilon == MAX_EPSILON:
            return PureDP(MAX_EPSILON)
        return self.mechanism.guarantee * self.ratio

    @property
    def p_star(self) -> float:
        """P(report supports v | true v) of the two layers: p1 p2 + (1 - p1) q2."""
        p1, p2, q2 = self.permanent.p, self.instantaneous.p, self.instantaneous.q
        return p1 * p2 + (1 - p1) * q2

    @property
    def q_star(self) -> float:
        """P(report supports w | true v != w) of the two layers: q1 p2 + (1 - q1) q2."""
        q1, p2, q2 = self.permanent.q, self.instantaneous.p, self.instantaneous.q
        return q1 * p2 + (1 - q1) * q2

    @property
    def report_epsilon(self) -> float:
        """eps of one report through both layers, ln(p*/q*): the metric's eps."""
        return math.log(self.p_star / self.q_star)

    def permanent_answer(self, value: int, rng: Randomness = system_randomness) -> int:
        """Draw the permanent answer for a true category index (remembered by the caller)."""
        return self.permanent.randomize(value, rng)

    def report(self, permanent: int, rng: Randomness = system_randomness) -> int:
        """A report's payload: the permanent answer randomized afresh."""
        return self.instantaneous.randomize(permanent, rng)


def two_layers(mechanism: Mechanism, ratio: float) -> TwoLayers | None:
    """The two layers a memoized metric of ``mechanism`` uses with ``ratio``, or ``None`` when
    it has none: oue and olh (no two layers keep their report distribution with a bound that
    does not grow with k; docs/privacy.md), and an eps too close to the largest for a
    permanent eps to exist. A metric without layers is reported afresh, not memoized."""
    if not isinstance(mechanism, KRR):
        return None
    try:
        return TwoLayers(mechanism, ratio)
    except (SpecError, ValueError, ZeroDivisionError):
        return None


MECHANISMS: dict[str, type[Mechanism]] = {m.name: m for m in (BRR, KRR, OUE, OLH)}
"""Every concrete mechanism by its wire name."""


def least_variance(k: int, epsilon: float) -> str:
    """The mechanism with the least per-report variance constant V* for (k, eps).

    Booleans (k = 2) get ``brr``; otherwise GRR beats OUE/OLH iff k < 3e^eps + 2.
    """
    epsilon = check_epsilon(epsilon)
    if _check_k(k) == 2:
        return BRR.name
    candidates = []
    for cls in (KRR, OLH, OUE):
        try:
            candidates.append((cls(k, epsilon).v_star, cls.name))
        except ValueError:  # krr refuses k above MAX_KRR_CATEGORIES
            continue
    return min(candidates)[1]


def make_mechanism(name: str, k: int, epsilon: float) -> Mechanism:
    """Build a mechanism by name; ``auto`` resolves to :func:`least_variance`."""
    if name == "auto":
        name = least_variance(k, epsilon)
    try:
        cls = MECHANISMS[name]
    except KeyError:
        raise SpecError(
            f"unknown mechanism {name!r}: choose one of auto, brr, krr, oue, olh"
        ) from None
    return cls(k, epsilon)


NUMERIC_GRID = 2.0**-24
"""The grid every ``pm`` and ``hybrid`` payload is rounded to (a multiple of 2^-24).

A payload computed in floating point as l + (C - 1)u has low bits that depend on l, hence on
the true value (Mironov, CCS 2012). Rounding to a grid fixed in advance makes the set of
possible payloads the same for every input; it is post-processing of the exact draw, so it
keeps eps-LDP, and it moves E[y] by less than 2^-40, far below any estimate's error.
"""

HYBRID_THRESHOLD = 0.6094
"""eps* of the Hybrid Mechanism (STATS.md section 7): at or below it, hybrid is duchi."""


class NumericMechanism(ABC):
    """A randomizer of a number t in [-1, 1] into a payload y with E[y | t] = t (eps-LDP).

    ``bound`` is the largest |y| a report may carry; ``variance(t)`` is Var(y | t), from which
    the estimators and the planner take every figure (STATS.md sections 7 and 10).
    """

    name: ClassVar[str]
    bound: float
    pointwise_split: ClassVar[bool] = False
    """No: a number's mechanism gets the shuffle accountant's generic bound (see Mechanism)."""

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_epsilon(epsilon)

    @property
    def guarantee(self) -> PureDP:
        """What one report of this randomizer guarantees: eps-LDP."""
        return PureDP(self.epsilon)

    @abstractmethod
    def variance(self, t: float) -> float:
        """Var(y | t) of one report."""

    @property
    @abstractmethod
    def worst_case_variance(self) -> float:
        """The largest Var(y | t) over t in [-1, 1]; ``auto`` picks the least."""

    def check_value(self, t: float) -> float:
        """Return t as a float in [-1, 1], or raise ``ValueError`` without echoing it."""
        if isinstance(t, bool) or not isinstance(t, int | float) or not -1.0 <= t <= 1.0:
            raise ValueError("value is not a number in [-1, 1]")
        return float(t)

    @abstractmethod
    def randomize(self, t: float, rng: Randomness = system_randomness) -> float:
        """Randomize a scaled value t in [-1, 1] into the payload y."""

    def parse_payload(self, payload: Any) -> float:
        """Return the payload as a float, or raise ``ValueError`` naming the problem."""
        if isinstance(payload, bool) or not isinstance(payload, int | float):
            raise ValueError("payload must be a number")
        try:
            y = float(payload)
        except OverflowError:  # an int beyond any float
            y = math.inf
        if not math.isfinite(y):
            raise ValueError("payload must be a finite number")
        if abs(y) > self.bound * (1 + 1e-9):
            raise ValueError(f"payload must lie in [-{self.bound:.9g}, {self.bound:.9g}]")
        return y

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.epsilon == self.epsilon  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.name, self.epsilon))


class Duchi(NumericMechanism):
    """Duchi et al.'s one-bit mechanism: y = +-C1, C1 = (e+1)/(e-1), P(+C1) = 1/2 + t/(2 C1)."""

    name = "duchi"

    def __init__(self, epsilon: float) -> None:
        super().__init__(epsilon)
        e = math.exp(self.epsilon)
        self.bound = (e + 1) / (e - 1)

    def plus_probability(self, t: float) -> float:
        """P(y = +C1 | t)."""
        return 0.5 + t / (2 * self.bound)

    def variance(self, t: float) -> float:
        return self.bound**2 - t * t

    @property
    def worst_case_variance(self) -> float:
        return self.bound**2

    def randomize(self, t: float, rng: Randomness = system_randomness) -> float:
        t = self.check_value(t)
        return self.bound if rng.random() < self.plus_probability(t) else -self.bound

    def parse_payload(self, payload: Any) -> float:
        y = super().parse_payload(payload)
        if abs(abs(y) - self.bound) > 1e-9 * self.bound:
            raise ValueError(f"a duchi payload must be +-{self.bound:.9g}")
        return math.copysign(self.bound, y)


class Piecewise(NumericMechanism):
    """Wang et al.'s Piecewise Mechanism (ICDE 2019): y on [-C, C], denser on [l(t), r(t)].

    With s = e^(eps/2): C = (s+1)/(s-1), l = (C+1)t/2 - (C-1)/2, r = l + C - 1; with probability
    s/(s+1) y is uniform on [l, r], otherwise uniform on [-C, l) u (r, C]; then rounded to
    :data:`NUMERIC_GRID`.
    """

    name = "pm"

    def __init__(self, epsilon: float) -> None:
        super().__init__(epsilon)
        self.s = math.exp(self.epsilon / 2)
        self.bound = (self.s + 1) / (self.s - 1)
        self.window_probability = self.s / (self.s + 1)

    def window(self, t: float) -> tuple[float, float]:
        """[l(t), r(t)], the interval of the higher density."""
        left = (self.bound + 1) * t / 2 - (self.bound - 1) / 2
        return left, left + self.bound - 1

    def density(self, y: float, t: float) -> float:
        """The density of the exact (unrounded) draw at y given t."""
        if not -self.bound <= y <= self.bound:
            return 0.0
        left, right = self.window(t)
        high = (math.exp(self.epsilon) - self.s) / (2 * self.s + 2)
        return high if left <= y <= right else high / math.exp(self.epsilon)

    def variance(self, t: float) -> float:
        s = self.s
        return t * t / (s - 1) + (s + 3) / (3 * (s - 1) ** 2)

    @property
    def worst_case_variance(self) -> float:
        return self.variance(1.0)

    def randomize(self, t: float, rng: Randomness = system_randomness) -> float:
        t = self.check_value(t)
        left, right = self.window(t)
        if rng.random() < self.window_probability:
            y = left + (right - left) * rng.random()
        else:
            below = left + self.bound
            u = (self.bound + 1) * rng.random()
            y = -self.bound + u if u < below else right + (u - below)
        return self._on_grid(y)

    def _on_grid(self, y: float) -> float:
        """y rounded to the grid, kept inside [-C, C]."""
        steps = round(y / NUMERIC_GRID)
        limit = math.floor(self.bound / NUMERIC_GRID)
        return max(-limit, min(limit, steps)) * NUMERIC_GRID


class Hybrid(NumericMechanism):
    """Wang et al.'s Hybrid Mechanism: ``pm`` with probability 1 - e^(-eps/2), else ``duchi``
    (only ``duchi`` at eps <= 0.6094); its variance is the same for every t above eps*."""

    name = "hybrid"

    def __init__(self, epsilon: float) -> None:
        super().__init__(epsilon)
        self.duchi = Duchi(self.epsilon)
        self.piecewise = Piecewise(self.epsilon)
        above = self.epsilon > HYBRID_THRESHOLD
        self.pm_probability = 1 - math.exp(-self.epsilon / 2) if above else 0.0
        self.bound = self.piecewise.bound if above else self.duchi.bound

    def variance(self, t: float) -> float:
        beta = self.pm_probability
        mixed_second_moment = (
            beta * (self.piecewise.variance(t) + t * t) + (1 - beta) * self.duchi.bound**2
        )
        return mixed_second_moment - t * t

    @property
    def worst_case_variance(self) -> float:
        return max(self.variance(0.0), self.variance(1.0))

    def randomize(self, t: float, rng: Randomness = system_randomness) -> float:
        t = self.check_value(t)
        if rng.random() < self.pm_probability:
            return self.piecewise.randomize(t, rng)
        return self.duchi.randomize(t, rng)

    def parse_payload(self, payload: Any) -> float:
        if self.pm_probability == 0.0:
            return self.duchi.parse_payload(payload)
        return super().parse_payload(payload)


NUMERIC_MECHANISMS: dict[str, type[NumericMechanism]] = {
    m.name: m for m in (Duchi, Piecewise, Hybrid)
}
"""Every numeric mechanism by its wire name."""


def least_worst_case_variance(epsilon: float) -> str:
    """The numeric mechanism whose worst case over t has the least variance at eps."""
    epsilon = check_epsilon(epsilon)
    return min(
        NUMERIC_MECHANISMS, key=lambda name: NUMERIC_MECHANISMS[name](epsilon).worst_case_variance
    )


def make_numeric_mechanism(name: str, epsilon: float) -> NumericMechanism:
    """Build a numeric mechanism by name; ``auto`` resolves to :func:`least_worst_case_variance`."""
    if name == "auto":
        name = least_worst_case_variance(epsilon)
    try:
        cls = NUMERIC_MECHANISMS[name]
    except KeyError:
        raise SpecError(
            f"unknown numeric mechanism {name!r}: choose one of auto, duchi, pm, hybrid"
        ) from None
    return cls(epsilon)


TEXT_MAX_LENGTH = 64
"""The longest ``max_length`` a text metric may have, in UTF-8 bytes (STATS.md section 11:
past it the detection floor at any realistic n is above every share worth finding)."""

TEXT_SEGMENT_BYTES = 1
"""How many bytes each prefix level adds (PEM's step): a level-l report carries the first
l x 1 bytes of the padded string, and the decoder extends survivors by 256 bytes per round."""

TEXT_CELLS = 1024
"""m, the cells of one sketch row: the OUE one-hot vector a report randomizes (128 bytes)."""

TEXT_ROWS = 16
"""R, the sketch rows per level; a report uses one row, drawn afresh. R x m = 16,384 keeps
collisions with any string below the detection floor under a tenth of the noise (STATS.md
section 11's rule, R m >= 10 (f/sigma0)^2, with f <= T95 once the decoder has subtracted the
survivors' own collisions; docs/STATS.md "Heavy hitters")."""

TEXT_TERMINATOR = 0
"""The byte that ends a string shorter than ``max_length`` and pads it (so a value may not
hold U+0000)."""


@cache
def _text_hash_coefficients() -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """The sketch hash's public coefficients a[r][i] in [1, P-1] and b[r] in [0, P-1], from
    SHA-256 (part of the wire format: every SDK and collector derives the same ones)."""

    def draw(label: str, modulus: int) -> int:
        digest = hashlib.sha256(f"deniable.text.v1|{label}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % modulus

    a = tuple(
        tuple(1 + draw(f"a|{r}|{i}", OLH_PRIME - 1) for i in range(TEXT_MAX_LENGTH))
        for r in range(TEXT_ROWS)
    )
    b = tuple(draw(f"b|{r}", OLH_PRIME) for r in range(TEXT_ROWS))
    return a, b


class PrefixSketch(OracleParameters, BitVectorPayload):
    """``pem``: PEM prefix extension (Wang, Li & Jha, IEEE TDSC 2021) through OUE inside a sketch.

    A device's string is UTF-8, cut to ``max_length`` bytes at a character boundary and padded
    with :data:`TEXT_TERMINATOR` to exactly ``max_length`` bytes. The device is pinned to one
    prefix level l in 1..g for the metric's lifetime (never redrawn: a new level each period
    would reveal a new prefix). Each report draws a row r uniformly from the CSPRNG, hashes
    the level-l prefix to the cell h_r(prefix) in 0..m-1 and randomizes that one-hot vector by
    OUE: the cell's bit is 1 with probability p = 1/2, every other bit with q = 1/(e^eps + 1).
    The payload is ``{"b": base64 of m/8 bytes, "l": level, "r": row}``; a report supports
    the cells whose bits are set, and the per-(level, row, cell) sums are plain counts. So p* is
    P(a report's bit at its prefix's cell is set), q* P(a bit at any other cell is set), and V*
    the variance constant at f -> 0 (:meth:`variance_constant` at any f). One report is eps-LDP
    whatever the string and its pinned level (the level is drawn independently of the value).

    The hash: h_r(x_0..x_{l-1}) = ((b_r + sum_i a_{r,i} x_i) mod P) mod m, P = 2^31 - 1, with
    the public coefficients of :func:`_text_hash_coefficients` (pairwise independent over
    the prefixes of one length). Every intermediate stays below 2^45: int64 arrays hold it.
    """

    name: ClassVar[str] = "pem"
    pointwise_split: ClassVar[bool] = False
    """No: OUE inside a sketch gets the shuffle accountant's generic bound (see Mechanism)."""
    cells: ClassVar[int] = TEXT_CELLS
    rows: ClassVar[int] = TEXT_ROWS

    def __init__(self, max_length: int, epsilon: float) -> None:
        if not _is_int(max_length) or not 1 <= max_length <= TEXT_MAX_LENGTH:
            raise SpecError(f"max_length must be an integer in 1..{TEXT_MAX_LENGTH} (UTF-8 bytes)")
        self.max_length = max_length
        self.epsilon = check_epsilon(epsilon)
        self.levels = -(-max_length // TEXT_SEGMENT_BYTES)
        self.p = 0.5
        self.q = 1 / (math.exp(self.epsilon) + 1)
        self.n_bytes = self.cells // 8
        self._below_p = math.ceil(self.p * 2**53) << 11
        self._below_q = math.ceil(self.q * 2**53) << 11
        self._words = struct.Struct(f"<{self.cells}Q").unpack

    def variance_constant(self, share: float) -> float:
        """V*(f) = ((1-f) q(1-q) + f p(1-p)) / (p-q)^2: one report's variance at share f."""
        p, q = self.p, self.q
        return ((1 - share) * q * (1 - q) + share * p * (1 - p)) / (p - q) ** 2

    @property
    def cell_count(self) -> int:
        """The counts a period keeps: g x R x m cell sums, then g x R report tallies."""
        return self.levels * self.rows * self.cells + self.levels * self.rows

    def cell_index(self, level: int, row: int, cell: int) -> int:
        """The flat count index of (level 1..g, row, cell)."""
        return ((level - 1) * self.rows + row) * self.cells + cell

    def tally_index(self, level: int, row: int) -> int:
        """The flat count index that counts the reports of (level, row)."""
        return self.levels * self.rows * self.cells + (level - 1) * self.rows + row

    def prefix_length(self, level: int) -> int:
        """The bytes a level-``level`` prefix holds."""
        return min(level * TEXT_SEGMENT_BYTES, self.max_length)

    def encode(self, value: Any) -> bytes:
        """The padded bytes of a string; ``ValueError`` (never echoing it) for a non-string or
        one holding U+0000."""
        if not isinstance(value, str):
            raise ValueError("value is not a string")
        if "\x00" in value:
            raise ValueError("value holds U+0000, the terminator")
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("value is not encodable as UTF-8 (a lone surrogate)") from None
        if len(raw) > self.max_length:
            raw = raw[: self.max_length].decode("utf-8", "ignore").encode("utf-8")
        return raw + bytes(self.max_length - len(raw))

    def cell(self, row: int, prefix: bytes) -> int:
        """h_row(prefix), the wire-format hash of a prefix to a cell."""
        a, b = _text_hash_coefficients()
        coefficients = a[row]
        total = b[row] + sum(coefficients[i] * x for i, x in enumerate(prefix))
        return (total % OLH_PRIME) % self.cells

    def randomize(
        self, padded: bytes, level: int, rng: Randomness = system_randomness
    ) -> dict[str, Any]:
        """A report of the padded string at the device's pinned ``level`` (eps-LDP)."""
        if not 1 <= level <= self.levels or len(padded) != self.max_length:
            raise ValueError("not a padded string and level of this metric")
        row = rng.randbelow(self.rows)
        target = self.cell(row, padded[: self.prefix_length(level)])
        bits = bytearray(self.n_bytes)
        # One 64-bit word w per cell; random() is (w >> 11) * 2^-53, and (w >> 11) * 2^-53 < x
        # <=> w < ceil(x 2^53) 2^11, so each bit has exactly the probability ``random() < p``
        # (or ``< q``) gives, from one block of random bytes: several times faster.
        words = self._words(rng.token_bytes(8 * self.cells))
        below_q = self._below_q
        for v in [v for v, w in enumerate(words) if w < below_q]:
            bits[v >> 3] |= 1 << (v & 7)
        mask = 1 << (target & 7)
        if words[target] < self._below_p:
            bits[target >> 3] |= mask
        else:
            bits[target >> 3] &= ~mask & 0xFF
        return {"b": base64.b64encode(bytes(bits)).decode("ascii"), "l": level, "r": row}

    def parse_payload(self, payload: Any) -> dict[str, Any]:
        """The payload in canonical form, or ``ValueError`` naming the problem."""
        if not isinstance(payload, dict) or set(payload) != {"b", "l", "r"}:
            raise ValueError('payload must be an object with exactly the keys "b", "l", "r"')
        level, row, bits = payload["l"], payload["r"], payload["b"]
        if not _is_int(level) or not 1 <= level <= self.levels:
            raise ValueError(f"payload l (the prefix level) must be an integer in 1..{self.levels}")
        if not _is_int(row) or not 0 <= row < self.rows:
            raise ValueError(f"payload r (the sketch row) must be an integer in 0..{self.rows - 1}")
        if not isinstance(bits, str):
            raise ValueError("payload b must be a base64 string")
        try:
            raw = base64.b64decode(bits, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("payload b is not valid standard base64") from None
        if len(raw) != self.n_bytes:
            raise ValueError(
                f"payload b must encode exactly {self.n_bytes} bytes ({self.cells} cells)"
            )
        return {"b": base64.b64encode(raw).decode("ascii"), "l": level, "r": row}

    @property
    def vector_cells(self) -> int:
        """m: one bit per cell of the report's row."""
        return self.cells

    def vector_bytes(self, payload: Any) -> bytes:
        return base64.b64decode(payload["b"])

    def supported(self, payload: dict[str, Any]) -> list[int]:
        """The flat count indexes a (valid) payload adds one to: its set cells and its tally."""
        raw = base64.b64decode(payload["b"])
        level, row = payload["l"], payload["r"]
        cells = [v for v in range(self.cells) if raw[v >> 3] >> (v & 7) & 1]
        return [self.cell_index(level, row, v) for v in cells] + [self.tally_index(level, row)]

    def __repr__(self) -> str:
        return f"PrefixSketch(max_length={self.max_length}, epsilon={self.epsilon!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PrefixSketch) and (other.max_length, other.epsilon) == (
            self.max_length,
            self.epsilon,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.max_length, self.epsilon))


TEXT_MECHANISMS: dict[str, type[PrefixSketch]] = {PrefixSketch.name: PrefixSketch}
"""Every text mechanism by its wire name (``auto`` resolves to ``pem``)."""


def make_text_mechanism(name: str, max_length: int, epsilon: float) -> PrefixSketch:
    """Build a text mechanism by name; ``auto`` is ``pem``."""
    if name == "auto":
        name = PrefixSketch.name
    try:
        cls = TEXT_MECHANISMS[name]
    except KeyError:
        raise SpecError(f"unknown text mechanism {name!r}: choose auto or pem") from None
    return cls(max_length, epsilon)


MAX_SET_ITEMS = 64
"""The largest declared maximum set size L of a ``set`` metric. The variance of every share
grows like L^2 (STATS.md section 16), so at L = 64 a share needs about 4,096 times the reports
a categorical share needs for the same margin: a deployment wanting more should list fewer
categories per metric."""


class PaddingSampling:
    """``ps``: padding-and-sampling (Wang, Li & Jha, "Locally differentially private frequent
    itemset mining", IEEE S&P 2018) of a subset of k categories through a frequency oracle
    over k + L items.

    A device holding the set S of category indices (0..k-1) pads it with the dummy items
    k, k+1, .., k+L-|S|-1 to exactly L items when |S| < L, draws one of the padded items
    uniformly (one of S when |S| >= L: sampling S down to L items first and then one of those
    is the same draw), and reports that one item through ``oracle`` (krr, oue or olh over
    k + L items) with the metric's whole eps. The report is a function of one item passed
    through an eps-LDP randomizer, so any two sets give output laws within e^eps (STATS.md
    section 16); a sampled dummy is reported like any other index. The payload is the
    oracle's, the counts are the oracle's k + L support counts, and a category's share of
    devices is L times its debiased frequency.
    """

    name: ClassVar[str] = "ps"
    pointwise_split: ClassVar[bool] = False
    """No: a set's report gets the shuffle accountant's generic bound (see Mechanism)."""

    def __init__(self, k: int, max_items: int, epsilon: float, oracle: str = "auto") -> None:
        """Check k and L and build the oracle over k + L items (``auto``: least variance)."""
        _check_k(k)
        if not _is_int(max_items) or not 1 <= max_items <= MAX_SET_ITEMS:
            raise SpecError(f"max_items must be an integer in 1..{MAX_SET_ITEMS}")
        if k + max_items > MAX_CATEGORIES:
            raise SpecError(
                f"categories plus max_items must be at most {MAX_CATEGORIES:,},"
                f" got {k + max_items:,}"
            )
        if oracle == BRR.name:
            raise SpecError("a set's oracle is krr, oue or olh over k + max_items items")
        self.k = k
        self.max_items = max_items
        self.oracle = make_mechanism(oracle, k + max_items, epsilon)
        self.epsilon = self.oracle.epsilon

    @property
    def guarantee(self) -> PureDP:
        """What one report guarantees for the whole set: the oracle's eps-LDP (one item of the
        padded set goes through it; STATS.md section 16)."""
        return self.oracle.guarantee

    @property
    def width(self) -> int:
        """k + L: the oracle's items (the categories, then the L dummies), one count each."""
        return self.oracle.k

    @property
    def p_star(self) -> float:
        """The oracle's p* over the k + L items."""
        return self.oracle.p_star

    @property
    def q_star(self) -> float:
        """The oracle's q* over the k + L items."""
        return self.oracle.q_star

    def check_value(self, items: Any) -> tuple[int, ...]:
        """The set as sorted distinct category indices, or ``ValueError`` without echoing it.

        A set, frozenset, list or tuple of indices in 0..k-1 is accepted (repeats count once);
        a string, a mapping or anything else is refused.
        """
        if not isinstance(items, set | frozenset | list | tuple):
            raise ValueError("value is not a set of category indices")
        if not all(_is_int(v) and 0 <= v < self.k for v in items):
            raise ValueError(
                f"value holds something other than category indices in 0..{self.k - 1}"
            )
        return tuple(sorted(set(items)))

    def sample(self, items: tuple[int, ...], rng: Randomness = system_randomness) -> int:
        """One item of the padded set, drawn uniformly: a category of ``items`` or a dummy
        k + j. ``items`` must be sorted distinct indices (:meth:`check_value`)."""
        draw = rng.randbelow(max(len(items), self.max_items))
        return items[draw] if draw < len(items) else self.k + draw - len(items)

    def sample_law(self, items: tuple[int, ...]) -> dict[int, float]:
        """P(:meth:`sample` returns item j | items) for every item it can return."""
        size = max(len(items), self.max_items)
        padded = list(items) + [self.k + j for j in range(size - len(items))]
        return dict.fromkeys(padded, 1.0 / size)

    def randomize(self, items: Any, rng: Randomness = system_randomness) -> Payload:
        """Pad, sample one item and report it through the oracle (eps-LDP for the whole set)."""
        return self.oracle.randomize(self.sample(self.check_value(items), rng), rng)

    def parse_payload(self, payload: Any) -> Payload:
        """The oracle's payload in canonical form, or ``ValueError`` naming the problem."""
        return self.oracle.parse_payload(payload)

    def supported(self, payload: Payload) -> list[int]:
        """The items (categories 0..k-1, dummies k..k+L-1) a valid payload supports."""
        return self.oracle.supported(payload)

    def implausible(self, payload: Any) -> str | None:
        """None for a payload an honest device may send (the oracle's rule for oue), else why not."""
        if isinstance(self.oracle, OUE):
            return self.oracle.implausible(payload)
        return None

    def __repr__(self) -> str:
        """``PaddingSampling(k=.., max_items=.., epsilon=.., oracle=..)``."""
        return (
            f"PaddingSampling(k={self.k}, max_items={self.max_items},"
            f" epsilon={self.epsilon!r}, oracle={self.oracle.name!r})"
        )

    def __eq__(self, other: object) -> bool:
        """Equal when k, L and the oracle are."""
        return isinstance(other, PaddingSampling) and (
            other.k,
            other.max_items,
            other.oracle,
        ) == (self.k, self.max_items, self.oracle)

    def __hash__(self) -> int:
        """The hash of what :meth:`__eq__` compares."""
        return hash((self.name, self.k, self.max_items, self.oracle))


def make_set_mechanism(
    k: int, max_items: int, epsilon: float, oracle: str = "auto"
) -> PaddingSampling:
    """Build a set metric's randomizer; ``auto`` picks the oracle of least variance over k + L
    items (:func:`least_variance`; the share's variance is L^2 times the oracle's)."""
    return PaddingSampling(k, max_items, epsilon, oracle)
