"""Exact central eps of chosen pairs of shuffled batches: the oracle that checks every bound the
shuffle accountant publishes (shared STATS.md section 13), written apart from the accountant.

A published central eps(delta) claims every pair of neighbouring batches; one pair's exact
eps is a lower bound on the truth, so a bound below it is refuted. Each pair here is two
distributions (P, Q) of what the analyst sees (or of a post-processing of it, which can only
lower the eps: still a valid lower bound), as arrays over a finite grid, and

    delta_PQ(eps) = sum over cells of max(0, P - e^eps Q),

checked in both directions. Nothing here imports :mod:`deniable.estimators.shuffling`: the
distributions come from binomial and multinomial masses (scipy.special) and direct
convolution, the eps from a bisection of its own. Masses below :data:`TINY` at the edge of a
binomial are left out; that can only lower a computed delta (by less than n * TINY), never
raise it, so what is computed stays a lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import gammaln, xlogy

TINY = 1e-30
"""Binomial masses below this (relative to the largest) are cropped from a grid."""

Pair = tuple[np.ndarray, np.ndarray]


def hockey_stick(pairs: Sequence[Pair], eps: float) -> float:
    """The largest delta at ``eps`` over the pairs, each in both directions."""
    ee = math.exp(eps)
    worst = 0.0
    for p, q in pairs:
        worst = max(worst, float(np.maximum(p - ee * q, 0.0).sum()))
        worst = max(worst, float(np.maximum(q - ee * p, 0.0).sum()))
    return worst


def epsilon(pairs: Sequence[Pair], delta: float, eps0: float, steps: int = 48) -> float:
    """The least eps in [0, eps0] with :func:`hockey_stick` at most ``delta`` (bisected
    ``steps`` times; the upper end returned, within eps0 * 2^-steps above the truth)."""
    low, high = 0.0, eps0
    for _ in range(steps):
        middle = (low + high) / 2
        if hockey_stick(pairs, middle) <= delta:
            high = middle
        else:
            low = middle
    return high


def _log_binomial(m: int, j: np.ndarray, a: float) -> np.ndarray:
    """log Bin(m, a) at j (0 <= j <= m), with 0 log 0 = 0."""
    return gammaln(m + 1) - gammaln(j + 1) - gammaln(m - j + 1) + xlogy(j, a) + xlogy(m - j, 1 - a)


def binomial(m: int, a: float) -> tuple[int, np.ndarray]:
    """Bin(m, a) as (first index, masses), cropped where masses fall below :data:`TINY`."""
    j = np.arange(m + 1, dtype=np.float64)
    mass = np.exp(_log_binomial(m, j, a))
    keep = np.flatnonzero(mass >= TINY * mass.max())
    return int(keep[0]), mass[keep[0] : keep[-1] + 1]


def _add_report(grid: np.ndarray, cell0: float, cell1: float) -> np.ndarray:
    """The count grid over (N0, N1) after one more report: on cell 0 w.p. ``cell0``, on
    cell 1 w.p. ``cell1``, else elsewhere (the grid grows by one in each axis)."""
    out = np.zeros((grid.shape[0] + 1, grid.shape[1] + 1))
    out[1:, :-1] += cell0 * grid
    out[:-1, 1:] += cell1 * grid
    out[:-1, :-1] += (1.0 - cell0 - cell1) * grid
    return out


def two_cell_pair(
    n: int, others: tuple[float, float], first: tuple[float, float], second: tuple[float, float]
) -> Pair:
    """The counts (N0, N1) on two cells of n shuffled reports: n - 1 others i.i.d. on the cells
    with probabilities ``others``, the target's report with ``first`` (one batch) or
    ``second`` (the other). N0' ~ Bin(n - 1, a0), N1' | N0' ~ Bin(n - 1 - N0', a1/(1 - a0))."""
    a0, a1 = others
    m = n - 1
    start0, mass0 = binomial(m, a0)  # N0' and N1' each within its own binomial's window
    i = np.arange(start0, start0 + len(mass0))
    start1, mass1 = binomial(m, a1)
    j = np.arange(start1, start1 + len(mass1))
    ii, jj = np.meshgrid(i, j, indexing="ij")
    ok = ii + jj <= m
    rest = 1.0 - a0 - a1
    logs = (
        gammaln(m + 1)
        - gammaln(ii + 1)
        - gammaln(jj + 1)
        - gammaln(np.where(ok, m - ii - jj, 0) + 1)
        + xlogy(ii, a0)
        + xlogy(jj, a1)
        + xlogy(np.where(ok, m - ii - jj, 0), max(rest, 0.0))
    )
    grid = np.where(ok, np.exp(np.where(ok, logs, -np.inf)), 0.0)
    if rest <= 0.0:  # two cells only: every report is on one of them
        grid = np.where(ii + jj == m, grid, 0.0)
    return _add_report(grid, *first), _add_report(grid, *second)


def count_pair(n: int, groups: Sequence[tuple[int, float]], first: float, second: float) -> Pair:
    """The count of one output (say 1) among n shuffled binary reports: the others in groups
    of (size, probability of 1), the target's 1 with probability ``first`` or ``second``
    (the counts of 0 follow: the count is sufficient)."""
    total = np.array([1.0])
    for size, a in groups:
        if size:
            start, mass = binomial(size, a)
            total = np.convolve(total, np.concatenate([np.zeros(start), mass]))
    return np.convolve(total, [1 - first, first]), np.convolve(total, [1 - second, second])


def product_pair(
    n: int, others: tuple[float, float], first: tuple[float, float], second: tuple[float, float]
) -> Pair:
    """Two independent counts (H0, H1) of n shuffled reports, each report's two bits
    independent: the others' with probabilities ``others``, the target's ``first`` or
    ``second`` (OUE's bits of x0 and x1 with every other device at a third value)."""

    def marginal(a: float, t: float) -> np.ndarray:
        start, mass = binomial(n - 1, a)
        return np.convolve(np.concatenate([np.zeros(start), mass]), [1 - t, t])

    p = np.outer(marginal(others[0], first[0]), marginal(others[1], first[1]))
    q = np.outer(marginal(others[0], second[0]), marginal(others[1], second[1]))
    return p, q


# Pairs per mechanism, from its parameters written out again here (not from its object).


def krr_probabilities(k: int, eps0: float) -> tuple[float, float]:
    """k-RR's p = e0/(e0 + k - 1), the kept value, and q = 1/(e0 + k - 1), each other."""
    e = math.exp(eps0)
    return e / (e + k - 1), 1 / (e + k - 1)


def krr_pairs(k: int, eps0: float, n: int) -> list[Pair]:
    """k-RR, target at x0 against x1, every other device at one value: x1 (section 13's pair;
    (N0, N1) sufficient), x0 (the mirror) and, for k > 2, a third value x2 ((N0, N1) then is
    sufficient at k 3 and a post-processing above it)."""
    p, q = krr_probabilities(k, eps0)
    pairs = [
        two_cell_pair(n, (q, p), (p, q), (q, p)),
        two_cell_pair(n, (p, q), (p, q), (q, p)),
    ]
    if k > 2:
        pairs.append(two_cell_pair(n, (q, q), (p, q), (q, p)))
    return pairs


def brr_pairs(eps0: float, n: int, ones: Sequence[int]) -> list[Pair]:
    """Binary RR, target at 1 against 0, with m of the others at 1 for each m in ``ones``."""
    p, q = krr_probabilities(2, eps0)
    return [count_pair(n, [(m, p), (n - 1 - m, q)], p, q) for m in ones]


COMPOSITION_SIZES = {2: 30, 3: 30, 4: 14, 5: 10}
"""The largest n at which :func:`composition_pairs` is checked, per k: its grid holds
(n + 1)^(k - 1) cells for each of O(n^(k - 1)) compositions (up to the symmetry of x2..), so
k 4 at n 14 and k 5 at n 10 cost about as much as k 3 at n 30 (a few tenths of a second)."""


def compositions(k: int, m: int) -> np.ndarray:
    """The values of the other m devices as counts (c0, .., c_{k-1}) summing to m, c0 at x0
    and c1 at x1; x2..x_{k-1} are symmetric under both batches (relabelling them maps each
    batch's histogram law to itself), so only c2 >= c3 >= .. >= c_{k-1} are listed."""

    def falling(rest: int, parts: int, cap: int) -> list[tuple[int, ...]]:
        if parts == 0:
            return [()] if rest == 0 else []
        return [
            (first, *tail)
            for first in range(min(rest, cap), -1, -1)
            for tail in falling(rest - first, parts - 1, first)
        ]

    return np.array(
        [
            (c0, c1, *tail)
            for c0 in range(m + 1)
            for c1 in range(m + 1 - c0)
            for tail in falling(m - c0 - c1, k - 2, m)
        ]
    )


def composition_pairs(k: int, eps0: float, n: int) -> Pair:
    """k-RR, target at x0 against x1, for every composition of the other n - 1 devices'
    values (:func:`compositions`): the full histogram (N0, .., N_{k-1}) of the n reports
    under each batch, stacked over the compositions (axis 0; axes 1..k-1 hold N0..N_{k-2},
    N_{k-1} = n minus the rest). Built by direct convolution, one device at a time, for all
    compositions at once (no FFT). The grid is (n + 1)^(k - 1) a composition, which bounds
    the n this is cheap for as k grows."""
    p, q = krr_probabilities(k, eps0)
    m = n - 1
    comps = compositions(k, m)
    values = np.array([np.repeat(np.arange(k), comp) for comp in comps]).reshape(len(comps), m)
    grid = np.zeros((len(comps), *([n + 1] * (k - 1))))
    grid[(slice(None), *([0] * (k - 1)))] = 1.0
    shape = (len(comps), *([1] * (k - 1)))

    def add(grid: np.ndarray, lands: Sequence[np.ndarray | float]) -> np.ndarray:
        """One more report, on value v w.p. ``lands[v]`` (v < k - 1; else on x_{k-1})."""
        new = (1.0 - sum(lands)) * grid
        for axis, to in enumerate(lands, start=1):
            up = [slice(None)] * grid.ndim
            down = [slice(None)] * grid.ndim
            up[axis], down[axis] = slice(1, None), slice(None, -1)
            new[tuple(up)] += (to * grid)[tuple(down)]
        return new

    for device in range(m):
        held = values[:, device]
        grid = add(grid, [np.where(held == v, p, q).reshape(shape) for v in range(k - 1)])
    target = [p if v == 0 else q for v in range(k - 1)]
    moved = [p if v == 1 else q for v in range(k - 1)]
    return add(grid, target), add(grid, moved)


def stacked_delta(pair: Pair, eps: float) -> float:
    """The largest delta at ``eps`` over stacked pairs (axis 0: :func:`composition_pairs`,
    :func:`stack`), both directions."""
    first, second = pair
    ee = math.exp(eps)
    axes = tuple(range(1, first.ndim))
    one = np.maximum(first - ee * second, 0.0).sum(axis=axes).max()
    two = np.maximum(second - ee * first, 0.0).sum(axis=axes).max()
    return float(max(one, two))


def stack(pairs: Sequence[Pair]) -> Pair:
    """One-dimensional pairs (:func:`brr_pairs`) padded with zeros and stacked on axis 0."""
    size = max(max(len(p), len(q)) for p, q in pairs)

    def pad(a: np.ndarray) -> np.ndarray:
        return np.pad(a, (0, size - len(a)))

    return np.stack([pad(p) for p, _ in pairs]), np.stack([pad(q) for _, q in pairs])


def stacked_epsilon(pair: Pair, delta: float, eps0: float, steps: int = 40) -> float:
    """The eps of the worst of stacked pairs (bisected, the upper end)."""
    low, high = 0.0, eps0
    for _ in range(steps):
        middle = (low + high) / 2
        if stacked_delta(pair, middle) <= delta:
            high = middle
        else:
            low = middle
    return high


def composition_epsilon(k: int, eps0: float, n: int, delta: float, steps: int = 40) -> float:
    """The eps of the worst composition (:func:`composition_pairs`; bisected, the upper end)."""
    return stacked_epsilon(composition_pairs(k, eps0, n), delta, eps0, steps)


def oue_pairs(eps0: float, n: int) -> list[Pair]:
    """OUE seen through the bits of x0 and x1 only (a post-processing of the batch): each
    report's two bits are a 4-outcome randomizer, its own bit 1 w.p. 1/2, another's w.p.
    q = 1/(e0 + 1). Target at x0 against x1; others at x1 (the counts of (1, 0) and (0, 1)
    sufficient: (0, 0) and (1, 1) have the same likelihood ratio) or at x2 (the counts of
    each bit, independent, sufficient)."""
    q = 1 / (math.exp(eps0) + 1)
    at_x0 = (0.5 * (1 - q), 0.5 * q)  # P(bits (1,0)), P(bits (0,1)) from a device at x0
    at_x1 = (q * 0.5, (1 - q) * 0.5)
    return [
        two_cell_pair(n, at_x1, at_x0, at_x1),
        product_pair(n, (q, q), (0.5, q), (q, 0.5)),
    ]


OLH_PRIME = 2**31 - 1
"""The prime of OLH's Carter-Wegman hash ((a v + b) mod P) mod g (the wire format)."""


def olh_collision(g: int) -> float:
    """P[H(x0) = H(x1)] for two distinct values: (a x0 + b, a x1 + b) mod P is uniform over
    the ordered pairs of distinct residues, so it is the share of those with equal residue
    mod g."""
    whole, extra = divmod(OLH_PRIME, g)
    same = extra * (whole + 1) * whole + (g - extra) * whole * (whole - 1)
    return same / (OLH_PRIME * (OLH_PRIME - 1))


def olh_pairs(eps0: float, n: int) -> list[Pair]:
    """OLH seen through (y = H(x0), y = H(x1)) per report (a post-processing), g = round(e0)
    + 1, the hash's exact collision probability; target at x0 against x1, others at x1. The
    counts of (1, 0) and (0, 1) are sufficient ((0, 0) and (1, 1) have ratio 1)."""
    e = math.exp(eps0)
    g = round(e) + 1
    p = e / (e + g - 1)
    apart = 1 - olh_collision(g)
    at_x0 = (apart * p, apart * (1 - p) / (g - 1))
    at_x1 = (apart * (1 - p) / (g - 1), apart * p)
    return [two_cell_pair(n, at_x1, at_x0, at_x1)]


GRID = 2.0**-24
"""The grid pm and hybrid payloads are rounded to (the wire format)."""


def piecewise_cells(eps0: float, t: float) -> tuple[float, float]:
    """Wang et al.'s Piecewise Mechanism at t: P(payload >= 1), P(payload <= -1) after
    rounding to :data:`GRID` (the draw taken as continuous: density s/(s+1)/(C-1) on [l, r],
    1/(s+1)/(C+1) elsewhere in [-C, C], s = e^(eps0/2), C = (s+1)/(s-1))."""
    s = math.exp(eps0 / 2)
    c = (s + 1) / (s - 1)
    left = (c + 1) * t / 2 - (c - 1) / 2
    right = left + c - 1
    high, low = s / (s + 1) / (c - 1), 1 / (s + 1) / (c + 1)

    def mass(u: float, v: float) -> float:
        inside = max(0.0, min(v, right) - max(u, left))
        return high * inside + low * (v - u - inside)

    return mass(1 - GRID / 2, c), mass(-c, -1 + GRID / 2)


def numeric_cells(name: str, eps0: float, t: float) -> tuple[float, float]:
    """P(payload >= 1), P(payload <= -1) of duchi, pm or hybrid at t: the two cells that,
    with every other device at -1 or 1, carry the whole likelihood ratio of the idealized
    mechanism (a post-processing of the rounded one)."""
    e = math.exp(eps0)
    plus = 0.5 + t * (e - 1) / (2 * (e + 1))  # duchi: +-(e+1)/(e-1), both outside (-1, 1)
    if name == "duchi":
        return plus, 1 - plus
    pm = piecewise_cells(eps0, t)
    if name == "pm":
        return pm
    beta = 1 - math.exp(-eps0 / 2) if eps0 > 0.6094 else 0.0
    return beta * pm[0] + (1 - beta) * plus, beta * pm[1] + (1 - beta) * (1 - plus)


def numeric_pairs(name: str, eps0: float, n: int) -> list[Pair]:
    """A number's mechanism, target at 1 against -1, every other device at -1, 0 or 1."""
    first, second = numeric_cells(name, eps0, 1.0), numeric_cells(name, eps0, -1.0)
    return [two_cell_pair(n, numeric_cells(name, eps0, t), first, second) for t in (-1.0, 0.0, 1.0)]
