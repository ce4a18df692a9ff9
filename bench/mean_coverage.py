"""Coverage of the numeric mean's 95% interval (STATS.md section 10) over mechanisms, eps and n.

For duchi, pm and hybrid at eps 0.25-8 and n 10 to 100,000 it simulates M replicates of a
period's sufficient statistics (n, sum y, sum y^2) with the mechanisms' randomizers
vectorized in numpy (testkit/numeric_draws.py: report by report up to 2,000 reports,
exact segment counts with normal uniform sums above), computes the interval the product
shows (``estimators.numeric``) and prints the share of replicates whose interval contains
the truth, for two populations on the [-1, 1] axis:

* ``bound``: 5% of the devices at the upper bound (t = 1), the rest at the lower (t = -1);
  rare mass at a bound is what a sample of a few dozen misses;
* ``skewed``: a lognormal(0, 1) on [0, 10] in value units, clamped (1% at the upper bound),
  on a grid of 33 points;

and two estimands:

* ``fixed``: the n devices are the population (their mean is the truth; only the
  randomization varies);
* ``iid``: each replicate draws its n devices from the population (the truth is the
  population's mean), the estimand STATS.md uses for shares and section 10 for means.

Each cell's coverage has a standard error of about sqrt(0.95 * 0.05 / M) (0.0022 at
M = 10,000), so over the 432 cells the lowest of intervals that truly cover 95% is expected
near 0.95 - 3.2 SE (0.943 at M = 10,000). A second table gives, per cell, the mean half-width over
z * SD(t_hat), the half-width of a Wald interval that knew the true variance.
Exit status 1 if any cell covers less than 0.94.

    .venv/bin/python -m bench.mean_coverage [--replicates 10000] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from scipy import stats

from deniable.client.mechanisms import Duchi, NumericMechanism, make_numeric_mechanism
from deniable.estimators.numeric import axis_interval, pooled_interval
from testkit.numeric_draws import CHOLESKY, EXACT_UP_TO, payloads, period_sums, segments

MECHANISMS = ("duchi", "pm", "hybrid")
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
SIZES = (10, 20, 50, 200, 1_000, 100_000)
POPULATIONS = ("bound", "skewed")
SAMPLINGS = ("fixed", "iid")
FLOOR = 0.94
Z = 1.959963984540054


def population(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(distinct t, probabilities) of a population on the [-1, 1] axis."""
    if kind == "bound":
        return np.array([-1.0, 1.0]), np.array([0.95, 0.05])
    grid = np.linspace(-1.0, 1.0, 33)
    x = (grid + 1) / 2 * 10
    edges = np.concatenate([[0.0], (x[1:] + x[:-1]) / 2, [np.inf]])
    return grid, np.diff(stats.lognorm.cdf(edges, 1.0))


def apportion(probs: np.ndarray, n: int) -> np.ndarray:
    """Integer counts summing to n in proportion to probs (largest remainders)."""
    counts = np.floor(probs * n).astype(np.int64)
    counts[np.argsort(-(probs * n - counts))[: n - counts.sum()]] += 1
    return counts


def iid_sums(
    mech: NumericMechanism,
    values: np.ndarray,
    probs: np.ndarray,
    n: int,
    reps: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """(sum y, sum y^2) of n devices drawn iid from the population, per replicate."""
    if isinstance(mech, Duchi):  # each payload is +C1 with the population's mean probability
        plus = rng.binomial(n, float(np.sum(probs * mech.plus_probability(values))), size=reps)  # type: ignore[arg-type]
        return mech.bound * (2 * plus - n), np.full(reps, n * mech.bound**2)
    if n <= EXACT_UP_TO:
        total, squares = np.zeros(reps), np.zeros(reps)
        chunk = max(1, 2_000_000 // n)
        for start in range(0, reps, chunk):
            stop = min(reps, start + chunk)
            t = rng.choice(values, p=probs, size=(stop - start, n))
            y = payloads(mech, t, rng)
            total[start:stop] = y.sum(axis=1)
            squares[start:stop] = (y * y).sum(axis=1)
        return total, squares
    parts = [segments(mech, float(v)) for v in values]
    starts = np.concatenate([p[0] for p in parts])
    widths = np.concatenate([p[1] for p in parts])
    cell = np.concatenate([w * p[2] / p[2].sum() for w, p in zip(probs, parts, strict=True)])
    cells = rng.multinomial(n, cell / cell.sum(), size=reps).astype(np.float64)
    normal = rng.standard_normal((reps, len(starts), 2)) @ CHOLESKY.T
    u1 = cells / 2 + np.sqrt(cells) * normal[..., 0]
    u2 = cells / 3 + np.sqrt(cells) * normal[..., 1]
    total = (cells * starts + widths * u1).sum(axis=1)
    squares = (cells * starts**2 + 2 * starts * widths * u1 + widths**2 * u2).sum(axis=1)
    return total, squares


def cell(
    mech: NumericMechanism, kind: str, sampling: str, n: int, reps: int, rng: np.random.Generator
) -> tuple[float, float]:
    """(coverage, mean half-width over z * SD(t_hat)) of one configuration."""
    values, probs = population(kind)
    variance = np.array([mech.variance(float(v)) for v in values])
    if sampling == "fixed":
        counts = apportion(probs, n)
        truth = float(np.sum(values * counts)) / n
        sd = float(np.sqrt(np.sum(counts * variance))) / n
        total, squares = period_sums(mech, values, counts, reps, rng)
    else:
        truth = float(np.sum(values * probs))
        spread = float(np.sum(probs * (values - truth) ** 2))
        sd = float(np.sqrt((np.sum(probs * variance) + spread) / n))
        total, squares = iid_sums(mech, values, probs, n, reps, rng)
    _, _, low, high = pooled_interval(
        mech, np.full((reps, 1), n), total[:, None], squares[:, None], 0.95, "overlap-safe"
    )
    shown_low, shown_high = axis_interval(low, high)
    coverage = float(np.mean((shown_low <= truth) & (truth <= shown_high)))
    return coverage, float(np.mean((high - low) / 2)) / (Z * sd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    rows: list[tuple[str, list[tuple[float, float]]]] = []
    for name in MECHANISMS:
        for eps in EPSILONS:
            mech = make_numeric_mechanism(name, eps)
            for kind in POPULATIONS:
                for sampling in SAMPLINGS:
                    label = f"{name:<7}{eps:>5g} {kind:<7}{sampling:<6}"
                    rows.append(
                        (
                            label,
                            [cell(mech, kind, sampling, n, args.replicates, rng) for n in SIZES],
                        )
                    )
    header = f"{'mech':<7}{'eps':>5} {'pop':<7}{'est':<6}" + "".join(f"{n:>9,}" for n in SIZES)
    print(f"coverage of the 95% interval, M = {args.replicates:,} replicates per cell")
    print(header)
    for label, cells in rows:
        print(label + "".join(f"{c:>9.4f}" for c, _ in cells))
    print("\nmean half-width / (z * true SD of the mean)")
    print(header)
    for label, cells in rows:
        print(label + "".join(f"{w:>9.3f}" for _, w in cells))
    worst = min(
        (c, label, n) for label, cells in rows for n, (c, _) in zip(SIZES, cells, strict=True)
    )
    print(f"\nminimum coverage {worst[0]:.4f} at {worst[1].strip()} n={worst[2]:,}")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if worst[0] >= FLOOR else 1


if __name__ == "__main__":
    sys.exit(main())
