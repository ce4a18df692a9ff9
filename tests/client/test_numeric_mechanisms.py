"""The numeric mechanisms against the formulas of DESIGN.md and STATS.md sections 7 and 10.

Tier 0 (exact, STATS.md section 8): output probabilities and densities, the likelihood-ratio
bound e^eps over grids of inputs and outputs (densities, cells, the rounded payloads' cells),
unbiasedness and variances by exact piecewise integration, the fixed output grid. Tier 2
(seeded): chi-square goodness of fit of ``randomize`` and the binomial ratio-bound test, each
at the Bonferroni level a_i = 1e-4 / m over every statistical test in this file.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import pairwise, permutations

import pytest
from scipy import stats

from deniable.client.mechanisms import (
    HYBRID_THRESHOLD,
    NUMERIC_GRID,
    NUMERIC_MECHANISMS,
    Duchi,
    Hybrid,
    NumericMechanism,
    Piecewise,
    least_worst_case_variance,
    make_numeric_mechanism,
)
from deniable.client.randomness import SeededRandomness

EPSILONS = [0.001, 0.01, 0.1, 0.5, HYBRID_THRESHOLD, 0.7, 1.0, 1.29, 2.0, 4.0, 8.0, 12.0, 20.0]
T_GRID = [-1.0, -0.999, -0.75, -0.5, -0.2, 0.0, 1e-9, 0.3, 0.5, 0.81, 1.0]


def slack(epsilon: float) -> float:
    """The relative floating-point slack of a probability ratio at eps: rounding errors of a few
    ulps, divided by the smallest probability involved (about e^-eps), so 1e-12 at moderate eps
    and about 1e-6 at eps = 20 (the realized eps is the nominal one to that precision, as the
    docstring of ``MAX_EPSILON`` says)."""
    return 1e-12 + 8 * 2.0**-52 * math.exp(epsilon)


def moment_tolerance(mechanism: NumericMechanism) -> float:
    """Absolute tolerance of a first or second moment computed in floating point: a few ulps
    of the largest terms (C^2) plus the cancellation at large eps."""
    return 64 * 2.0**-52 * (mechanism.bound**2 + math.exp(mechanism.epsilon))


# -- exact distributions, from the formulas (not from the code under test) -----------------


def duchi_plus(epsilon: float, t: float) -> float:
    """DESIGN.md: P(y = +C1) = 1/2 + t(e-1)/(2(e+1))."""
    e = math.exp(epsilon)
    return 0.5 + t * (e - 1) / (2 * (e + 1))


def pm_pieces(epsilon: float, t: float) -> list[tuple[float, float, float]]:
    """The pm density as (start, end, density) pieces, from DESIGN.md: probability s/(s+1)
    uniform on [l, r], the rest uniform on [-C, l) u (r, C]."""
    s = math.exp(epsilon / 2)
    c = (s + 1) / (s - 1)
    left = (c + 1) * t / 2 - (c - 1) / 2
    right = left + c - 1
    inside = (s / (s + 1)) / (right - left)
    outside = (1 / (s + 1)) / (2 * c - (right - left))
    return [(-c, left, outside), (left, right, inside), (right, c, outside)]


def pm_cell(epsilon: float, t: float, a: float, b: float) -> float:
    """P(a <= y <= b) for the exact pm draw: the integral of its piecewise-constant density."""
    return sum(
        density * max(0.0, min(b, end) - max(a, start))
        for start, end, density in pm_pieces(epsilon, t)
    )


def pm_moment(epsilon: float, t: float, power: int) -> float:
    """E[y^power | t] of the exact pm draw, integrating each uniform piece in closed form."""
    return sum(
        density * (end ** (power + 1) - start ** (power + 1)) / (power + 1)
        for start, end, density in pm_pieces(epsilon, t)
    )


def hybrid_beta(epsilon: float) -> float:
    """DESIGN.md: pm with probability 1 - e^(-eps/2) above eps* = 0.6094, else never."""
    return 1 - math.exp(-epsilon / 2) if epsilon > 0.6094 else 0.0


# -- tier 0: formulas ----------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_parameters_are_the_pinned_formulas(epsilon: float) -> None:
    e, s = math.exp(epsilon), math.exp(epsilon / 2)
    duchi, pm, hybrid = Duchi(epsilon), Piecewise(epsilon), Hybrid(epsilon)
    assert duchi.bound == pytest.approx((e + 1) / (e - 1), rel=1e-12)
    assert pm.bound == pytest.approx((s + 1) / (s - 1), rel=1e-12)
    assert pm.window_probability == pytest.approx(s / (s + 1), rel=1e-15)
    assert hybrid.pm_probability == pytest.approx(hybrid_beta(epsilon), rel=1e-15, abs=0)
    assert hybrid.bound == (pm.bound if epsilon > 0.6094 else duchi.bound)
    for t in T_GRID:
        assert duchi.plus_probability(t) == pytest.approx(duchi_plus(epsilon, t), rel=1e-12)
        left, right = pm.window(t)
        (_, l0, _), (_, r0, _), _ = pm_pieces(epsilon, t)
        assert (left, right) == pytest.approx((l0, r0), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_pm_density_is_the_formula_and_integrates_to_one(epsilon: float) -> None:
    pm = Piecewise(epsilon)
    e, s = math.exp(epsilon), math.exp(epsilon / 2)
    high = (e - s) / (2 * s + 2)  # STATS.md section 7
    for t in T_GRID:
        pieces = pm_pieces(epsilon, t)
        assert pieces[1][2] == pytest.approx(high, rel=1e-9)
        assert pieces[0][2] == pytest.approx(high / e, rel=1e-9)
        assert pm_cell(epsilon, t, -pm.bound, pm.bound) == pytest.approx(1, rel=1e-12)
        for start, end, density in pieces:
            if end - start > 1e-9:  # at t = +-1 a piece is one ulp of rounding wide
                for y in (start, (start + end) / 2, end):
                    expected = high if pieces[1][0] <= y <= pieces[1][1] else high / e
                    assert pm.density(y, t) == pytest.approx(expected, rel=1e-9)
                assert pm.density((start + end) / 2, t) == pytest.approx(density, rel=1e-9)
        assert pm.density(pm.bound * 1.001 + 1e-9, t) == 0.0


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_duchi_ratio_bound_holds_and_is_attained(epsilon: float) -> None:
    duchi = Duchi(epsilon)
    e = math.exp(epsilon)
    worst = 0.0
    for t in T_GRID:
        for u in T_GRID:
            plus_t, plus_u = duchi.plus_probability(t), duchi.plus_probability(u)
            for a, b in ((plus_t, plus_u), (1 - plus_t, 1 - plus_u)):
                assert 0 < a < 1
                worst = max(worst, a / b)
    assert worst <= e * (1 + slack(epsilon))
    assert worst == pytest.approx(e, rel=slack(epsilon))


def _cells(mechanism: Piecewise, pieces: int = 200) -> list[tuple[float, float]]:
    """A partition of [-C, C]: equal cells split at every window end of T_GRID."""
    c = mechanism.bound
    points = {-c + 2 * c * i / pieces for i in range(pieces)} | {c}
    for t in T_GRID:
        points |= set(mechanism.window(t))
    edges = sorted(p for p in points if -c <= p <= c)
    return [(a, b) for a, b in pairwise(edges) if b > a]


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_pm_ratio_bound_over_outputs_cells_and_rounded_payloads(epsilon: float) -> None:
    pm = Piecewise(epsilon)
    e, c, g = math.exp(epsilon), pm.bound, NUMERIC_GRID
    bound = e * (1 + slack(epsilon))
    ys = [-c + 2 * c * i / 400 for i in range(401)]
    for t, u in permutations(T_GRID, 2):
        ys_here = [y for y in [*ys, *pm.window(t), *pm.window(u)] if -c <= y <= c]
        ratios = [pm.density(y, t) / pm.density(y, u) for y in ys_here]
        assert max(ratios) <= bound
    middle = (1 + c) / 2  # of window(1) = [1, C], outside window(-1) = [-C, -1]
    assert pm.density(middle, 1.0) / pm.density(middle, -1.0) == pytest.approx(
        e, rel=slack(epsilon)
    )
    cells = _cells(pm)
    worst = 0.0
    for t, u in permutations(T_GRID, 2):
        for a, b in cells:
            worst = max(worst, pm_cell(epsilon, t, a, b) / pm_cell(epsilon, u, a, b))
    assert worst <= bound
    assert worst == pytest.approx(e, rel=1e-6)
    # The payload is the draw rounded to the grid: P(y = k g) is the probability of the
    # draw's cell [(k - 1/2) g, (k + 1/2) g), the two end cells running to -C and C.
    limit = math.floor(c / g)

    def payload_probability(t: float, k: int) -> float:
        low = -c if k == -limit else (k - 0.5) * g
        high = c if k == limit else (k + 0.5) * g
        return pm_cell(epsilon, t, low, high)

    steps = {-limit, -limit + 1, limit - 1, limit, 0}
    for t in T_GRID:
        for point in pm.window(t):
            k = round(point / g)
            steps |= {k - 1, k, k + 1}
    steps = {k for k in steps if -limit <= k <= limit}
    for t, u in permutations(T_GRID, 2):
        for k in steps:
            assert payload_probability(t, k) <= bound * payload_probability(u, k)


@pytest.mark.parametrize("epsilon", [e for e in EPSILONS if e > HYBRID_THRESHOLD])
def test_hybrid_ratio_bound_over_both_components(epsilon: float) -> None:
    hybrid = Hybrid(epsilon)
    beta, c1 = hybrid.pm_probability, hybrid.duchi.bound
    bound = math.exp(epsilon) * (1 + slack(epsilon))

    def atom(t: float, sign: int) -> float:
        plus = hybrid.duchi.plus_probability(t)
        return (1 - beta) * (plus if sign > 0 else 1 - plus)

    def cell(t: float, a: float, b: float) -> float:
        mass = beta * pm_cell(epsilon, t, a, b)
        return mass + sum(atom(t, sign) for sign in (1, -1) if a <= sign * c1 <= b)

    cells = _cells(hybrid.piecewise)
    for t, u in permutations(T_GRID, 2):
        for sign in (1, -1):
            assert atom(t, sign) <= bound * atom(u, sign)
        for a, b in cells:
            assert cell(t, a, b) <= bound * cell(u, a, b)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_unbiased_by_exact_sums_and_integrals(epsilon: float) -> None:
    duchi, pm, hybrid = Duchi(epsilon), Piecewise(epsilon), Hybrid(epsilon)
    for t in T_GRID:
        plus = duchi.plus_probability(t)
        duchi_mean = duchi.bound * plus - duchi.bound * (1 - plus)
        assert duchi_mean == pytest.approx(t, abs=moment_tolerance(duchi))
        pm_mean = pm_moment(epsilon, t, 1)
        assert pm_mean == pytest.approx(t, abs=moment_tolerance(pm))
        beta = hybrid.pm_probability
        assert beta * pm_mean + (1 - beta) * duchi_mean == pytest.approx(
            t, abs=moment_tolerance(pm)
        )


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_variances_match_exact_second_moments_and_the_closed_forms(epsilon: float) -> None:
    duchi, pm, hybrid = Duchi(epsilon), Piecewise(epsilon), Hybrid(epsilon)
    e, s = math.exp(epsilon), math.exp(epsilon / 2)
    c1 = (e + 1) / (e - 1)
    x_free = (s + 3) / (3 * s * (s - 1)) + (e + 1) ** 2 / (s * (e - 1) ** 2)  # STATS.md 7
    for t in T_GRID:
        tolerance = moment_tolerance(pm)
        assert duchi.variance(t) == pytest.approx(c1**2 - t * t, rel=1e-12)
        assert duchi.variance(t) == pytest.approx(duchi.bound**2 - t * t, abs=tolerance)
        pm_second = pm_moment(epsilon, t, 2)
        assert pm.variance(t) == pytest.approx(pm_second - t * t, abs=tolerance)
        closed = t * t / (s - 1) + (s + 3) / (3 * (s - 1) ** 2)
        assert pm.variance(t) == pytest.approx(closed, rel=1e-12)
        beta = hybrid.pm_probability
        mixed = beta * pm_second + (1 - beta) * c1**2 - t * t
        assert hybrid.variance(t) == pytest.approx(mixed, abs=tolerance)
        if epsilon > HYBRID_THRESHOLD:
            assert hybrid.variance(t) == pytest.approx(x_free, rel=1e-9)
        else:
            assert hybrid.variance(t) == pytest.approx(c1**2 - t * t, rel=1e-12)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_worst_case_variances_are_the_maxima_over_t(epsilon: float) -> None:
    e, s = math.exp(epsilon), math.exp(epsilon / 2)
    fine = [i / 100 - 1 for i in range(201)]
    expected = {
        "duchi": ((e + 1) / (e - 1)) ** 2,
        "pm": 1 / (s - 1) + (s + 3) / (3 * (s - 1) ** 2),
    }
    for name, cls in NUMERIC_MECHANISMS.items():
        mechanism = cls(epsilon)
        worst = max(mechanism.variance(t) for t in fine)
        assert mechanism.worst_case_variance == pytest.approx(worst, rel=1e-12)
        if name in expected:
            assert mechanism.worst_case_variance == pytest.approx(expected[name], rel=1e-12)
    least = least_worst_case_variance(epsilon)
    assert least == ("duchi" if epsilon <= 0.6094 else "hybrid")
    assert make_numeric_mechanism("auto", epsilon).name == least


# -- tier 0: what randomize can output -----------------------------------------------------


class Scripted:
    """A randomness source that plays back given uniforms (the mechanism's only input)."""

    def __init__(self, values: list[float]) -> None:
        self._values = iter(values)

    def random(self) -> float:
        return next(self._values)

    def randbelow(self, n: int) -> int:
        raise AssertionError("a numeric mechanism draws floats only")

    def token_bytes(self, n: int) -> bytes:
        raise AssertionError("a numeric mechanism draws floats only")


UNIFORMS = [0.0, 2.0**-53, 1e-6, 0.1, 0.25, 0.5, 0.7, 0.9, 0.999999, 1 - 2.0**-53]


def _on_grid(y: float) -> bool:
    return (y / NUMERIC_GRID).is_integer()


@pytest.mark.parametrize("epsilon", [0.001, 0.5, 1.0, 4.0, 20.0])
def test_pm_payloads_lie_on_the_fixed_grid_inside_the_bound_for_every_t(epsilon: float) -> None:
    """The Mironov point: every payload is k * 2^-24 with |k| <= floor(C / 2^-24), a set that
    depends on eps only, never on t, whatever uniforms the draw gets."""
    pm = Piecewise(epsilon)
    c = pm.bound
    limit = math.floor(c / NUMERIC_GRID)
    ts = [*T_GRID, -1 + 2.0**-52, 1 - 2.0**-53, 1 / 3]
    for t in ts:
        for u1 in (0.0, pm.window_probability - 1e-12, pm.window_probability, 1 - 2.0**-53):
            for u2 in UNIFORMS:
                y = pm.randomize(t, Scripted([u1, u2]))
                assert _on_grid(y) and abs(y) <= limit * NUMERIC_GRID <= c
    rng = SeededRandomness(7)
    for t in ts:
        for _ in range(500):
            y = pm.randomize(t, rng)
            assert _on_grid(y) and abs(y) <= c


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
def test_pm_draw_is_the_window_with_its_probability_else_the_rest(epsilon: float) -> None:
    """The first uniform picks the window with probability s/(s+1); the second places the
    draw uniformly in the window, or in the rest of [-C, C] in increasing order, then rounds
    it to the grid (by at most one step, at the ends where the grid stops inside C)."""
    pm = Piecewise(epsilon)
    c, half = pm.bound, NUMERIC_GRID
    inside = pm.window_probability * (1 - 1e-12)
    for t in T_GRID:
        left, right = pm.window(t)
        for u in UNIFORMS:
            y = pm.randomize(t, Scripted([inside, u]))
            assert y == pytest.approx(left + (right - left) * u, abs=half + 1e-12)
        rest = [pm.randomize(t, Scripted([pm.window_probability, u])) for u in UNIFORMS]
        assert rest == sorted(rest)
        for y in rest:
            assert not left + half < y < right - half
        gap = (left + c) / (c + 1)  # the uniform at which the rest jumps over the window
        for u in UNIFORMS:
            y = pm.randomize(t, Scripted([pm.window_probability, u]))
            expected = -c + (c + 1) * u if u < gap else right + (c + 1) * u - (left + c)
            assert y == pytest.approx(expected, abs=half + 1e-12)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 4.0])
def test_duchi_and_hybrid_draws_follow_their_first_uniforms(epsilon: float) -> None:
    duchi, hybrid = Duchi(epsilon), Hybrid(epsilon)
    for t in T_GRID:
        plus = duchi.plus_probability(t)
        assert duchi.randomize(t, Scripted([plus * (1 - 1e-12)])) == duchi.bound
        assert duchi.randomize(t, Scripted([plus])) == -duchi.bound
        beta = hybrid.pm_probability
        duchi_draw = hybrid.randomize(t, Scripted([beta, plus * (1 - 1e-12)]))
        assert duchi_draw == duchi.bound
        if beta > 0:
            pm_draw = hybrid.randomize(t, Scripted([beta * (1 - 1e-12), 0.0, 0.5]))
            assert pm_draw == hybrid.piecewise.randomize(t, Scripted([0.0, 0.5]))


@pytest.mark.parametrize("name", sorted(NUMERIC_MECHANISMS))
@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0000001, 1.0000001, True, "0.5", None])
def test_randomize_refuses_inputs_outside_the_axis(name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=r"not a number in \[-1, 1\]") as caught:
        make_numeric_mechanism(name, 1.0).randomize(bad, SeededRandomness(1))  # type: ignore[arg-type]
    assert "0.5" not in str(caught.value)


# -- parse_payload --------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 4.0])
def test_parse_payload_accepts_what_randomize_makes_and_refuses_the_rest(epsilon: float) -> None:
    duchi, pm, hybrid = Duchi(epsilon), Piecewise(epsilon), Hybrid(epsilon)
    c1, c = duchi.bound, pm.bound
    for y in (c1, -c1, c1 * (1 + 5e-10), -c1 * (1 - 5e-10)):
        assert duchi.parse_payload(y) == math.copysign(c1, y)
    for y in (0, 0.0, 0.5, -1, c, -c, c * (1 + 5e-10), -c1, 3 * NUMERIC_GRID):
        assert pm.parse_payload(y) == float(y)
        assert type(pm.parse_payload(y)) is float
    never = [math.nan, math.inf, -math.inf, True, False, "0.5", None, [0.5], {"y": 0.5}, 10**400]
    for mechanism in (duchi, pm, hybrid):
        for y in [*never, mechanism.bound * (1 + 2e-9), -mechanism.bound * (1 + 2e-9)]:
            with pytest.raises(ValueError, match="payload"):
                mechanism.parse_payload(y)
    for y in (0, 0.5, c1 / 2, c1 * (1 - 2e-9), -c1 * (1 - 2e-9), 1):
        with pytest.raises(ValueError, match="duchi payload"):
            duchi.parse_payload(y)
    if epsilon > HYBRID_THRESHOLD:
        assert hybrid.parse_payload(0.25) == 0.25 and hybrid.parse_payload(-c1) == -c1
        assert hybrid.parse_payload(c) == c
    else:
        assert hybrid.parse_payload(c1) == c1
        with pytest.raises(ValueError, match="duchi payload"):
            hybrid.parse_payload(0.25)
    rng = SeededRandomness(3)
    for mechanism in (duchi, pm, hybrid):
        for t in T_GRID:
            y = mechanism.randomize(t, rng)
            assert mechanism.parse_payload(y) == y


# -- tier 2: seeded goodness of fit and ratio bound ----------------------------------------

DRAWS = 20_000
T_SAMPLED = [-1.0, -0.4, 0.0, 0.37, 1.0]
SAMPLED = [("duchi", 1.0), ("pm", 1.0), ("pm", 4.0), ("hybrid", 2.0)]


def _partition(mechanism: NumericMechanism) -> list[tuple[float, float]]:
    """Cells of [-C, C] with edges at -C, C and l(t), r(t) of every sampled t, each cut in
    two (DESIGN.md's binning for continuous outputs: post-processing, so the ratio bound holds
    cell by cell). A duchi payload is its own cell."""
    if isinstance(mechanism, Duchi):
        return [(-mechanism.bound, -mechanism.bound), (mechanism.bound, mechanism.bound)]
    pm = mechanism.piecewise if isinstance(mechanism, Hybrid) else mechanism
    c = pm.bound
    points = {-c, c}
    for t in T_SAMPLED:
        points |= {p for p in pm.window(t) if -c <= p <= c}
    edges = sorted(points)
    cells = []
    for a, b in pairwise(edges):
        if b - a > 1e-9:
            cells += [(a, (a + b) / 2), ((a + b) / 2, b)]
    if isinstance(mechanism, Hybrid):
        c1 = mechanism.duchi.bound
        cells += [(-c1, -c1), (c1, c1)]
    return cells


def _probabilities(mechanism: NumericMechanism, t: float) -> list[float]:
    """The exact probability of each cell of :func:`_partition` (atoms are their own cells,
    the continuous part's atoms have probability 0)."""
    epsilon = mechanism.epsilon
    if isinstance(mechanism, Duchi):
        plus = duchi_plus(epsilon, t)
        return [1 - plus, plus]
    beta = hybrid_beta(epsilon) if isinstance(mechanism, Hybrid) else 1.0
    probabilities = []
    for a, b in _partition(mechanism):
        if a == b:
            plus = duchi_plus(epsilon, t)
            probabilities.append((1 - beta) * (plus if a > 0 else 1 - plus))
        else:
            probabilities.append(beta * pm_cell(epsilon, t, a, b))
    return probabilities


def _counts(mechanism: NumericMechanism, t: float, seed: int) -> list[int]:
    """How many of DRAWS seeded payloads fall in each cell (an atom takes its exact value)."""
    cells = _partition(mechanism)
    atoms = {a: i for i, (a, b) in enumerate(cells) if a == b}
    intervals = [(a, b, i) for i, (a, b) in enumerate(cells) if a != b]
    counts = [0] * len(cells)
    rng = SeededRandomness(seed)
    for _ in range(DRAWS):
        y = mechanism.randomize(t, rng)
        index = atoms.get(y)
        if index is None:
            index = next(i for a, b, i in intervals if y <= b or i == intervals[-1][2])
        counts[index] += 1
    return counts


def _statistical_tests() -> int:
    """m: one chi-square per (mechanism, t) and one binomial per (mechanism, t, t', cell)."""
    m = 0
    for name, epsilon in SAMPLED:
        cells = len(_partition(make_numeric_mechanism(name, epsilon)))
        m += len(T_SAMPLED) + len(T_SAMPLED) * (len(T_SAMPLED) - 1) * cells
    return m


ALPHA = 1e-4 / _statistical_tests()


def _sampled() -> Iterator[tuple[NumericMechanism, dict[float, list[int]]]]:
    for seed, (name, epsilon) in enumerate(SAMPLED):
        mechanism = make_numeric_mechanism(name, epsilon)
        yield (
            mechanism,
            {t: _counts(mechanism, t, 1000 * seed + i) for i, t in enumerate(T_SAMPLED)},
        )


@pytest.fixture(scope="module")
def sampled() -> list[tuple[NumericMechanism, dict[float, list[int]]]]:
    return list(_sampled())


def test_randomize_fits_the_exact_distribution(
    sampled: list[tuple[NumericMechanism, dict[float, list[int]]]],
) -> None:
    """Chi-square of each (mechanism, t)'s cell counts against the formula, at a_i. Rounding
    to the grid moves a draw across a cell edge with probability about 1e-7 per edge, far
    below one expected count."""
    for mechanism, by_t in sampled:
        for t, counts in by_t.items():
            probabilities = _probabilities(mechanism, t)
            assert sum(probabilities) == pytest.approx(1, abs=1e-12)
            kept = [(n, p) for n, p in zip(counts, probabilities, strict=True) if p > 0]
            assert sum(n for n, _ in kept) == DRAWS, "a payload fell where it has probability 0"
            assert min(DRAWS * p for _, p in kept) >= 5, "cells too small for chi-square"
            statistic = sum((n - DRAWS * p) ** 2 / (DRAWS * p) for n, p in kept)
            critical = stats.chi2.isf(ALPHA, len(kept) - 1)
            assert statistic < critical, (mechanism, t, statistic, critical)


def test_no_cell_favours_one_input_over_another_by_more_than_e_eps(
    sampled: list[tuple[NumericMechanism, dict[float, list[int]]]],
) -> None:
    """STATS.md section 8, tier 2: with a, b the counts of a cell under t and t' (equal N),
    a ~ Bin(a + b, pi) given a + b, and H0 is pi <= e/(1 + e); fail if the binomial tail
    P(A >= a) is below a_i. The raw maximum of estimated ratios is never tested."""
    for mechanism, by_t in sampled:
        e = math.exp(mechanism.epsilon)
        pi = e / (1 + e)
        for t, u in permutations(T_SAMPLED, 2):
            for a, b in zip(by_t[t], by_t[u], strict=True):
                if a + b:
                    assert stats.binom.sf(a - 1, a + b, pi) >= ALPHA, (mechanism, t, u, a, b)


def test_the_ratio_test_detects_a_mechanism_spending_more_than_its_eps() -> None:
    """The binomial test has power: pm run at eps = 2 but judged at eps = 1 fails it."""
    loose = Piecewise(2.0)
    tight = Piecewise(1.0)
    counts_high = _counts(loose, 1.0, 11)
    counts_low = _counts(loose, -1.0, 12)
    e = math.exp(tight.epsilon)
    tails = [
        stats.binom.sf(a - 1, a + b, e / (1 + e))
        for a, b in zip(counts_high, counts_low, strict=True)
        if a + b
    ]
    assert min(tails) < ALPHA
