"""Estimates that are non-negative and sum to 1: Norm-Sub projection and maximum likelihood.

STATS.md section 4. ``consistent`` is the Euclidean projection of the unbiased estimate onto the
simplex (Norm-Sub). ``mle`` is, for brr/krr, the exact multinomial MLE in closed form (KKT);
for oue/olh from counts alone it maximizes the *composite* likelihood that treats each
category's support count as its own binomial, C_v ~ Bin(n, q* + (p* - q*) f_v), over the
simplex (the counts do not determine the exact likelihood of these mechanisms); from raw
reports :func:`ibu` maximizes the exact likelihood by iterative Bayesian update (EM).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

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


CACHE_BYTES = 256 * 2**20
"""Support rows are kept as floats between EM passes while they take at most this much memory."""

Progress = Callable[[int, float], None]
"""Told (iteration, duality gap in log-likelihood units) once per iteration of :func:`ibu`."""


class _Reports:
    """The distinct reports of an IBU problem: support rows, multiplicities, e^eps - 1.

    Every quantity EM needs comes from one pass over the rows (:meth:`evaluate`); the rows are
    converted to floats once and kept while they fit in :data:`CACHE_BYTES`, else per pass.
    """

    def __init__(self, support: np.ndarray, weights: np.ndarray, ratio: float, chunk: int) -> None:
        self.support, self.weights, self.excess, self.chunk = support, weights, ratio - 1.0, chunk
        self.total = float(weights.sum())
        fits = support.size * np.dtype(np.float64).itemsize <= CACHE_BYTES
        self.cached = [block for block, _ in self._converted()] if fits else None

    def _converted(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The support rows (as floats) and their multiplicities, in chunks."""
        for start in range(0, len(self.support), self.chunk):
            stop = start + self.chunk
            yield self.support[start:stop].astype(np.float64), self.weights[start:stop]

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The float support rows and their multiplicities, from the cache when there is one."""
        if self.cached is None:
            yield from self._converted()
            return
        for i, block in enumerate(self.cached):
            yield block, self.weights[i * self.chunk : (i + 1) * self.chunk]

    def evaluate(self, f: np.ndarray) -> tuple[np.ndarray, float]:
        """In one pass: g_x = sum_i w_i P(i | x) / P(i | f) and the log-likelihood (up to a
        constant). g is the gradient of the likelihood on the simplex: EM moves to f g / N,
        and max_x g_x - N bounds how far the likelihood is from its maximum (f . g = N)."""
        gradient = np.zeros(len(f))
        loglik = 0.0
        for block, w in self.blocks():
            ratio = 1.0 + self.excess * (block @ f)
            share = w / ratio
            gradient += share.sum() + self.excess * (share @ block)
            loglik += float(w @ np.log(ratio))
        return gradient, loglik


def _em_step(f: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """One EM update f_x <- f_x g_x / N, renormalized against rounding."""
    new = f * gradient
    return new / new.sum()


def ibu(
    support: np.ndarray,
    weights: np.ndarray,
    ratio: float,
    max_iterations: int = 20_000,
    tolerance: float = 1e-3,
    chunk: int = 65_536,
    progress: Progress | None = None,
) -> np.ndarray:
    """Exact MLE from reports by iterative Bayesian update (EM), accelerated, for oue/olh.

    For these mechanisms P(report | x) = base(report) * (ratio if the report supports x else 1),
    so the update needs only the (m, k) support matrix of the distinct reports and how many
    times each occurred. For both, ``ratio`` = p*(1 - q*)/(q*(1 - p*)) = e^eps. Plain EM is
    slow near the boundary of the simplex, so steps are extrapolated with SQUAREM (Varadhan &
    Roland, Scand. J. Stat. 2008), falling back to the plain EM step whenever the extrapolation
    leaves the simplex or lowers the likelihood; the likelihood therefore never decreases.

    It stops when the duality gap max_x g_x - N (an upper bound on how much the likelihood can
    still rise, :meth:`_Reports.evaluate`) is at most ``tolerance`` nats: the default 1e-3 moves
    no share by more than 0.05 standard errors, where a fixed step size would stop early on a
    slow stretch or run on long after the answer is known. ``progress`` hears each iteration.
    """
    reports = _Reports(support, weights, ratio, chunk)
    f = np.full(support.shape[1], 1.0 / support.shape[1])
    gradient, _ = reports.evaluate(f)
    for iteration in range(max_iterations):
        gap = float(gradient.max()) - reports.total
        if progress is not None:
            progress(iteration, gap)
        if gap <= tolerance:
            return f
        f1 = _em_step(f, gradient)
        gradient1, loglik1 = reports.evaluate(f1)
        f2 = _em_step(f1, gradient1)
        r, v = f1 - f, f2 - 2.0 * f1 + f
        if v.any():
            alpha = min(-1.0, -float(np.linalg.norm(r) / np.linalg.norm(v)))
            jump = f - 2.0 * alpha * r + alpha * alpha * v
            if (jump >= 0).all():
                jump /= jump.sum()
                gradient_jump, loglik_jump = reports.evaluate(jump)
                if loglik_jump >= loglik1:
                    f, gradient = jump, gradient_jump
                    continue
        f = f2
        gradient, _ = reports.evaluate(f)
    return f


def is_krr(mechanism: Mechanism) -> bool:
    """True for brr/krr, whose counts are multinomial (each report supports one category)."""
    return isinstance(mechanism, KRR)
