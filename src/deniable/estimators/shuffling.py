"""The shuffle accountant: the central (eps, delta) of n eps0-LDP reports shuffled together.

A shuffler that strips who sent each report and releases them as a batch in a random order
makes each report hide among the others: against an analyst who sees only the batch, the
reports of one device are (eps, delta)-DP with eps far below the local eps0 (shared STATS.md
section 12). Which bound is valid depends on the randomizer, and the choice comes from the
mechanism's own object (:attr:`~deniable.client.mechanisms.Mechanism.pointwise_split`):

- ``brr`` (and ``krr`` with k = 2): the strong-clone bound (Feldman, McMillan, Talwar, SODA
  2023, valid for RR after its erratum): every other device's report is, with probability
  2/(e0 + 1), a clone (0 or 1 with probability 1/2 each). Bound name ``strong-clone``.
- ``krr`` with k > 2: the pair-clone bound (docs/STATS.md "Shuffle amplification", shared
  STATS.md section 13). The analyst is told whether the target's report fell in the pair
  {x0, x1} of values in question: outside it (probability (k - 2)q, q = 1/(e0 + k - 1)) the two
  batches are alike; inside it the report is x0 with odds e0 : 1 and every other device's
  report is a clone with probability 2q. So delta(eps) <= (p + q) * delta_pair(eps), p + q =
  (e0 + 1)/(e0 + k - 1). Bound name ``krr-pair-clone``; where FMT21's bound (valid for krr too)
  is lower, the guarantee is FMT21's. (An earlier version merged "outside the pair with t
  clones" with "inside with t - 1"; the analyst sees the other reports and tells them apart,
  and its figures were below the exact value: 3.823 where one pair of batches needs 3.99996 at
  k 3, eps0 4, n 100.)
- every other randomizer (``oue``, ``olh``, ``pem``, ``duchi``, ``pm``, ``hybrid``): FMT21's
  numerical bound (Feldman, McMillan, Talwar, "Hiding Among the Clones", FOCS 2021), valid for
  every eps0-LDP randomizer: clones with probability e^-eps0. Bound name ``fmt21-numerical``.

All three share one computation (:class:`_PairModel`): given C clones, the count A of reports
on x0 among the C + 1 is Bin(C, 1/2) plus the target's contribution, so the two neighbouring
batches give two mixtures of binomials whose likelihood ratio is monotone in A; delta(eps) is
their hockey-stick divergence, summed over C ~ Bin(n - 1, clone probability) but for
:data:`TAIL_MASS` at each end (that mass charged in full), times the probability that the
target's report is in the pair (1 but for k-RR with k > 2); eps is bisected on a fixed grid.
Adding a device adds a clone with some probability, which the analyst could simulate, so
delta, and eps, never grow with n.

Apple's ml-shuffling-amplification code (its current version, of September 2021) computes
the same divergence per C but visits C from its expected value outward (the first group
holding two counts, charged at the larger of their divergences, where its ``deltaqadd``
defect would otherwise ignore the lower one) and stops as soon as the mass not yet visited
is below the delta so far, charging that mass in full. ``fmt21_numerical_epsilon(...,
apple_stop=True)`` follows that rule and reproduces STATS.md section 12's FMT21num column to
every printed digit (eps0 4, n 1e5, delta 1e-6: 0.1770). (Its first version, of April 2021,
visited C from n/2 outward, which gives 0.1767 there.) The rule over-charges by up to the
delta itself and makes eps grow with n at places (eps0 0.05: n 35 -> 36), so the guarantee
is the full sum (0.1698 there): the same bound, tighter, and monotone.

When a bound is no better than eps0 the guarantee is eps0 with bound ``none``. The exact lower
bound (:func:`lower_bound_epsilon`: shuffled binary RR, every other device at 0) and FMT21's
closed form are here for tests and comparison tables only, never as a guarantee; the exact
checks of every published bound are in tests/estimators/test_shuffle_exact.py.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

from deniable.client.errors import InvalidInput
from deniable.client.guarantees import ApproxDP, PureDP
from deniable.client.mechanisms import Mechanism
from deniable.client.spec import Randomizer

from .shufflelimits import DEFAULT_DELTA, Bound, CentralGuarantee, check_batch

__all__ = [
    "amplify",
    "central_guarantee",
    "fmt21_closed_form_epsilon",
    "fmt21_numerical_epsilon",
    "krr_epsilon",
    "lower_bound_epsilon",
    "strong_clone_epsilon",
]

TAIL_MASS = 1e-20
"""The binomial mass left out at each end of a sum (a 1e-8 part of
:data:`.shufflelimits.MIN_DELTA`), charged as if every outcome there were distinguishing."""

BISECTIONS = 34
"""Halvings of [0, eps0]: eps to eps0 * 2^-34 (below 1e-9 relative), always rounded up; the
same grid for every n and delta, so eps is non-increasing in both exactly as delta(eps) is."""

NO_GAIN = 1e-4
"""A bound within this fraction of eps0 is reported as eps0, bound ``none`` (still valid, and
what a reader sees at four digits: at eps0 8 and n = 2 the bound is 7.999999)."""


def _window(m: int, p: float) -> tuple[np.ndarray, float]:
    """The values of Bin(m, p) but for :data:`TAIL_MASS` at each end, and the mass left out."""
    low = int(stats.binom.ppf(TAIL_MASS, m, p))
    high = m - int(stats.binom.ppf(TAIL_MASS, m, 1.0 - p))  # isf is m for masses this small
    low, high = max(0, min(low, m)), max(0, min(high, m))
    outside = float(stats.binom.cdf(low - 1, m, p) + stats.binom.sf(high, m, p))
    return np.arange(low, high + 1, dtype=np.float64), outside


def _apple_groups(c: np.ndarray, n: int, clone: float) -> tuple[np.ndarray, np.ndarray]:
    """The clone counts ``c`` in the order Apple's ``deltacomp`` (its current version, step 1)
    visits them, and each one's group: from ce = ceil((n - 1) * clone), the expected count,
    outward; ce and ce + 1 form the first group (charged together at the larger of their two
    divergences), then ce - 1, ce + 2, ce - 2, ... one at a time."""
    ce = math.ceil((n - 1) * clone)
    position = np.where(c >= ce + 1, 2 * (c - ce) - 1, 2 * (ce - c))
    position = np.where(c == ce, 0, position)
    order = np.argsort(position, kind="stable")
    _, group = np.unique(np.maximum(position[order] - 1, 0), return_inverse=True)
    return order, group  # ce and ce + 1 share group 0; groups numbered 0, 1, ... in order


class _PairModel:
    """The two neighbouring batches reduced to the count on x0 among the C clones and the
    target: clones C ~ Bin(n - 1, ``clone``); the target's report is on x0 (under the first
    batch) with probability e0/(e0 + 1). Its weights depend on eps0 and n only, so one model
    serves every bisection step."""

    def __init__(self, n: int, eps0: float, clone: float, apple_stop: bool):
        self.apple_stop = apple_stop
        c, outside = _window(n - 1, clone)
        groups = np.arange(len(c))
        if apple_stop:
            order, groups = _apple_groups(c, n, clone)
            c = c[order]
        self.c = c
        self.groups = groups
        self.weight = stats.binom.pmf(c, n - 1, clone)
        odds = 1.0 / (1.0 + math.exp(-eps0))  # e0/(e0+1)
        self.heavy = np.full_like(c, odds)  # P(a) = heavy B_c(a - 1) + (1 - heavy) B_c(a); Q swaps
        self.leftover = outside

    def delta(self, eps: float) -> float:
        """The hockey-stick divergence of the two batches at ``eps`` (both ways alike, by the
        symmetry a -> c + 1 - a), plus the mass outside the window."""
        ee = math.exp(eps)
        heavy, light = self.heavy, 1.0 - self.heavy
        spread = heavy - ee * light
        ok = spread > 0
        tau = np.where(ok, (ee * heavy - light) / np.where(ok, spread, 1.0), 0.0)
        first = np.floor(tau * (self.c + 1) / (1 + tau)) + 1  # the least a with P(a) > e^eps Q(a)
        above = stats.binom.sf(first - 1, self.c, 0.5)  # P[B_c >= first]
        above_prev = above + stats.binom.pmf(first - 1, self.c, 0.5)  # P[B_c >= first - 1]
        gap = heavy * above_prev + light * above - ee * (light * above_prev + heavy * above)
        divergence = np.where(ok, np.maximum(gap, 0.0), 0.0)
        if not self.apple_stop:
            return float((self.weight * divergence).sum()) + self.leftover
        size = int(self.groups[-1]) + 1
        mass = np.bincount(self.groups, weights=self.weight, minlength=size)
        worst = np.full(size, -np.inf)
        np.maximum.at(worst, self.groups, divergence)
        spent = np.concatenate([[0.0], np.cumsum(mass * worst)])
        covered = np.concatenate([[0.0], np.cumsum(mass)])
        stop = np.flatnonzero(1.0 - covered[:-1] < spent[:-1])
        if stop.size:
            return float(spent[stop[0]] + 1.0 - covered[stop[0]])
        return float(spent[-1]) + self.leftover


def _bisect(delta_at, delta: float, eps0: float) -> float:
    """The least eps in [0, eps0] (to :data:`BISECTIONS` halvings, rounded up) with
    ``delta_at(eps) <= delta``; ``delta_at`` is non-increasing in eps and 0 at eps0."""
    low, high = 0.0, eps0
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        if delta_at(middle) <= delta:
            high = middle
        else:
            low = middle
    return high


def _check(eps0: float, n: int, delta: float) -> None:
    """Refuse arguments the accountant does not answer for."""
    check_batch(n, delta)
    if not (math.isfinite(eps0) and eps0 > 0):
        raise InvalidInput("the local epsilon must be a positive number")


@lru_cache(maxsize=4096)
def _pair_epsilon(
    eps0: float, n: int, delta: float, clone: float, inside: float, apple_stop: bool
) -> float:
    """eps of the pair model whose target report is in the pair with probability ``inside``
    (outside it the two batches are alike), cached: an account asks the same batches again
    and again."""
    if n == 1:
        return eps0
    model = _PairModel(n, eps0, clone, apple_stop)
    return _bisect(lambda eps: inside * model.delta(eps), delta, eps0)


def strong_clone_epsilon(eps0: float, n: int, delta: float = DEFAULT_DELTA) -> float:
    """The strong-clone bound for binary (and k-ary) randomized response: clones with
    probability 2/(e0 + 1). Valid only where the pointwise split holds (RR)."""
    _check(eps0, n, delta)
    return _pair_epsilon(eps0, n, delta, 2.0 / (math.exp(eps0) + 1.0), 1.0, False)


def krr_epsilon(eps0: float, k: int, n: int, delta: float = DEFAULT_DELTA) -> float:
    """The pair-clone bound for k-ary RR with k categories: the analyst told whether the
    target's report is in the pair (probability p + q = (e0 + 1)/(e0 + k - 1)), inside it the
    strong-clone divergence with clones of probability 2q = 2/(e0 + k - 1); k = 2 is
    :func:`strong_clone_epsilon`."""
    _check(eps0, n, delta)
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise InvalidInput("k must be a whole number of at least 2")
    if k == 2:
        return strong_clone_epsilon(eps0, n, delta)
    q = 1.0 / (math.exp(eps0) + k - 1)
    return _pair_epsilon(eps0, n, delta, 2.0 * q, (math.exp(eps0) + 1.0) * q, False)


def fmt21_numerical_epsilon(
    eps0: float, n: int, delta: float = DEFAULT_DELTA, *, apple_stop: bool = False
) -> float:
    """FMT21's numerical bound, valid for any eps0-LDP randomizer: clones with probability
    e^-eps0, the divergence summed in full (``apple_stop``: with Apple's stopping rule, to
    reproduce its figures; looser, and not monotone in n)."""
    _check(eps0, n, delta)
    return _pair_epsilon(eps0, n, delta, math.exp(-eps0), 1.0, apple_stop)


def fmt21_closed_form_epsilon(eps0: float, n: int, delta: float = DEFAULT_DELTA) -> float | None:
    """FMT21's closed form (Theorem 3.1 as Apple's code states it), or None where it is not
    valid (eps0 above log(n / (16 log(4/delta)))). For comparison tables only."""
    _check(eps0, n, delta)
    if n < 2 or eps0 > math.log(n / (16 * math.log(4 / delta))):
        return None
    a = 8 * math.sqrt(math.exp(eps0) * math.log(4 / delta) / n)
    c = 8 * math.exp(eps0) / n
    shrink = (1 - math.exp(-eps0)) / (1 + math.exp(-eps0 - math.log(1 + a + c)))
    return math.log(1 + shrink * (a + c))


def _lower_bound_delta(n: int, eps0: float, eps: float) -> float:
    """delta(eps) of shuffled binary RR, the target at 1 or 0 and every other device at 0: the
    number of 1s is Bin(n, r) or Bern(1 - r) + Bin(n - 1, r), r = 1/(e0 + 1)."""
    r = 1.0 / (math.exp(eps0) + 1.0)
    ee = math.exp(eps)
    k, outside = _window(n, r)
    without = stats.binom.pmf(k, n, r)
    with_one = (1 - r) * stats.binom.pmf(k - 1, n - 1, r) + r * stats.binom.pmf(k, n - 1, r)
    return outside + float(
        max(
            np.maximum(with_one - ee * without, 0.0).sum(),
            np.maximum(without - ee * with_one, 0.0).sum(),
        )
    )


@lru_cache(maxsize=1024)
def lower_bound_epsilon(eps0: float, n: int, delta: float = DEFAULT_DELTA) -> float:
    """The exact eps of shuffled binary RR with every other device at 0: no valid bound for RR
    can be below it. A test oracle and an ordering check, never a guarantee."""
    _check(eps0, n, delta)
    if n == 1:
        return eps0
    return _bisect(lambda eps: _lower_bound_delta(n, eps0, eps), delta, eps0)


def bound_for(mechanism: Randomizer) -> Bound:
    """The bound computed for ``mechanism``, from its own parameters: strong clone for RR with
    k = 2, the pair-clone bound for k-RR with k > 2 (FMT21's where that is lower: see
    :func:`central_guarantee`), FMT21 numerical for everything else."""
    if isinstance(mechanism, Mechanism) and mechanism.pointwise_split:
        return "strong-clone" if mechanism.k == 2 else "krr-pair-clone"
    return "fmt21-numerical"


def _amplification(
    mechanism: Randomizer | None, eps0: float, n: int, delta: float
) -> tuple[float, Bound]:
    """The central eps of ``n`` reports at ``eps0`` shuffled together and the bound that gives
    it, by the bound valid for ``mechanism`` (``None``: FMT21's, valid for every eps0-LDP
    randomizer). k-RR with k > 2 gets the lower of the pair-clone bound and FMT21's (both valid
    for it; FMT21's is lower at large k, where clones of a pair are rare). A bound no better
    than eps0 gives eps0 and bound ``none``."""
    bound = "fmt21-numerical" if mechanism is None else bound_for(mechanism)
    if bound == "fmt21-numerical" or not isinstance(mechanism, Mechanism):
        eps = fmt21_numerical_epsilon(eps0, n, delta)
    else:
        eps = krr_epsilon(eps0, mechanism.k, n, delta)
    if bound == "krr-pair-clone":
        generic = fmt21_numerical_epsilon(eps0, n, delta)
        if generic < eps:
            eps, bound = generic, "fmt21-numerical"
    if eps >= eps0 * (1 - NO_GAIN):
        return eps0, "none"
    return eps, bound


def amplify(
    local: PureDP,
    n: int,
    delta: float = DEFAULT_DELTA,
    mechanism: Randomizer | None = None,
) -> ApproxDP:
    """Amplification by shuffling: what ``n`` reports, each ``local``-LDP, guarantee once
    shuffled together, against an analyst who sees only the batch: (eps, ``delta``)-DP, eps
    by the bound valid for the randomizer ``mechanism`` (``None``: FMT21's, valid for every
    one), never above the local eps. The local eps is read rounded up (the rounding rule of
    :mod:`deniable.client.guarantees`); an unbounded one is refused."""
    _check(local.epsilon, n, delta)
    eps, _ = _amplification(mechanism, local.epsilon, n, delta)
    return ApproxDP(eps, delta)


def central_guarantee(
    mechanism: Randomizer,
    n: int,
    delta: float = DEFAULT_DELTA,
    local_epsilon: float | None = None,
) -> CentralGuarantee:
    """The central (eps, delta) of a batch of ``n`` reports of ``mechanism`` shuffled together,
    by the bound valid for it (:func:`amplify`), with the bound's name; the local guarantee
    is the mechanism's unless ``local_epsilon`` gives the report's own (a memoized report's
    fresh layer composes to another eps). A bound no better than eps0 gives eps0 and bound
    ``none``."""
    eps0 = mechanism.epsilon if local_epsilon is None else local_epsilon
    _check(eps0, n, delta)
    local = mechanism.guarantee if local_epsilon is None else PureDP(local_epsilon)
    eps, bound = _amplification(mechanism, local.epsilon, n, delta)
    return CentralGuarantee(n, local.epsilon, delta, eps, bound)
