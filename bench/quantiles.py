"""Histogram quantiles: coverage past the outer edges, olh band width, oue band at small n.

Three tables (STATS.md sections 8 and 10; issue 23 items 2, 6, 7), each from the sufficient
statistics simulated with numpy (seeded), never the full client:

* ``ends``: oue, eps 4, 10 buckets on 0..200, n = 50,000, a gamma population with 1.08% of its
  values above 200 (and its mirror, 1.08% below 0). Coverage of the p1, p50, p99 intervals and
  jointly, out of M, with the open ends (now) and with an open end read as the outer edge
  (before). Pass mark 4,691/5,000.
* ``olh``: olh, 24 buckets, n = 10,000: the band's half-width over the narrowest band of its
  shape (the same z, with the true variance under the true shares), at F^ = F, the largest
  over the inner edges, now and with the former Minkowski bound; the median interval's span in
  buckets (now, narrowest, before); and the band's simultaneous coverage, reports through the
  wire hash (n and M smaller: ``--olh-reports``).
* ``oue``: oue band coverage at small n: exact for k = 3 (every pair of support counts), and
  simulated for k = 5 and 12 at n = 50 (M replicates), the least over seven shapes, now and
  with the former band (Wald, variance plugged in at F^ clipped).

    .venv/bin/python -m bench.quantiles [--replicates 5000] [--olh-reports 2000] [--only ends]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from deniable.client.mechanisms import OLH, OLH_PRIME, OUE, Mechanism
from deniable.estimators import quantile_intervals
from deniable.estimators.cdfvariance import olh_within_matrix
from deniable.estimators.intervals import z_value
from deniable.estimators.quantiles import pooled_band, score_interval

PASS = 4_691
EDGES = tuple(float(e) for e in range(0, 201, 20))


def band(mech: Mechanism, n: int, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The simultaneous 95% band for M replicates of one period's counts (M, k)."""
    m = len(counts)
    _, low, high = pooled_band(mech, np.full((m, 1), n), counts[:, None, :], 0.95, "overlap-safe")
    return low, high


def oue_counts(mech: Mechanism, n: int, shares: np.ndarray, m: int, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    sizes = rng.multinomial(n, shares, size=m)
    return rng.binomial(sizes, mech.p_star) + rng.binomial(n - sizes, mech.q_star)


def ends(replicates: int) -> None:
    """Item 2: coverage of quantiles whose truth lies beyond an outer edge."""
    mech, n, qs = OUE(10, 4.0), 50_000, (0.01, 0.5, 0.99)
    shape = 2.0
    scale = 200.0 / stats.gamma.isf(0.0108, shape)  # P(X > 200) = 1.08%
    population = stats.gamma(shape, scale=scale)
    print(f"ends: oue eps 4, k 10 on 0..200, n {n:,}, M {replicates:,}; pass >= {PASS:,}/5,000")
    print(f"{'population':<22}{'q':>6}{'truth':>9}{'now':>8}{'before':>8}")
    for mirrored in (False, True):
        cdf = (lambda v: population.sf(200 - v)) if mirrored else population.cdf
        truth = {q: (200 - population.ppf(1 - q)) if mirrored else population.ppf(q) for q in qs}
        inner = np.array([cdf(e) for e in EDGES[1:-1]])
        shares = np.diff(np.concatenate([[0.0], inner, [1.0]]))
        rng = np.random.default_rng(23 + mirrored)
        low, high = band(mech, n, oue_counts(mech, n, shares, replicates, rng))
        now = {q: np.zeros(replicates, bool) for q in qs}
        before = {q: np.zeros(replicates, bool) for q in qs}
        for r in range(replicates):
            for got in quantile_intervals(EDGES, low[r], high[r], qs):
                t = truth[got.q]
                lo, hi = got.low, got.high
                now[got.q][r] = (lo is None or lo <= t) and (hi is None or t <= hi)
                before[got.q][r] = (
                    (EDGES[0] if lo is None else lo) <= t <= (EDGES[-1] if hi is None else hi)
                )
        name = "1.08% below 0" if mirrored else "1.08% above 200"
        for q in qs:
            print(f"{name:<22}{q:>6g}{truth[q]:>9.1f}{now[q].sum():>8}{before[q].sum():>8}")
        joint_now = np.logical_and.reduce([now[q] for q in qs]).sum()
        joint_before = np.logical_and.reduce([before[q] for q in qs]).sum()
        print(f"{name:<22}{'joint':>6}{'':>9}{joint_now:>8}{joint_before:>8}")


SHAPES_24 = {
    "uniform": np.ones(24),
    "normal": np.exp(-0.5 * ((np.arange(24) - 11.5) / 4) ** 2),
    "skewed": np.exp(-np.arange(24) / 4),
}


def olh_counts(mech: OLH, n: int, shares: np.ndarray, m: int, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    """Support counts (m, k) of n reports each, through the wire hash."""
    out = np.zeros((m, mech.k), dtype=np.int64)
    v = np.arange(mech.k, dtype=np.int64)
    for r in range(m):
        x = rng.choice(mech.k, size=n, p=shares)
        a = rng.integers(1, OLH_PRIME, n, dtype=np.int64)[:, None]
        b = rng.integers(0, OLH_PRIME, n, dtype=np.int64)[:, None]
        hashes = ((a * v + b) % OLH_PRIME) % mech.g
        own = hashes[np.arange(n), x]
        other = rng.integers(0, mech.g - 1, n)
        y = np.where(rng.random(n) < mech.p, own, other + (other >= own))
        out[r] = (hashes == y[:, None]).sum(axis=0)
    return out


def span(edges_low: float | None, edges_high: float | None) -> int:
    """Buckets between two ends of a 24-bucket interval on edges 0..24 (open = outer)."""
    return int((24 if edges_high is None else edges_high) - (0 if edges_low is None else edges_low))


def olh(replicates: int, reports: int) -> None:
    """Item 6: the olh band's width against the narrowest band of its shape, and coverage."""
    n = 10_000
    edges = tuple(float(e) for e in range(25))
    alpha = 0.05 / 23
    z = z_value(1 - alpha, 1, False)
    print(f"olh: k 24, width at n {n:,} (F^ = F); coverage at n {reports:,}, M {replicates:,}")
    header = f"{'eps':>4} {'shape':<8}{'now/narrow':>11}{'before/narrow':>14}"
    print(header + f"{'p50 span now/narrow/before':>28}{'covered':>9}")
    for epsilon in (0.5, 1.0, 2.0, 4.0):
        mech = OLH(24, epsilon)
        p, q = mech.p, mech.q
        d = (p - q) ** 2
        within = olh_within_matrix(mech.k, mech.g, mech.p)
        j = np.arange(1, 24)
        for name, raw in SHAPES_24.items():
            f = raw / raw.sum()
            cdf = np.cumsum(f)[:-1]
            low, high = score_interval(mech, cdf, np.array(float(n)), alpha)
            narrow = z * np.sqrt((f @ within + d * cdf * (1 - cdf)) / (n * d))
            minkowski = (np.sqrt(p * (1 - p)) + j * np.sqrt(q * (1 - q))) ** 2
            before = z * np.sqrt((minkowski + d * cdf * (1 - cdf)) / (n * d))
            ratio_now = ((high - low) / 2 / narrow).max()
            ratio_before = (before / narrow).max()
            spans = [
                span(got.low, got.high)
                for lo, hi in (
                    (low, high),
                    (cdf - narrow, cdf + narrow),
                    (cdf - before, cdf + before),
                )
                for got in quantile_intervals(edges, lo, hi, (0.5,))
            ]
            rng = np.random.default_rng(int(epsilon * 10) + len(name))
            counts = olh_counts(mech, reports, f, replicates, rng)
            lo_b, hi_b = band(mech, reports, counts)
            covered = ((lo_b <= cdf + 1e-12) & (cdf - 1e-12 <= hi_b)).all(axis=1).sum()
            spans_text = "/".join(str(s) for s in spans)
            print(
                f"{epsilon:>4g} {name:<8}{ratio_now:>11.3f}{ratio_before:>14.3f}"
                f"{spans_text:>28}{covered:>9}"
            )


SHAPES_K = {
    "uniform": lambda k: np.ones(k),
    "skewed": lambda k: np.exp(-np.arange(k) / (k / 6)),
    "first": lambda k: np.eye(k)[0],
    "middle": lambda k: np.eye(k)[k // 2],
    "last": lambda k: np.eye(k)[-1],
    "ends": lambda k: np.eye(k)[0] + np.eye(k)[-1],
    "normal": lambda k: np.exp(-0.5 * ((np.arange(k) - k / 2) / (k / 8)) ** 2),
}


def exact_k3(epsilon: float, n: int, shares: tuple[float, ...]) -> float:
    """Exact joint coverage of the oue band for k = 3 (every (C_0, C_1))."""
    mech = OUE(3, epsilon)
    pmfs = [
        np.convolve(
            stats.binom.pmf(np.arange(m + 1), m, mech.p),
            stats.binom.pmf(np.arange(n - m + 1), n - m, mech.q),
        )
        for m in range(n + 1)
    ]
    joint = np.zeros((n + 1, n + 1))
    first = stats.binom.pmf(np.arange(n + 1), n, shares[0])
    second = shares[1] / (1 - shares[0]) if shares[0] < 1 else 0.0
    for n0 in np.nonzero(first > 1e-15)[0]:
        rest = stats.binom.pmf(np.arange(n - n0 + 1), n - n0, second)
        for n1 in np.nonzero(rest > 1e-15)[0]:
            joint += first[n0] * rest[n1] * np.outer(pmfs[n0], pmfs[n1])
    c0, c1 = np.nonzero(joint > 1e-12)
    counts = np.stack([c0, c1, np.zeros_like(c0)], axis=-1)
    low, high = band(mech, n, counts)
    truth = np.cumsum(shares)[:-1]
    covered = ((low <= truth + 1e-12) & (truth - 1e-12 <= high)).all(axis=1)
    return float((joint[c0, c1] * covered).sum())


def former_oue_band(mech: Mechanism, n: int, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The band before issue 23: Wald with the variance plugged in at F^ clipped to [0, 1]."""
    p, q = mech.p_star, mech.q_star
    summed = np.cumsum(counts, axis=-1)[..., :-1].astype(np.float64)
    j = np.arange(1, summed.shape[-1] + 1)
    cdf = (summed / n - j * q) / (p - q)
    at = np.clip(cdf, 0.0, 1.0)
    variance = j * q * (1 - q) + at * (p * (1 - p) - q * (1 - q)) + (p - q) ** 2 * at * (1 - at)
    half = z_value(1 - 0.05 / (mech.k - 1), 1, False) * np.sqrt(variance / n) / (p - q)
    return np.clip(cdf - half, 0.0, 1.0), np.clip(cdf + half, 0.0, 1.0)


def oue(replicates: int) -> None:
    """Item 7: the oue band's coverage at small n."""
    print("oue k 3, exact joint coverage (least over 4 shapes)")
    shapes3 = [(0.2, 0.3, 0.5), (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.05, 0.9, 0.05)]
    for epsilon in (1.0, 2.0, 4.0, 8.0):
        cells = [f"n {n}: {min(exact_k3(epsilon, n, s) for s in shapes3):.4f}" for n in (20, 50)]
        print(f"  eps {epsilon:g}: " + ", ".join(cells))
    print(
        f"oue simulated, M {replicates:,}: least covered of {len(SHAPES_K)} shapes (pass {PASS:,})"
    )
    for k in (5, 12):
        for epsilon in (1.0, 4.0, 8.0):
            for n in (50,):
                mech = OUE(k, epsilon)
                rng = np.random.default_rng(k * 1000 + int(epsilon) * 10 + n)
                worst = before = (replicates + 1, "")
                for name, make in SHAPES_K.items():
                    f = make(k) / make(k).sum()
                    counts = oue_counts(mech, n, f, replicates, rng)
                    cdf = np.cumsum(f)[:-1]
                    for rule, result in ((band, "now"), (former_oue_band, "before")):
                        low, high = rule(mech, n, counts)
                        ok = ((low <= cdf + 1e-12) & (cdf - 1e-12 <= high)).all(axis=1).sum()
                        if result == "now":
                            worst = min(worst, (int(ok), name))
                        else:
                            before = min(before, (int(ok), name))
                print(
                    f"  k {k:>2} eps {epsilon:g} n {n:>3}: now {worst[0]:,} ({worst[1]}),"
                    f" before {before[0]:,} ({before[1]})"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=5_000)
    parser.add_argument("--olh-reports", type=int, default=2_000)
    parser.add_argument("--olh-replicates", type=int, default=1_000)
    parser.add_argument("--only", choices=("ends", "olh", "oue"))
    args = parser.parse_args()
    if args.only in (None, "ends"):
        ends(args.replicates)
    if args.only in (None, "olh"):
        olh(args.olh_replicates, args.olh_reports)
    if args.only in (None, "oue"):
        oue(args.replicates)


if __name__ == "__main__":
    main()
