"""The published central eps of shuffled batches beside the exact eps of pairs of batches
(testkit.shuffle_exact, written apart from the accountant; shared STATS.md section 13), and
their ratio, at delta 1e-6.

For brr and k-RR (k 3, 4, 5) the exact column is the worst pair with every other device at
one value, both directions (brr: over every number m of others at 1), and at small n
(exact.COMPOSITION_SIZES: 30 for k <= 3, below this grid's 20 for k 4 and 5) the worst over
every composition of the others' values; for oue, olh, pem (OUE's bits), duchi, pm and hybrid it is the exact eps of a post-processing (a lower bound on the truth, so the
ratio overstates the slack). A ratio below 1 would be a published figure below the truth.

    .venv/bin/python -m bench.shuffle_exact            # the grid of the tests
    .venv/bin/python -m bench.shuffle_exact --quick    # n up to 300
"""

from __future__ import annotations

import argparse

from deniable.client.mechanisms import BRR, KRR, OLH, OUE, Duchi, Hybrid, Piecewise, PrefixSketch
from deniable.estimators.shuffling import central_guarantee
from testkit import shuffle_exact as exact

DELTA = 1e-6
EPS0 = [0.5, 1.0, 2.0, 4.0, 6.0, 8.0]
SIZES = [20, 30, 50, 100, 300, 1000]


def rr_exact(k: int, eps0: float, n: int) -> float:
    """The worst exact pair for brr (k 2) or k-RR at (eps0, n)."""
    if k == 2:
        worst = exact.stacked_epsilon(exact.stack(exact.brr_pairs(eps0, n, range(n))), DELTA, eps0)
    else:
        worst = exact.epsilon(exact.krr_pairs(k, eps0, n), DELTA, eps0)
    if n <= exact.COMPOSITION_SIZES[k]:
        worst = max(worst, exact.composition_epsilon(k, eps0, n, DELTA))
    return worst


OTHERS = {
    "oue": (lambda eps0: OUE(8, eps0), exact.oue_pairs),
    "olh": (lambda eps0: OLH(8, eps0), exact.olh_pairs),
    "pem": (lambda eps0: PrefixSketch(16, eps0), exact.oue_pairs),
    "duchi": (Duchi, lambda eps0, n: exact.numeric_pairs("duchi", eps0, n)),
    "pm": (Piecewise, lambda eps0, n: exact.numeric_pairs("pm", eps0, n)),
    "hybrid": (Hybrid, lambda eps0, n: exact.numeric_pairs("hybrid", eps0, n)),
}


def row(name: str, eps0: float, n: int, guarantee, truth: float) -> str:
    ratio = guarantee.epsilon / truth if truth > 0 else float("inf")
    return (
        f"| {name} | {eps0:g} | {n} | {guarantee.epsilon:.4f} | {truth:.4f} | {ratio:.3f}"
        f" | {guarantee.bound} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n up to 300 only")
    sizes = [n for n in SIZES if not parser.parse_args().quick or n <= 300]
    print("| mechanism | eps0 | n | published | exact | ratio | bound |")
    print("|---|---|---|---|---|---|---|")
    lowest = (float("inf"), "")
    for k in (2, 3, 4, 5):
        for eps0 in EPS0:
            for n in sizes:
                mechanism = BRR(2, eps0) if k == 2 else KRR(k, eps0)
                guarantee = central_guarantee(mechanism, n, DELTA)
                name = "brr" if k == 2 else f"krr k={k}"
                truth = rr_exact(k, eps0, n)
                print(row(name, eps0, n, guarantee, truth))
                lowest = min(lowest, (guarantee.epsilon / truth, f"{name} {eps0:g} {n}"))
    print()
    print("lower bounds only (a post-processing's exact eps):")
    print("| mechanism | eps0 | n | published | exact (lower bound) | ratio | bound |")
    print("|---|---|---|---|---|---|---|")
    for name, (make, pairs_of) in OTHERS.items():
        for eps0 in EPS0:
            for n in sizes:
                guarantee = central_guarantee(make(eps0), n, DELTA)
                truth = exact.epsilon(pairs_of(eps0, n), DELTA, eps0)
                print(row(name, eps0, n, guarantee, truth))
                lowest = min(lowest, (guarantee.epsilon / truth, f"{name} {eps0:g} {n}"))
    print(f"\nlowest ratio: {lowest[0]:.4f} ({lowest[1]})")


if __name__ == "__main__":
    main()
