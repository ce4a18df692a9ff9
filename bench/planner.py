"""The planner before and after issue 23: what the old Wald plans delivered with the product's
own interval, and what the plans are now.

Shares: the old plan was the Wald n, z sqrt(max lam(1-lam)) / ((p*-q*) sqrt n) <= margin; the
product's interval (Wilson, hulled with Clopper-Pearson at small counts) at that n and the
worst-case count can be wider. Means: the old plan used the mechanism's noise only,
z sqrt(max_t Var(y | t)) (upper - lower)/2 / sqrt n; the product's interval at that n for half
the population at each end of the range also holds the spread of the values.

    .venv/bin/python -m bench.planner
"""

from __future__ import annotations

import math

from deniable.client.mechanisms import NUMERIC_MECHANISMS, make_mechanism, make_numeric_mechanism
from deniable.estimators.advisor import (
    _worst_spread,
    candidate_mechanisms,
    margin_of_error,
    mean_margin,
    mean_reports_needed,
    reports_needed,
)
from deniable.estimators.intervals import z_value

SHARE_CASES = [
    (5, 1.0, 0.02),
    (10, 1.0, 0.01),
    (30, 8.0, 0.1),
    (2, 4.0, 0.05),
    (100, 2.0, 0.02),
    (200, 1.0, 0.05),
]
NUMERIC_CASES = [(0.0, 1000.0, 8.0, 50.0), (0.0, 5000.0, 1.0, 50.0), (0.0, 1.0, 4.0, 0.01)]


def wald_n(k: int, epsilon: float, margin: float, name: str, simultaneous: bool) -> int:
    """The old plan: the least n with the Wald worst-case margin within ``margin``."""
    z = z_value(0.95, k, simultaneous)
    return math.ceil((z * _worst_spread(make_mechanism(name, k, epsilon)) / margin) ** 2)


def shares() -> None:
    print("shares, 95%: Wald n (old), the product's half-width there, and the plan now")
    print(f"{'k':>4} {'eps':>4} {'margin':>7} {'mech':>4} {'intervals':>13} {'Wald n':>9}"
          f" {'at Wald n':>10} {'plan n':>9} {'at plan n':>10}")  # fmt: skip
    for k, epsilon, margin in SHARE_CASES:
        for name in candidate_mechanisms(k):
            for simultaneous in (False, True):
                old = wald_n(k, epsilon, margin, name, simultaneous)
                new = reports_needed(k, epsilon, margin, 0.95, name, simultaneous)
                at_old = margin_of_error(k, epsilon, old, 0.95, name, simultaneous)
                at_new = margin_of_error(k, epsilon, new, 0.95, name, simultaneous)
                kind = "all at once" if simultaneous else "each category"
                print(f"{k:>4} {epsilon:>4g} {margin:>7g} {name:>4} {kind:>13} {old:>9,}"
                      f" {at_old:>10.5f} {new:>9,} {at_new:>10.5f}")  # fmt: skip


def means() -> None:
    print()
    print("means, 95%, half the values at each end: old n (noise only), the product's margin"
          " there, and the plan now")  # fmt: skip
    print(f"{'range':>12} {'eps':>4} {'margin':>7} {'mech':>6} {'old n':>8} {'at old n':>9}"
          f" {'plan n':>8} {'at plan n':>9}")  # fmt: skip
    for lower, upper, epsilon, margin in NUMERIC_CASES:
        for name in NUMERIC_MECHANISMS:
            mech = make_numeric_mechanism(name, epsilon)
            z = z_value(0.95, 1, False)
            spread = z * math.sqrt(mech.worst_case_variance) * (upper - lower) / 2
            old = math.ceil((spread / margin) ** 2)
            new = mean_reports_needed(lower, upper, epsilon, margin, mechanism=name)
            at_old = mean_margin(lower, upper, epsilon, old, mechanism=name)
            at_new = mean_margin(lower, upper, epsilon, new, mechanism=name)
            span = f"[{lower:g}, {upper:g}]"
            print(f"{span:>12} {epsilon:>4g} {margin:>7g} {name:>6} {old:>8,} {at_old:>9.4g}"
                  f" {new:>8,} {at_new:>9.4g}")  # fmt: skip


if __name__ == "__main__":
    shares()
    means()
