"""The shuffle accountant beside shared STATS.md §12's reference table, and how long it takes.

For each (eps0, n) at delta 1e-6: FMT21's closed form, FMT21's numerical bound with Apple's
stopping rule (what §12's FMT21num column reports) and summed in full (the guarantee the
product states), the strong clone, and the exact lower bound, each as ours / §12's. Then the
k-RR pair-clone bound at §13's values, and the seconds per call (cold: the cache cleared) for the bound
each mechanism gets, at n up to 1e6.

    .venv/bin/python -m bench.shuffle_accountant
"""

from __future__ import annotations

import time

from deniable.client.mechanisms import BRR, KRR, OUE, Duchi
from deniable.estimators import shuffling
from deniable.estimators.shuffling import (
    central_guarantee,
    fmt21_closed_form_epsilon,
    fmt21_numerical_epsilon,
    krr_epsilon,
    lower_bound_epsilon,
    strong_clone_epsilon,
)
from testkit.shuffle_reference import KRR_REFERENCE, REFERENCE


def cold(call):
    """``call()``'s value, wall seconds and CPU seconds (the machine may be shared: CPU time
    is the call's own cost), with the accountant's caches cleared first."""
    shuffling._pair_epsilon.cache_clear()
    shuffling.lower_bound_epsilon.cache_clear()
    start, cpu = time.perf_counter(), time.process_time()
    value = call()
    return value, time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    print("delta = 1e-6; each cell: ours / §12's")
    heads = ("eps0", "n", "FMT21cf", "FMT21num (Apple's rule)", "FMT21 full (guarantee)")
    heads += ("strong clone", "lower bound")
    print(" | ".join(f"{h:>24}" if i > 1 else f"{h:>8}" for i, h in enumerate(heads)))
    for eps0, n, cf, num, sc, lb in REFERENCE:
        closed = fmt21_closed_form_epsilon(eps0, n)
        cells = [
            f"{'invalid' if closed is None else f'{closed:.4f}'} / {cf or 'invalid'}",
            f"{fmt21_numerical_epsilon(eps0, n, apple_stop=True):.4f} / {num}",
            f"{fmt21_numerical_epsilon(eps0, n):.4f} / —",
            f"{strong_clone_epsilon(eps0, n):.4f} / {sc}",
            f"{lower_bound_epsilon(eps0, n):.4f} / {lb}",
        ]
        print(f"{eps0:>8} | {n:>8.0e} | " + " | ".join(f"{c:>24}" for c in cells))
    print()
    print("k-RR pair-clone bound, ours / §13's (bench.shuffle_exact: against the exact values)")
    for k, eps0, n, printed in KRR_REFERENCE:
        print(f"  k={k:<4} eps0={eps0} n={n:.0e}: {krr_epsilon(eps0, k, n):.4f} / {printed}")
    print()
    print("seconds per call, cache cleared (the bound each mechanism gets)")
    for mechanism in (BRR(2, 1.0), KRR(10, 1.0), OUE(10, 1.0), Duchi(1.0), OUE(10, 4.0)):
        for n in (10**4, 10**5, 10**6):
            guarantee, wall, cpu = cold(lambda m=mechanism, n=n: central_guarantee(m, n))
            print(
                f"  {mechanism.name:>5} eps0={mechanism.epsilon:g} n={n:.0e}:"
                f" eps {guarantee.epsilon:.4f} ({guarantee.bound}) in {wall:.3f} s"
                f" ({cpu:.3f} s CPU)"
            )


if __name__ == "__main__":
    main()
