"""Coverage of breakdown intervals and of difference intervals (issue 27, STATS.md 12-13).

Three tables, each cell M replicates (``--reps``, default 2,000; SE of a 95% coverage 0.005):

1. **slices**: S = 4 slices of n reports each (one period, fresh reports), each row's
   interval at 1 - alpha/(S k) as the breakdown shows it (Wilson/CP mapped, clipped to
   [0, 1]), and the slice difference slice 1 - slice 2 from the shown intervals (as
   ``compare=`` does). Columns: the joint coverage of all S x k slice intervals and of the k
   differences, each bounded below by 1 - (sum of the rows' miss rates) (Bonferroni's union
   bound, valid whatever the dependence between rows; each row's counts are drawn from their
   exact marginal law, so the bound is exact in what it bounds). Table 1b measures the joint
   coverage itself for krr, brr and oue, whose counts' joint law is drawn exactly.
2. **periods**: window A minus window B of the same devices (testkit/windows.py: scenarios
   same, toggle, change, disjoint; memo fresh, permanent, two-layer for krr/brr), windows of
   1 period (day vs day, participation 0.9) or 7 (week vs week, participation 0.7-1), each
   row's difference interval at 1 - alpha/k (estimators/differences.py); joint coverage bound
   over the k rows; and where nothing changed (same, disjoint) the false "changed" rate bound
   (sum over rows of P(the interval excludes 0)), which must stay at most 5%.
3. **means**: numeric mechanisms, the mean in window A minus B (one period each, every
   device reporting in both): scenarios same (t' = t), toggle (t' = -t), change (a fifth of
   the devices at -1 move to +1), disjoint; memo fresh or permanent (the same payload
   repeated while the value is unchanged). Devices are drawn iid from t in {-1, 0.2, 1} with
   P (0.5, 0.3, 0.2); the truth is the population's difference. duchi's sums are drawn
   exactly from counts of +C1 at any n (M replicates); pm and hybrid report by report up to
   10,000 devices and from exact segment counts with normal uniform sums above
   (testkit/numeric_draws.py), memoized identical payloads drawn once for the devices in both
   windows; above 1,000 devices pm and hybrid run M/10 replicates (at least 200).

Shares: brr (k = 2, the true row; its false row mirrors it) and krr, oue, olh with k = 4 and
shares (0.5, 0.3, 0.2, 0) in window A (olh's support counts per row have their exact
marginal law; across rows they are only pairwise independent, which the union bound ignores).
Sizes n = 100 (the minimum slice) to 1e6; eps 0.5, 1, 4. Prints the lowest cell per table and
exits 1 if any cell is below 0.94 or any false-changed rate above 0.05.

    .venv/bin/python -m bench.breakdown_coverage [--reps 2000] [--seed 1] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from deniable.client.mechanisms import (
    BRR,
    KRR,
    OLH,
    OUE,
    Duchi,
    Mechanism,
    NumericMechanism,
    make_numeric_mechanism,
)
from deniable.estimators.differences import interval_difference
from deniable.estimators.intervals import share_interval, unit_interval
from deniable.estimators.numeric import pooled_interval
from deniable.estimators.pooling import pool
from testkit.numeric_draws import payloads, segments
from testkit.windows import simulate

ALPHA = 0.05
FLOOR = 0.94
EPSILONS = (0.5, 1.0, 4.0)
SIZES = (100, 1_000, 10_000, 100_000, 1_000_000)
SHARES = (0.5, 0.3, 0.2, 0.0)
SLICE_SHARES = (
    (0.5, 0.3, 0.2, 0.0),
    (0.25, 0.25, 0.25, 0.25),
    (0.7, 0.1, 0.1, 0.1),
    (0.05, 0.05, 0.1, 0.8),
)
BRR_SHARES = (0.3, 0.5, 0.05, 0.9)
WEEK = np.array([1.0, 0.9, 0.8, 1.0, 0.7, 0.95, 0.85])
DAY = np.array([0.9])
POPULATION = (np.array([-1.0, 0.2, 1.0]), np.array([0.5, 0.3, 0.2]))


def mechanisms(eps: float) -> list[Mechanism]:
    return [BRR(2, eps), KRR(4, eps), OUE(4, eps), OLH(4, eps)]


def rows_of(mechanism: Mechanism, shares: tuple[float, ...]) -> tuple[float, ...]:
    """The rows simulated: brr's true row only (its false row misses exactly when it does)."""
    return shares[:1] if mechanism.k == 2 else shares


def one_period_counts(
    mechanism: Mechanism, f: float, n: int, reps: int, rng: np.random.Generator
) -> np.ndarray:
    """Support counts of a row with share f from n fresh reports (super-population: exact)."""
    return rng.binomial(n, mechanism.q_star + (mechanism.p_star - mechanism.q_star) * f, size=reps)


def slices_cell(
    mechanism: Mechanism, n: int, reps: int, rng: np.random.Generator
) -> tuple[float, float]:
    """(joint slice coverage bound, joint slice-difference coverage bound)."""
    slices = len(SLICE_SHARES)
    k = mechanism.k
    alpha = ALPHA / (slices * k)
    table = [(BRR_SHARES[i],) if k == 2 else SLICE_SHARES[i] for i in range(slices)]
    miss, diff_miss = 0.0, 0.0
    shown = []
    for shares in table:
        per_slice = []
        for f in shares:
            counts = one_period_counts(mechanism, f, n, reps, rng)
            low, high = share_interval(mechanism, counts, np.full(reps, float(n)), alpha)
            low, high = unit_interval(low, high)
            miss += float(np.mean((low > f) | (high < f)))
            per_slice.append((f, low, high))
        shown.append(per_slice)
    for (f1, low1, high1), (f2, low2, high2) in zip(shown[0], shown[1], strict=True):
        low, high = interval_difference((low1, high1), (low2, high2))
        truth = f1 - f2
        diff_miss += float(np.mean((low > truth) | (high < truth)))
    return 1 - miss, 1 - diff_miss


def joint_counts(
    mechanism: Mechanism, shares: tuple[float, ...], n: int, reps: int, rng: np.random.Generator
) -> np.ndarray:
    """All k support counts of n fresh reports, jointly (reps, k): the true categories
    multinomial, then krr's reports multinomial per category, or oue's bits independent given
    the values. Exact joint laws (olh's are not: its hash ties the rows)."""
    k = mechanism.k
    truth = rng.multinomial(n, np.array(shares) / sum(shares), size=reps)
    if isinstance(mechanism, KRR):
        rows = np.where(np.eye(k, dtype=bool), mechanism.p_star, mechanism.q_star)
        return sum(rng.multinomial(truth[:, v], rows[v]) for v in range(k))
    return rng.binomial(truth, mechanism.p_star) + rng.binomial(n - truth, mechanism.q_star)


def joint_slices_cell(
    mechanism: Mechanism, n: int, reps: int, rng: np.random.Generator
) -> tuple[float, float]:
    """Measured (not bounded) joint coverage of the S x k slice intervals and of the k slice
    differences, from the exact joint law of each slice's counts (krr, brr, oue)."""
    slices, k = len(SLICE_SHARES), mechanism.k
    alpha = ALPHA / (slices * k)
    table = [
        (1 - BRR_SHARES[i], BRR_SHARES[i]) if k == 2 else SLICE_SHARES[i] for i in range(slices)
    ]
    inside = np.ones(reps, dtype=bool)
    shown = []
    for shares in table:
        counts = joint_counts(mechanism, shares, n, reps, rng)
        low, high = share_interval(mechanism, counts, np.full((reps, k), float(n)), alpha)
        low, high = unit_interval(low, high)
        f = np.array(shares)
        inside &= ((low <= f) & (f <= high)).all(axis=1)
        shown.append((f, low, high))
    (f1, low1, high1), (f2, low2, high2) = shown[0], shown[1]
    low, high = interval_difference((low1, high1), (low2, high2))
    truth = f1 - f2
    differences = ((low <= truth) & (truth <= high)).all(axis=1)
    return float(inside.mean()), float(differences.mean())


def periods_cell(
    mechanism: Mechanism,
    n: int,
    scenario: str,
    memo: str,
    participation: np.ndarray,
    reps: int,
    rng: np.random.Generator,
) -> tuple[float, float | None]:
    """(joint difference coverage bound, false "changed" rate bound or None if it changed)."""
    alpha = ALPHA / mechanism.k
    miss, false_changed = 0.0, 0.0
    for f in rows_of(mechanism, SHARES):
        windows = simulate(mechanism, f, n, scenario, memo, participation, reps, rng)
        a = pool(mechanism, windows.n_a, windows.counts_a, alpha, "overlap-safe")
        b = pool(mechanism, windows.n_b, windows.counts_b, alpha, "overlap-safe")
        low, high = interval_difference((a.low[:, 0], a.high[:, 0]), (b.low[:, 0], b.high[:, 0]))
        point = a.estimate[:, 0] - b.estimate[:, 0]
        low, high = np.minimum(low, point), np.maximum(high, point)
        truth = windows.truth_a - windows.truth_b
        miss += float(np.mean((low > truth) | (high < truth)))
        false_changed += float(np.mean((low > 0) | (high < 0)))
    nothing = scenario in ("same", "disjoint")
    return 1 - miss, false_changed if nothing else None


def _sums_of(
    mechanism: NumericMechanism, t: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(sum y, sum y^2) per replicate of devices counts[r, j] at t[j] (counts: reps x values)."""
    reps = counts.shape[0]
    if isinstance(mechanism, Duchi):
        c1 = mechanism.bound
        plus = sum(
            rng.binomial(counts[:, j], mechanism.plus_probability(float(v)))
            for j, v in enumerate(t)
        )
        n = counts.sum(axis=1)
        return c1 * (2 * plus - n), n * c1 * c1
    if counts.sum(axis=1).max() <= 10_000:
        total, squares = np.zeros(reps), np.zeros(reps)
        for r in range(reps):
            y = payloads(mechanism, np.repeat(t, counts[r]), rng)
            total[r], squares[r] = y.sum(), (y * y).sum()
        return total, squares
    from testkit.numeric_draws import CHOLESKY

    total, squares = np.zeros(reps), np.zeros(reps)
    for j, v in enumerate(t):
        starts, widths, probs = segments(mechanism, float(v))
        cells = np.stack([rng.multinomial(m, probs / probs.sum()) for m in counts[:, j]]).astype(
            np.float64
        )
        normal = rng.standard_normal((reps, len(starts), 2)) @ CHOLESKY.T
        u1 = cells / 2 + np.sqrt(cells) * normal[..., 0]
        u2 = cells / 3 + np.sqrt(cells) * normal[..., 1]
        total += (cells * starts + widths * u1).sum(axis=1)
        squares += (cells * starts**2 + 2 * starts * widths * u1 + widths**2 * u2).sum(axis=1)
    return total, squares


def _moved(scenario: str) -> np.ndarray:
    """P(t index in A, t index in B): a 3 x 3 matrix over POPULATION's values."""
    probs = POPULATION[1]
    if scenario == "same":
        return np.diag(probs)
    if scenario == "toggle":  # t' = -t at the bounds: -1 <-> 1; 0.2 stays
        matrix = np.zeros((3, 3))
        matrix[0, 2], matrix[2, 0], matrix[1, 1] = probs[0], probs[2], probs[1]
        return matrix
    matrix = np.diag(probs)  # change: a fifth of the devices at -1 move to +1
    matrix[0, 0], matrix[0, 2] = 0.8 * probs[0], 0.2 * probs[0]
    return matrix


def means_cell(
    mechanism: NumericMechanism,
    n: int,
    scenario: str,
    memo: str,
    reps: int,
    rng: np.random.Generator,
) -> tuple[float, float | None]:
    """(coverage, false "changed" rate or None) of the difference of means, one period each."""
    values, _ = POPULATION
    if scenario == "disjoint":
        groups_a = rng.multinomial(n, POPULATION[1], size=reps)
        groups_b = rng.multinomial(n, POPULATION[1], size=reps)
        sums_a = _sums_of(mechanism, values, groups_a, rng)
        sums_b = _sums_of(mechanism, values, groups_b, rng)
        truth = 0.0
    else:
        moved = _moved(scenario)
        pairs = rng.multinomial(n, moved.ravel(), size=reps).reshape(reps, 3, 3)
        truth = float(values @ moved.sum(axis=1) - values @ moved.sum(axis=0))
        if memo == "permanent":  # unchanged values repeat their payload: drawn once
            kept = np.stack([pairs[:, j, j] for j in range(3)], axis=1)
            moved_a = pairs.sum(axis=2) - kept
            moved_b = pairs.sum(axis=1) - kept
            shared = _sums_of(mechanism, values, kept, rng)
            own_a = _sums_of(mechanism, values, moved_a, rng)
            own_b = _sums_of(mechanism, values, moved_b, rng)
            sums_a = (shared[0] + own_a[0], shared[1] + own_a[1])
            sums_b = (shared[0] + own_b[0], shared[1] + own_b[1])
        else:
            sums_a = _sums_of(mechanism, values, pairs.sum(axis=2), rng)
            sums_b = _sums_of(mechanism, values, pairs.sum(axis=1), rng)
    ns = np.full((reps, 1), float(n))
    a = pooled_interval(
        mechanism, ns, sums_a[0][:, None], sums_a[1][:, None], 1 - ALPHA, "overlap-safe"
    )
    b = pooled_interval(
        mechanism, ns, sums_b[0][:, None], sums_b[1][:, None], 1 - ALPHA, "overlap-safe"
    )
    low, high = interval_difference((a[2], a[3]), (b[2], b[3]))
    point = np.clip(a[0], -1, 1) - np.clip(b[0], -1, 1)
    low, high = np.minimum(low, point), np.maximum(high, point)
    coverage = float(np.mean((low <= truth) & (truth <= high)))
    changed = float(np.mean((low > 0) | (high < 0)))
    return coverage, changed if truth == 0.0 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="n up to 10,000 only")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sizes = SIZES[:3] if args.quick else SIZES
    began = time.perf_counter()
    worst: list[tuple[float, str]] = []
    worst_false: list[tuple[float, str]] = []

    print(
        "## 1. Slices: S = 4 slices, joint coverage bound of the 4k slice intervals | of the k slice differences"
    )
    print(f"| mechanism | eps | {' | '.join(f'n={n:,}' for n in sizes)} |")
    print("|---|---|" + "---|" * len(sizes))
    for eps in EPSILONS:
        for mechanism in mechanisms(eps):
            cells = []
            for n in sizes:
                joint, diff = slices_cell(mechanism, n, args.reps, rng)
                worst += [
                    (joint, f"slices {mechanism.name} eps {eps} n {n}"),
                    (diff, f"slice diff {mechanism.name} eps {eps} n {n}"),
                ]
                cells.append(f"{joint:.3f} / {diff:.3f}")
            print(f"| {mechanism.name} | {eps:g} | {' | '.join(cells)} |")

    print(
        "\n## 1b. Slices, measured joint coverage (krr, brr, oue: exact joint counts):"
        " all 4k slice intervals | all k slice differences"
    )
    print(f"| mechanism | eps | {' | '.join(f'n={n:,}' for n in sizes)} |")
    print("|---|---|" + "---|" * len(sizes))
    for eps in EPSILONS:
        for mechanism in mechanisms(eps)[:3]:
            cells = []
            for n in sizes:
                joint, diff = joint_slices_cell(mechanism, n, args.reps, rng)
                where = f"{mechanism.name} eps {eps} n {n}"
                worst += [(joint, f"joint slices {where}"), (diff, f"joint slice diff {where}")]
                cells.append(f"{joint:.3f} / {diff:.3f}")
            print(f"| {mechanism.name} | {eps:g} | {' | '.join(cells)} |", flush=True)

    print(
        "\n## 2. Periods: window A - window B, joint coverage bound over the k rows (false 'changed' rate bound where nothing changed)"
    )
    print(
        f"| mechanism | eps | windows | scenario | memo | {' | '.join(f'n={n:,}' for n in sizes)} |"
    )
    print("|---|---|---|---|---|" + "---|" * len(sizes))
    for eps in EPSILONS:
        for mechanism in mechanisms(eps):
            memos = (
                ("fresh", "permanent", "two-layer")
                if isinstance(mechanism, KRR)
                else ("fresh", "permanent")
            )
            for label, participation in (("day", DAY), ("week", WEEK)):
                for scenario in ("same", "toggle", "change", "disjoint"):
                    for memo in memos:
                        cells = []
                        for n in sizes:
                            covered, changed = periods_cell(
                                mechanism, n, scenario, memo, participation, args.reps, rng
                            )
                            where = f"periods {mechanism.name} eps {eps} {label} {scenario} {memo} n {n}"
                            worst.append((covered, where))
                            text = f"{covered:.3f}"
                            if changed is not None:
                                worst_false.append((changed, where))
                                text += f" ({changed:.3f})"
                            cells.append(text)
                        print(
                            f"| {mechanism.name} | {eps:g} | {label} | {scenario} | {memo} | {' | '.join(cells)} |"
                        )

    print(
        "\n## 3. Means: window A - window B (one period each), coverage (false 'changed' rate where nothing changed)"
    )
    print(f"| mechanism | eps | scenario | memo | {' | '.join(f'n={n:,}' for n in sizes)} |")
    print("|---|---|---|---|" + "---|" * len(sizes))
    for eps in EPSILONS:
        for name in ("duchi", "pm", "hybrid"):
            mechanism = make_numeric_mechanism(name, eps)
            for scenario in ("same", "toggle", "change", "disjoint"):
                for memo in ("fresh", "permanent") if scenario != "disjoint" else ("fresh",):
                    cells = []
                    for n in sizes:
                        reps = (
                            args.reps
                            if (isinstance(mechanism, Duchi) or n <= 1_000)
                            else max(200, args.reps // 10)
                        )
                        covered, changed = means_cell(mechanism, n, scenario, memo, reps, rng)
                        where = f"means {name} eps {eps} {scenario} {memo} n {n} ({reps} reps)"
                        worst.append((covered, where))
                        text = f"{covered:.3f}"
                        if changed is not None:
                            worst_false.append((changed, where))
                            text += f" ({changed:.3f})"
                        cells.append(text)
                    print(
                        f"| {name} | {eps:g} | {scenario} | {memo} | {' | '.join(cells)} |",
                        flush=True,
                    )

    low = min(worst)
    high = max(worst_false)
    print(
        f"\nlowest coverage {low[0]:.3f} ({low[1]}); highest false 'changed' rate {high[0]:.3f} ({high[1]})"
    )
    print(
        f"{len(worst)} coverage cells, {args.reps} replicates each (fewer where noted), {time.perf_counter() - began:.0f} s"
    )
    return 0 if low[0] >= FLOOR and high[0] <= ALPHA else 1


if __name__ == "__main__":
    sys.exit(main())
