"""Accuracy of every mechanism over a grid of k and eps: empirical vs theoretical variance, and efficiency.

For each (k, eps, mechanism) it simulates R replicates of the sufficient statistics of n reports
(true values drawn from a Zipf share vector; each class's reports randomized with the
mechanism's p*, q*) and prints, averaged over categories, the empirical variance of the unbiased
estimate over the theoretical one, for the super-population (lam(1-lam)/(n(p*-q*)^2)) and the
fixed-population (``Mechanism.variance``) estimands; then V* and V*/V_opt, where V_opt is the
best subset-selection constant (STATS.md section 5). ``*`` marks the advisor's choice.

    .venv/bin/python -m bench.accuracy [--reports 10000] [--replicates 2000]
"""

from __future__ import annotations

import argparse

import numpy as np
from deniable.client.mechanisms import BRR, KRR, OLH, OUE, Mechanism, least_variance
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--replicates", type=int, default=2_000)
    args = parser.parse_args()
    n, reps = args.reports, args.replicates
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
