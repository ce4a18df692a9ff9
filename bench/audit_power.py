"""The auditor's power at its CI sample size, from the normal approximation (docs/audit.md).

For the event that decides each case, with probabilities p_a under x and p_b under x', the
audited bound is about log(p_a/p_b) - z_B (s_a + s_b), s = sqrt((1 - p)/(n p)), with z_B the
one-sided quantile at (1 - confidence) / (2 x cells) for the family's cells (x, event); its
standard deviation is sqrt(s_a^2 + s_b^2). A count that is surely 0 (p_b = 0) has the exact
upper bound 1 - alpha^(1/n) and no spread, as a count surely n has the lower bound
alpha^(1/n). Every number here is computed, none sampled.

Run: ``python -m bench.audit_power``.
"""

from __future__ import annotations

import math

from scipy import stats

from deniable.client import MetricSpec
from deniable.estimators.audit import (
    DEFAULT_CONFIDENCE,
    DEFAULT_REPORTS,
    audit_inputs,
    event_family,
)

EPS = 1.0
E = math.exp(EPS)


def cells(spec: MetricSpec) -> int:
    """The number of (input, event) counts the spec's audit bounds."""
    return sum(len(inputs) for inputs in event_family(spec).support)


def row(name: str, spec: MetricSpec, p_a: float, p_b: float) -> str:
    """One case: true log-ratio, expected bound, its SD, and z against the claimed eps."""
    n = DEFAULT_REPORTS // len(audit_inputs(spec))
    alpha = (1 - DEFAULT_CONFIDENCE) / (2 * cells(spec))
    z_b = stats.norm.isf(alpha)
    s_a = math.sqrt((1 - p_a) / (n * p_a))
    if p_b == 0:
        low_a = alpha ** (1 / n) if p_a == 1 else p_a * math.exp(-z_b * s_a)
        expected = math.log(low_a) - math.log(1 - alpha ** (1 / n))
        true, sd = math.inf, s_a
    else:
        s_b = math.sqrt((1 - p_b) / (n * p_b))
        true = math.log(p_a / p_b)
        expected, sd = true - z_b * (s_a + s_b), math.hypot(s_a, s_b)
    z = f"{(expected - EPS) / sd:+.1f}" if sd > 0 else "sure"
    return (
        f"| {name} | {n:,} | {cells(spec)} | {z_b:.2f} | {true:.3f} | {expected:.3f} |"
        f" {sd:.4f} | {z} |"
    )


def main() -> None:
    five = ("a", "b", "c", "d", "e")
    brr = MetricSpec.boolean("b", epsilon=EPS)
    krr = MetricSpec.categorical("k", five, epsilon=EPS, mechanism="krr")
    oue = MetricSpec.categorical("o", five, epsilon=EPS, mechanism="oue")
    olh = MetricSpec.categorical("h", five, epsilon=EPS, mechanism="olh")
    pm = MetricSpec.numeric("p", lower=0, upper=10, epsilon=EPS, mechanism="pm")
    p_brr, q_oue = E / (E + 1), 1 / (E + 1)
    s = math.exp(EPS / 2)
    c = (s + 1) / (s - 1)
    g = round(E) + 1
    p_olh = E / (E + g - 1)
    leak = 0.1 + 0.9 * p_olh
    # pm wrong for interior t: window probability e/(e+1); gap of t = -1/2 against t' = +1/2
    gap = min(c - 1, (c + 1) / 2)
    high, low = E / (E + 1) / (c - 1), 1 / (E + 1) / (c + 1)
    print("| case | n per input | cells | z_B | true | E[bound] | SD | z vs eps |")
    print("|---|---|---|---|---|---|---|---|")
    for line in (
        row("brr, real", brr, p_brr, 1 - p_brr),
        row("brr, p + 0.01", brr, p_brr + 0.01, 1 - p_brr - 0.01),
        row("krr k = 5, real", krr, E / (E + 4), 1 / (E + 4)),
        row("krr, keep probability for 2 eps", krr, E**2 / (E**2 + 4), 1 / (E**2 + 4)),
        row("oue k = 5, real", oue, 0.5 * (1 - q_oue), q_oue * 0.5),
        row("oue, middle bit never flipped: {bit c = 1}", oue, 1.0, 0.0),
        row("oue, p = 0.6", oue, 0.6 * (1 - q_oue), q_oue * 0.4),
        row(
            "olh, true bucket w.p. 0.1",
            olh,
            (1 - 1 / g) * leak,
            (1 - 1 / g) * 0.9 * (1 - p_olh) / (g - 1),
        ),
        row("pm, window probability e/(e+1)", pm, E / (E + 1), 1 / (E + 1) * (c - 1) / (c + 1)),
        row("pm, that only for interior t", pm, high * gap, low * gap),
    ):
        print(line)


if __name__ == "__main__":
    main()
