"""Estimates that are non-negative and sum to 1: Norm-Sub projection and maximum likelihood.

STATS.md section 4. ``consistent`` is the Euclidean projection of the unbiased estimate onto the
simplex (Norm-Sub). ``mle`` is, for brr/krr, the exact multinomial MLE in closed form (KKT);
for oue/olh from counts alone it maximizes the *composite* likelihood that treats each
category's support count as its own binomial, C_v ~ Bin(n, q* + (p* - q*) f_v), over the
simplex (the counts do not determine the exact likelihood of these mechanisms); from raw
reports :func:`ibu` maximizes the exact likelihood by iterative Bayesian update (EM).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from deniable.client.mechanisms import KRR, Mechanism


def norm_sub(estimate: np.ndarray) -> np.ndarray:
    """Euclidean projection onto {f >= 0, sum f = 1} in O(k log k) (Norm-Sub)."""
    u = np.sort(estimate)[::-1]
    cumulative = np.cumsum(u)
    j = np.arange(1, len(u) + 1)
    rho = np.nonzero(u + (1.0 - cumulative) / j > 0)[0][-1] + 1
    delta = (1.0 - cumulative[rho - 1]) / rho
    return np.maximum(estimate + delta, 0.0)


def krr_mle(mechanism: Mechanism, counts: np.ndarray) -> np.ndarray:
    """The closed-form multinomial MLE of k-ary randomized response from its counts (n > 0)."""
    p, q = mechanism.p_star, mechanism.q_star
    counts = np.asarray(counts, dtype=np.float64)
    keep = np.ones(len(counts), dtype=bool)
    while True:
        c = (keep.sum() * q + p - q) / counts[keep].sum()
        f = np.where(keep, (c * counts - q) / (p - q), 0.0)
        drop = keep & (f <= 0)
        if not drop.any():
            return f / f.sum()
        keep &= ~drop


def _composite_shares(m: float, counts: np.ndarray, n: float, p: float, q: float) -> np.ndarray:
    """Shares maximizing sum_v loglik_v(f_v) - (m/(p-q)) sum_v f_v, each within [0, 1]."""
    # Stationary point of C/lam - (n - C)/(1 - lam) = m: the root in [0, 1] of
    # m lam^2 - (m + n) lam + C = 0, written stably.
    root = np.sqrt((m + n) ** 2 - 4.0 * m * counts)
    denom = (m + n) + root
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(denom > 0, 2.0 * counts / denom, 1.0 + n / m if m != 0 else 0.0)
    return np.clip((lam - q) / (p - q), 0.0, 1.0)


def composite_mle(mechanism: Mechanism, counts: np.ndarray, n: int) -> np.ndarray:
    """Maximize the composite binomial likelihood of the support counts over the simplex (n > 0).

    The objective is concave and separable, so its KKT point is found exactly: every share is
    the clipped stationary point for a common multiplier, found by a scalar root search.
    """
    from scipy import optimize  # lazy: importing scipy is slow at collector start-up

    p, q = mechanism.p_star, mechanism.q_star
    counts = np.asarray(counts, dtype=np.float64)
    total = float(n)

    def excess(m: float) -> float:
        return float(_composite_shares(m, counts, total, p, q).sum() - 1.0)

    low, high = -total / (1.0 - p) * 1.000001, total / q * 1.000001
    m = optimize.brentq(excess, low, high, xtol=1e-12 * total, rtol=1e-15, maxiter=500)
    f = _composite_shares(m, counts, total, p, q)
    return f / f.sum()


class _Reports:
    """The distinct reports of an IBU problem: support rows, multiplicities, likelihood ratio."""

    def __init__(self, support: np.ndarray, weights: np.ndarray, ratio: float, chunk: int) -> None:
        self.support, self.weights, self.ratio, self.chunk = support, weights, ratio, chunk
        self.total = float(weights.sum())

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The support rows (as floats) and their multiplicities, in chunks."""
        for start in range(0, len(self.support), self.chunk):
            stop = start + self.chunk
            yield self.support[start:stop].astype(np.float64), self.weights[start:stop]

    def step(self, f: np.ndarray) -> np.ndarray:
        """One EM update f_x <- f_x / N sum_i w_i P(i | x) / P(i | f)."""
        acc = np.zeros(len(f))
        for block, w in self.blocks():
            share = w / (1.0 + (self.ratio - 1.0) * (block @ f))
            acc += share.sum() + (self.ratio - 1.0) * (share @ block)
        new = f * acc / self.total
        return new / new.sum()

    def loglik(self, f: np.ndarray) -> float:
        """The log-likelihood of the reports up to a constant."""
        return sum(
            float(w @ np.log1p((self.ratio - 1.0) * (block @ f))) for block, w in self.blocks()
        )


def ibu(
    support: np.ndarray,
    weights: np.ndarray,
    ratio: float,
    max_iterations: int = 20_000,
    tolerance: float = 1e-12,
    chunk: int = 65_536,
) -> np.ndarray:
    """Exact MLE from reports by iterative Bayesian update (EM), accelerated, for oue/olh.

    For these mechanisms P(report | x) = base(report) * (ratio if the report supports x else 1),
    so the update needs only the (m, k) support matrix of the distinct reports and how many
    times each occurred. For both, ``ratio`` = p*(1 - q*)/(q*(1 - p*)) = e^eps. Plain EM is
    slow near the boundary of the simplex, so steps are extrapolated with SQUAREM (Varadhan &
    Roland, Scand. J. Stat. 2008), falling back to the plain EM step whenever the extrapolation
    leaves the simplex or lowers the likelihood; the likelihood therefore never decreases.
    """
    reports = _Reports(support, weights, ratio, chunk)
    f = np.full(support.shape[1], 1.0 / support.shape[1])
    for _ in range(max_iterations):
        f1 = reports.step(f)
        f2 = reports.step(f1)
        r, v = f1 - f, f2 - 2.0 * f1 + f
        if not v.any():
            return f2
        alpha = min(-1.0, -float(np.linalg.norm(r) / np.linalg.norm(v)))
        jump = f - 2.0 * alpha * r + alpha * alpha * v
        if (jump < 0).any() or reports.loglik(jump) < reports.loglik(f2):
            jump = f2
        new = reports.step(jump)
        if np.abs(new - f).sum() < tolerance:
            return new
        f = new
    return f


def is_krr(mechanism: Mechanism) -> bool:
    """True for brr/krr, whose counts are multinomial (each report supports one category)."""
    return isinstance(mechanism, KRR)
