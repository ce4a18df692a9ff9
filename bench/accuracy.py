"""Accuracy of every mechanism over a grid of k and eps: empirical vs theoretical variance, and efficiency.

For each (k, eps, mechanism) it simulates R replicates of the sufficient statistics of n reports
(true values drawn from a Zipf share vector; each class's reports randomized with the
mechanism's p*, q*) and prints, averaged over categories, the empirical variance of the unbiased
estimate over the theoretical one, for the super-population (lam(1-lam)/(n(p*-q*)^2)) and the
fixed-population (``Mechanism.variance``) estimands; then V* and V*/V_opt, where V_opt is the
best subset-selection constant (STATS.md section 5). ``*`` marks the advisor's choice.

With ``--numeric`` it prints instead, for eps 0.25-8, the empirical variance of the mean of n
numeric reports (R seeded replicates, simulated as sufficient statistics,
testkit/numeric_draws.py) for duchi, pm and hybrid on a skewed population, against
sum Var(y | t_i)/n^2 (the population's formula), and again on a population all at each
mechanism's worst t (0 or 1, whichever has the larger variance) against its worst-case variance; ``*`` marks
``auto``'s pick (least worst-case variance), whose worst-case empirical variance must be at
most 1.05 times the best of the three at every eps (exit status 1 otherwise). On a given
population the pick need not be the best: its figures are shown beside it (emp/best).

    .venv/bin/python -m bench.accuracy [--reports 10000] [--replicates 2000] [--numeric]
"""

from __future__ import annotations

import argparse

import numpy as np

from deniable.client.mechanisms import (
    BRR,
    KRR,
    NUMERIC_MECHANISMS,
    OLH,
    OUE,
    Mechanism,
    least_variance,
    least_worst_case_variance,
    make_numeric_mechanism,
)
from deniable.estimators import v_opt
from deniable.estimators.pooling import debias


def simulate(mechanism: Mechanism, sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Support counts for class sizes (R, k)."""
    k, p, q = mechanism.k, mechanism.p_star, mechanism.q_star
    n = sizes.sum(axis=1, keepdims=True)
    if isinstance(mechanism, KRR):
        counts = np.zeros_like(sizes)
        for x in range(k):
            row = np.where(np.arange(k) == x, p, q)
            counts += rng.multinomial(sizes[:, x], row / row.sum())
        return counts
    return rng.binomial(sizes, p) + rng.binomial(n - sizes, q)


def mechanisms(k: int, eps: float) -> list[Mechanism]:
    out: list[Mechanism] = [BRR(2, eps)] if k == 2 else []
    out += [KRR(k, eps), OUE(k, eps), OLH(k, eps)]
    return out


NUMERIC_EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
AUTO_SLACK = 1.05
"""auto's pick may have at most this times the least empirical variance of the three."""


def numeric_population(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A skewed fixed population on 33 grid points of [-1, 1]: lognormal(0, 1) on [0, 10], clamped."""
    from scipy import stats

    grid = np.linspace(-1.0, 1.0, 33)
    x = (grid + 1) * 5
    edges = np.concatenate([[0.0], (x[1:] + x[:-1]) / 2, [np.inf]])
    weights = np.diff(stats.lognorm.cdf(edges, 1.0))
    counts = np.floor(weights * n).astype(np.int64)
    counts[np.argsort(-(weights * n - counts))[: n - counts.sum()]] += 1
    return grid, counts


def numeric_table(n: int, reps: int, rng: np.random.Generator) -> bool:
    """Print the numeric mechanisms' variance of the mean; return whether auto's pick was
    within :data:`AUTO_SLACK` of the best at every eps."""
    from testkit.numeric_draws import period_sums

    values, counts = numeric_population(n)
    print(f"numeric mean: n = {n:,} reports, {reps:,} replicates, skewed population")
    print(
        f"{'eps':>5}  {'mechanism':<10}{'n Var emp':>12}{'n Var pop':>12}{'emp/pop':>9}"
        f"{'emp/best':>9}{'n Var worst':>13}{'emp worst':>11}{'ratio':>7}{'worst/best':>11}"
    )
    ok = True
    for eps in NUMERIC_EPSILONS:
        pick = least_worst_case_variance(eps)
        rows = []
        for name in NUMERIC_MECHANISMS:
            mech = make_numeric_mechanism(name, eps)
            total, _ = period_sums(mech, values, counts, reps, rng)
            empirical = float(np.var(total / n, ddof=1)) * n
            population = float(np.sum(counts * mech.variance(values))) / n  # type: ignore[arg-type]
            worst_t = 0.0 if mech.variance(0.0) >= mech.variance(1.0) else 1.0
            total, _ = period_sums(mech, np.array([worst_t]), np.array([n]), reps, rng)
            worst_empirical = float(np.var(total / n, ddof=1)) * n
            rows.append((name, empirical, population, mech.worst_case_variance, worst_empirical))
        best = min(r[1] for r in rows)
        best_worst = min(r[4] for r in rows)
        for name, empirical, population, worst, worst_empirical in rows:
            mark = "*" if name == pick else " "
            print(
                f"{eps:>5.2f}  {name + mark:<10}{empirical:>12.4g}{population:>12.4g}"
                f"{empirical / population:>9.3f}{empirical / best:>9.3f}{worst:>13.4g}"
                f"{worst_empirical:>11.4g}{worst_empirical / worst:>7.3f}"
                f"{worst_empirical / best_worst:>11.3f}"
            )
        picked = next(r[4] for r in rows if r[0] == pick)
        ok &= picked <= AUTO_SLACK * best_worst
    print(
        f"auto's pick within {AUTO_SLACK} x the best worst-case variance at every eps:"
        f" {'yes' if ok else 'NO'}"
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--replicates", type=int, default=2_000)
    parser.add_argument("--numeric", action="store_true", help="the numeric mechanisms' table")
    args = parser.parse_args()
    n, reps = args.reports, args.replicates
    if args.numeric:
        raise SystemExit(0 if numeric_table(n, reps, np.random.default_rng(2026)) else 1)
    rng = np.random.default_rng(2026)
    print(f"n = {n:,} reports, {reps:,} replicates; variance ratios are empirical / theoretical")
    print(
        f"{'k':>4} {'eps':>5}  {'mechanism':<10}{'SP ratio':>10}{'FP ratio':>10}{'V*':>10}{'V*/V_opt':>10}"
    )
    for k in (2, 4, 16, 64):
        for eps in (0.5, 1.0, 2.0, 4.0):
            best = v_opt(k, eps)
            choice = least_variance(k, eps)
            f = 1 / np.arange(1, k + 1)
            f /= f.sum()
            fixed = np.floor(n * f).astype(np.int64)
            fixed[0] += n - fixed.sum()
            for mechanism in mechanisms(k, eps):
                p, q = mechanism.p_star, mechanism.q_star
                sp = debias(
                    mechanism, simulate(mechanism, rng.multinomial(n, f, size=reps), rng), n
                )
                lam = q + (p - q) * f
                sp_ratio = np.mean(sp.var(axis=0, ddof=1) / (lam * (1 - lam) / (n * (p - q) ** 2)))
                fp = debias(mechanism, simulate(mechanism, np.tile(fixed, (reps, 1)), rng), n)
                theory = np.array([mechanism.variance(float(v), n) for v in fixed / n])
                fp_ratio = np.mean(fp.var(axis=0, ddof=1) / theory)
                mark = "*" if mechanism.name == choice else " "
                print(
                    f"{k:>4} {eps:>5.1f}  {mechanism.name + mark:<10}{sp_ratio:>10.3f}{fp_ratio:>10.3f}"
                    f"{mechanism.v_star:>10.4g}{mechanism.v_star / best:>10.3f}"
                )


if __name__ == "__main__":
    main()
