"""Estimates that are non-negative and sum to 1: Norm-Sub projection and maximum likelihood.

STATS.md section 4. ``consistent`` is the Euclidean projection of the unbiased estimate onto the
simplex (Norm-Sub). ``mle`` is, for brr/krr, the exact multinomial MLE in closed form (KKT);
for oue/olh from counts alone it maximizes the *composite* likelihood that treats each
category's support count as its own binomial, C_v ~ Bin(n, q* + (p* - q*) f_v), over the
simplex (the counts do not determine the exact likelihood of these mechanisms); from raw
reports :func:`ibu` maximizes the exact likelihood (the IBU/EM fixed point) by projected Newton.
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


CACHE_BYTES = 512 * 2**20
"""Support rows are kept as float32 between passes while they take at most this much memory."""

Progress = Callable[[int, float], None]
"""Told (iteration, duality gap in log-likelihood units) once per iteration of :func:`ibu`."""


def _split(vector: np.ndarray, parts: int) -> np.ndarray:
    """float32 columns summing to ``vector`` whose leading ones have exact float32 dot products.

    Each leading column is the remainder so far rounded to a multiple of 2^-21 of its absolute
    sum, so any partial sum of 0/1-weighted entries fits float32's 24-bit significand; the last
    column carries what is left, about 2^-21 of the vector per column before it. Products with
    the 0/1 support rows in float32 (one BLAS pass) are thereby as accurate as float64 ones.
    """
    out = np.empty((len(vector), parts), dtype=np.float32)
    rest = np.asarray(vector, dtype=np.float64)
    for j in range(parts - 1):
        scale = float(np.abs(rest).sum())
        quantum = 2.0 ** (np.ceil(np.log2(scale)) - 21) if scale > 0 else 1.0
        out[:, j] = np.round(rest / quantum) * quantum
        rest = rest - out[:, j]
    out[:, -1] = rest
    return out


class _Reports:
    """The distinct support rows of an IBU problem, their multiplicities and e^eps - 1.

    Identical rows are merged first when k <= 63 (each row packs into one integer), which is
    exact and turns brr/krr's one-hot rows into at most k. The rows are converted to float32
    once and kept while they fit in :data:`CACHE_BYTES`, else per pass, in chunks.
    """

    def __init__(self, support: np.ndarray, weights: np.ndarray, ratio: float, chunk: int) -> None:
        support = np.asarray(support, dtype=bool)
        weights = np.asarray(weights, dtype=np.float64)
        if 0 < support.shape[1] <= 63:
            codes = support.astype(np.uint64) @ (
                np.uint64(1) << np.arange(support.shape[1], dtype=np.uint64)
            )
            _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
            support, weights = support[first], np.bincount(inverse.ravel(), weights=weights)
        keep = weights > 0
        self.support, self.weights = support[keep], weights[keep]
        self.excess, self.chunk = ratio - 1.0, chunk
        self.total = float(self.weights.sum())
        fits = self.support.size * np.dtype(np.float32).itemsize <= CACHE_BYTES
        self.cached = [block for block, _ in self._converted()] if fits else None

    def _converted(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The support rows (as float32) and their multiplicities, in chunks."""
        for start in range(0, len(self.support), self.chunk):
            stop = start + self.chunk
            yield self.support[start:stop].astype(np.float32), self.weights[start:stop]

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The float32 support rows and their multiplicities, from the cache when there is one."""
        if self.cached is None:
            yield from self._converted()
            return
        for i, block in enumerate(self.cached):
            yield block, self.weights[i * self.chunk : (i + 1) * self.chunk]

    def lifts(self, f: np.ndarray) -> np.ndarray:
        """A f = sum(f) + (e^eps - 1) X f for every row: P(report | f) up to the row's constant."""
        columns = _split(f, 3)
        parts = [block @ columns for block, _ in self.blocks()]
        return float(f.sum()) + self.excess * np.concatenate(parts).sum(axis=1, dtype=np.float64)

    def objective(self, lifts: np.ndarray, f: np.ndarray) -> float:
        """sum_i w_i log(A_i f) - N sum(f): the log-likelihood on the simplex, maximized there."""
        return float(self.weights @ np.log(lifts)) - self.total * float(f.sum())

    def gradient(self, lifts: np.ndarray) -> np.ndarray:
        """g = A^T (w / A f): g_x = sum_i w_i P(i | x) / P(i | f); f . g = N on the simplex."""
        share = self.weights / lifts
        g = np.zeros(self.support.shape[1])
        start = 0
        for block, w in self.blocks():
            columns = _split(share[start : start + len(w)], 3)
            g += (block.T @ columns).sum(axis=1, dtype=np.float64)
            start += len(w)
        return float(share.sum()) + self.excess * g

    def curvature(self, lifts: np.ndarray) -> np.ndarray:
        """H = A^T diag(w / (A f)^2) A, minus the log-likelihood's Hessian, with one BLAS
        X^T D X per block (float32 is enough: H only shapes the step, the line search checks it)."""
        d = self.weights / lifts**2
        inner = np.zeros((self.support.shape[1],) * 2)
        column = np.zeros(self.support.shape[1])
        start = 0
        for block, w in self.blocks():
            root = np.sqrt(d[start : start + len(w)]).astype(np.float32)
            scaled = block * root[:, None]
            inner += scaled.T @ scaled
            column += scaled.T @ root
            start += len(w)
        c = self.excess
        return float(d.sum()) + c * (column[:, None] + column[None, :]) + c * c * inner


def _newton_target(curvature: np.ndarray, gradient: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The maximizer y >= 0 of the quadratic model g.(y - f) - (y - f)^T H (y - f) / 2.

    Solved by projected Newton (Bertsekas, SIAM J. Control Optim. 1982) from y = f: shares at
    zero whose model gradient pushes them below stay fixed, the rest take a Newton step on
    their block of H, clipped at zero with a backtracking search. Once the zero set is right
    the step lands on the minimizer, so it takes a few k x k solves (H is positive definite).
    """
    from scipy import linalg  # lazy: importing scipy is slow at collector start-up

    target = gradient + curvature @ f
    y = f.copy()
    model = float(0.5 * y @ curvature @ y - target @ y)
    tiny = 1e-14 * float(np.abs(target).max() + 1.0)
    for _ in range(10 * len(f)):
        slope = curvature @ y - target
        blocked = (y <= 0) & (slope > 0)
        free = ~blocked
        if np.abs(slope[free]).max(initial=0.0) <= tiny:
            break
        direction = np.zeros_like(y)
        block = curvature[np.ix_(free, free)]
        direction[free] = linalg.solve(block, -slope[free], assume_a="pos", check_finite=False)
        alpha = 1.0
        while True:
            trial = np.maximum(y + alpha * direction, 0.0)
            trial_model = float(0.5 * trial @ curvature @ trial - target @ trial)
            if trial_model < model or alpha < 1e-12:
                break
            alpha /= 2
        if trial_model >= model:
            break
        y, model = trial, trial_model
    return y


def ibu(
    support: np.ndarray,
    weights: np.ndarray,
    ratio: float,
    max_iterations: int = 500,
    tolerance: float = 1e-3,
    chunk: int = 65_536,
    progress: Progress | None = None,
) -> np.ndarray:
    """Exact MLE from reports (what iterative Bayesian update converges to), for oue/olh.

    For these mechanisms P(report | x) = base(report) * (ratio if the report supports x else 1),
    so the log-likelihood is sum_i w_i log(A_i f) with A = 1 + (ratio - 1) X, X the (m, k)
    support matrix of the distinct reports and w their multiplicities; ``ratio`` =
    p*(1 - q*)/(q*(1 - p*)) = e^eps. It is concave, and EM (IBU) needs thousands of passes
    near the simplex's boundary, so this takes projected Newton steps as mixSQP does (Kim et
    al., JCGS 2020): maximize sum_i w_i log(A_i f) - N sum(f) over f >= 0 (its maximum lies on
    the simplex), each step from the exact gradient and the Hessian X^T D X (one BLAS call), a
    non-negative quadratic program solved by active set, then a backtracking line search, so
    the likelihood never decreases. Newton converges in tens of passes, not thousands.

    It stops when the duality gap max_x g_x - N (an upper bound on how much the likelihood can
    still rise, :meth:`_Reports.gradient`) is at most ``tolerance`` nats: the default 1e-3 moves
    no share by more than 0.05 standard errors. ``progress`` hears each iteration.
    """
    reports = _Reports(support, weights, ratio, chunk)
    f = np.full(support.shape[1], 1.0 / support.shape[1])
    lifts = reports.lifts(f)
    value = reports.objective(lifts, f)
    for iteration in range(max_iterations):
        gradient = reports.gradient(lifts)
        gap = float(gradient.max()) - reports.total
        if progress is not None:
            progress(iteration, gap)
        if gap <= tolerance:
            break
        step = _newton_target(reports.curvature(lifts), gradient - reports.total, f) - f
        slope = float((gradient - reports.total) @ step)
        alpha = 1.0
        while True:
            trial = np.maximum(f + alpha * step, 0.0)
            trial /= trial.sum()
            trial_lifts = reports.lifts(trial)
            trial_value = reports.objective(trial_lifts, trial)
            if trial_value >= value + 1e-4 * alpha * slope or alpha < 1e-10:
                break
            alpha /= 2
        if trial_value < value:
            break
        f, lifts, value = trial, trial_lifts, trial_value
    return f


def is_krr(mechanism: Mechanism) -> bool:
    """True for brr/krr, whose counts are multinomial (each report supports one category)."""
    return isinstance(mechanism, KRR)
