"""Heavy hitters of a text metric: the strings many devices hold, from one period's sketch counts.

Discovery is PEM's prefix extension (STATS.md section 11): every 1-byte prefix is scored at
level 1, those above the pruning threshold tau survive (at most :data:`SURVIVOR_CAP`, by
score), each survivor is extended by every next byte and scored at the next level, and so on
to ``max_length``. tau counts every hypothesis a run may test over all rounds (K, Bonferroni),
so with probability >= 1 - alpha no string absent from the batch is returned; a run where the
cap binds says so (``cap_bound``), since its guarantee is then void. tau's null variance adds
to OUE's V*/n_l an upper bound on the collisions of the prefixes left below it, measured from
the level's own counts. The floor T95 is the share that survives all g rounds with
probability >= 1 - beta, with that same variance.

Everything is computed from the per-(level, row, cell) counts and the per-(level, row) report
tallies (:class:`~deniable.client.mechanisms.PrefixSketch`): the cost depends on the
sketch and the survivor cap, never on n.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import NormalDist

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import OLH_PRIME, TEXT_SEGMENT_BYTES, PrefixSketch
from deniable.client.mechanisms import _text_hash_coefficients as hash_coefficients

from .about import MetricAbout
from .intervals import rate_interval

SURVIVOR_CAP = 64
"""The most prefixes kept per round after the first (the decoder's bound on work: 64 x 256
candidates a round). The first round keeps every level-1 prefix above tau (at most 256, so
at most 65,536 candidates in round 2): with many unique strings, each first byte holds a
share near tau (0.92 / 256 = 0.36% against tau = 0.38% at eps 4, n = 1e6), and a cap there
would bind in most runs."""

ALPHA = 0.05
"""Family-wise probability of returning any string absent from the batch."""

BETA = 0.05
"""Probability of missing a string at the floor T95."""

MAX_CANDIDATES = 10_000
"""The most candidate strings one candidate-mode query scores (bounded work: a 422 past it)."""

COLLISION_CONFIDENCE = 0.999
"""The one-sided level of the upper bound on a level's collision variance (STATS.md section 11)."""

CUT_PASSES = 4
"""The most times a level is re-scored while its cut widens (peeling at a wider cut leaves more
mass unpeeled, so the collision variance, and the cut, can only grow)."""

_BRANCHING = 256**TEXT_SEGMENT_BYTES
_NORMAL = NormalDist()


def hypotheses(sketch: PrefixSketch, cap: int = SURVIVOR_CAP) -> int:
    """K, the most hypotheses one discovery run tests: every level-1 prefix, every extension
    of the (at most 256) level-1 survivors, then at most ``cap`` survivors x 256 extensions
    in each later round."""
    if sketch.levels == 1:
        return _BRANCHING
    return _BRANCHING + _BRANCHING**2 + (sketch.levels - 2) * cap * _BRANCHING


def _z(tail: float) -> float:
    """The upper ``tail`` quantile of the standard normal."""
    return _NORMAL.inv_cdf(1 - tail)


@dataclass(frozen=True)
class Floor:
    """The detection floor of one run: tau, the per-round cut at share 0 over its
    ``reports_per_level``; T95, the share found with probability >= 1 - beta; K hypotheses;
    ``collision_variance``, the variance the prefixes below the cut add to an estimate (an upper
    bound from the batch's own counts, 0 for the formula alone), included in tau and T95."""

    n: int
    epsilon: float
    max_length: int
    levels: int
    hypotheses: int
    tau: float
    t95: float
    collision_variance: float = 0.0


def floor(
    sketch: PrefixSketch,
    n: int,
    *,
    levels: int | None = None,
    tested: int | None = None,
    rounds: int | None = None,
    alpha: float = ALPHA,
    beta: float = BETA,
    collision: float = 0.0,
) -> Floor:
    """T95(n, eps, L): tau = z_{1-alpha/K} sqrt(g V*/n + C), and T solving
    T = tau + z_{1-beta/g} sqrt(g V*(T)/n + C) (STATS.md section 11), C = ``collision``, the
    collision variance of the prefixes below the cut (0: the formula alone).

    ``levels`` is how many levels split the n reports (g: every level, or 1..g for a
    candidate pooled over several), ``tested`` K (default: a discovery run's), ``rounds``
    the tests a string must pass (default g; one for a candidate). At n = 0 the floor is 1
    (nothing can be found).
    """
    g = sketch.levels if levels is None else levels
    k = hypotheses(sketch) if tested is None else tested
    if n <= 0:
        return Floor(n, sketch.epsilon, sketch.max_length, g, k, 1.0, 1.0, collision)
    rounds = sketch.levels if rounds is None else rounds
    tau = _z(alpha / k) * math.sqrt(g * sketch.v_star / n + collision)
    power = _z(beta / rounds)
    t = tau
    for _ in range(100):
        nxt = tau + power * math.sqrt(g * sketch.variance_constant(min(t, 1.0)) / n + collision)
        if abs(nxt - t) < 1e-12:
            break
        t = nxt
    return Floor(n, sketch.epsilon, sketch.max_length, g, k, min(tau, 1.0), min(t, 1.0), collision)


def reports_for_floor(sketch: PrefixSketch, share: float, limit: int = 10**12) -> int | None:
    """The fewest reports whose discovery floor T95 is at most ``share`` (None past ``limit``)."""
    if not 0 < share < 1:
        raise InvalidInput("the share must lie strictly between 0 and 1")
    high = 1
    while floor(sketch, high).t95 > share:
        high *= 2
        if high > limit:
            return None
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        if floor(sketch, mid).t95 <= share:
            high = mid
        else:
            low = mid
    return high


class SketchCounts:
    """One batch's counts of a text metric, shaped: ``cells[l-1, r, c]`` and ``tallies[l-1, r]``."""

    def __init__(self, sketch: PrefixSketch, counts: np.ndarray) -> None:
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != (sketch.cell_count,):
            raise InvalidInput(
                f"a text metric's counts hold {sketch.cell_count} cells, got {counts.shape}"
            )
        split = sketch.levels * sketch.rows * sketch.cells
        self.sketch = sketch
        self.cells = counts[:split].reshape(sketch.levels, sketch.rows, sketch.cells)
        self.tallies = counts[split:].reshape(sketch.levels, sketch.rows)
        self.n = int(self.tallies.sum())
        a, b = hash_coefficients()
        self._a = np.asarray(a, dtype=np.int64)
        self._b = np.asarray(b, dtype=np.int64)

    def hashes(self, prefixes: np.ndarray) -> np.ndarray:
        """h_r of each prefix (an (N, length) uint8 array): an (N, R) int array of cells."""
        length = prefixes.shape[1]
        total = prefixes.astype(np.int64) @ self._a[:, :length].T + self._b
        return (total % OLH_PRIME) % self.sketch.cells

    def support(self, level: int, prefixes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per prefix of ``level``: its supporting reports S (summed over rows) and each row's
        cell, (N,) and (N, R)."""
        cells = self.hashes(prefixes)
        rows = np.arange(self.sketch.rows)
        return self.cells[level - 1][rows, cells].sum(axis=1), cells

    def collisions(
        self, level: int, cells: np.ndarray, heavy: np.ndarray, shares: np.ndarray
    ) -> np.ndarray:
        """Per prefix, the report-weighted share its cells hold from the ``heavy`` prefixes
        other than itself (``cells`` its (N, R) cells; ``shares`` its estimates)."""
        weights = self.tallies[level - 1] / max(1, self.tallies[level - 1].sum())
        mass = shares * heavy
        known = np.zeros(len(cells))
        for r in range(self.sketch.rows):
            per_cell = np.bincount(cells[:, r], weights=mass, minlength=self.sketch.cells)
            known += weights[r] * (per_cell[cells[:, r]] - mass)
        return known

    def collision_variance(self, level: int, cells: np.ndarray, shares: np.ndarray) -> float:
        """An upper bound (one-sided, :data:`COLLISION_CONFIDENCE`) on the variance that the
        prefixes of ``level`` left unpeeled add to a null prefix's estimate (STATS.md section 11).

        Each row's debiased cells, less the peeled prefixes (``cells`` their (N, R) cells,
        ``shares`` their estimates), spread around their mean by sum_x f_x^2 (the unpeeled mass)
        plus the OUE noise, whose expectation is known exactly: their spread beyond it, over m,
        is the variance of a random cell's collisions; rows are averaged with the weights of
        the estimate."""
        sketch = self.sketch
        tallies = self.tallies[level - 1].astype(np.float64)
        used = tallies > 0
        if not used.any():
            return 0.0
        p, q, m = sketch.p, sketch.q, sketch.cells
        reports = tallies[used][:, None]
        values = (self.cells[level - 1][used] / reports - q) / (p - q)
        if len(shares):
            rows = np.broadcast_to(np.arange(len(reports))[None, :], (len(shares), len(reports)))
            np.subtract.at(
                values, (rows, cells[:, used]), np.repeat(shares[:, None], len(reports), 1)
            )
        spread = ((values - values.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        noise = ((m - 1) * q * (1 - q) + p * (1 - p)) / (m * tallies[used] * (p - q) ** 2)
        excess = spread - (m - 1) * noise
        spread_variance = 2 * (m - 1) * noise**2 + 4 * noise * np.maximum(excess, 0.0)
        weights = tallies[used] / tallies.sum()
        estimate = float((weights**2 * excess).sum()) / m
        error = math.sqrt(float((weights**4 * spread_variance).sum())) / m
        return max(0.0, estimate + _z(1 - COLLISION_CONFIDENCE) * error)


@dataclass(frozen=True)
class Scored:
    """Prefixes of one level with their debiased shares (collisions subtracted)."""

    prefixes: np.ndarray
    shares: np.ndarray
    support: np.ndarray
    known: np.ndarray
    unknown: np.ndarray
    n: int
    collision: float = 0.0


MAX_PEELED = 1024
"""The most heavy prefixes one level's peeling accepts (a bound on its work)."""


def _cell_groups(cells: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per sketch row, the prefixes ordered by their cell and those cells sorted: the prefixes
    sharing one cell of a row are then one slice, found by binary search."""
    groups = []
    for row in range(cells.shape[1]):
        order = np.argsort(cells[:, row], kind="stable")
        groups.append((order, cells[order, row]))
    return groups


def _peel(
    data: SketchCounts, level: int, raw: np.ndarray, cells: np.ndarray, threshold: float
) -> np.ndarray:
    """Which prefixes are heavy: greedily, largest first, each one's estimate net of the
    collisions of the heavy ones accepted before it must pass ``threshold``.

    Without the order, a 5% string's collisions lift its unrelated neighbours above the
    threshold in one row each, and their sum, subtracted back, would prune the string itself.
    """
    sketch = data.sketch
    tallies = data.tallies[level - 1]
    weights = tallies / max(1, int(tallies.sum()))
    adjusted = raw.astype(np.float64).copy()
    accepted = np.zeros(len(raw), dtype=bool)
    sharing = _cell_groups(cells)
    mass = 0.0
    for _ in range(min(MAX_PEELED, len(raw))):
        i = int(np.argmax(adjusted))
        share = (adjusted[i] - (1 - mass) / sketch.cells) / (1 - 1 / sketch.cells)
        if not share > threshold:
            break
        accepted[i] = True
        adjusted[i] = -np.inf
        for row, (order, sorted_cells) in enumerate(sharing):
            low = np.searchsorted(sorted_cells, cells[i, row], side="left")
            high = np.searchsorted(sorted_cells, cells[i, row], side="right")
            adjusted[order[low:high]] -= weights[row] * share
        mass = min(1.0, mass + max(0.0, share))
        if mass >= 1.0:
            break  # shares sum to at most 1: what still passes is noise (and bounds the work)
    return accepted


def score_level(data: SketchCounts, level: int, prefixes: np.ndarray, threshold: float) -> Scored:
    """Score ``prefixes`` at ``level``: raw estimates, less the collisions of the heavy ones
    (found by :func:`_peel` at ``threshold``) and the expected share of everything else
    (1 - the heavy mass, spread over m cells)."""
    sketch = data.sketch
    n = int(data.tallies[level - 1].sum())
    support, cells = data.support(level, prefixes)
    if n == 0:
        zeros = np.zeros(len(prefixes))
        return Scored(prefixes, zeros, support, zeros, zeros, 0, 0.0)
    p, q = sketch.p, sketch.q
    raw = (support / n - q) / (p - q)
    heavy = _peel(data, level, raw, cells, threshold)
    known = data.collisions(level, cells, heavy, raw)
    first = np.clip(raw - known, 0.0, 1.0)
    known = data.collisions(level, cells, heavy, first)
    heavy_mass = float(first[heavy].sum())
    other = np.clip(heavy_mass - np.where(heavy, first, 0.0), 0.0, 1.0)
    unknown = (1 - other) / sketch.cells
    shares = (raw - known - unknown) / (1 - 1 / sketch.cells)
    collision = data.collision_variance(level, cells[heavy], first[heavy])
    return Scored(prefixes, shares, support, known, unknown, n, collision)


def score_at_cut(
    data: SketchCounts, level: int, prefixes: np.ndarray, z_cut: float
) -> tuple[Scored, float]:
    """Score ``prefixes`` at ``level`` and the level's cut tau_l = z_cut sqrt(V*/n_l + C_l),
    C_l the collision variance of what the peeling at tau_l leaves (STATS.md section 11).

    Starts from the formula's cut (C = 0) and widens it while the collisions ask for more: a
    wider cut peels less, so C_l, and the cut, only grow."""
    n = int(data.tallies[level - 1].sum())
    formula = data.sketch.v_star / max(1, n)
    tau = z_cut * math.sqrt(formula)
    scored = score_level(data, level, prefixes, tau)
    for _ in range(CUT_PASSES):
        wider = z_cut * math.sqrt(formula + scored.collision)
        if wider <= tau:
            break
        tau = wider
        scored = score_level(data, level, prefixes, tau)
    return scored, max(tau, z_cut * math.sqrt(formula + scored.collision))


@dataclass(frozen=True)
class HeavyHitter:
    """A discovered (or candidate) string with its share, interval and whether it may have been
    cut at ``max_length``."""

    value: str
    share: float
    ci_low: float
    ci_high: float
    reports: int
    truncated: bool
    detected: bool = True


@dataclass(frozen=True)
class Discovery:
    """A run: the strings found (largest share first), the run's floor, and whether the
    survivor cap bound (its guarantee is then void)."""

    hitters: list[HeavyHitter]
    floor: Floor
    cap_bound: bool
    rounds: int
    tested: int
    confidence: float
    survivors_per_level: list[int] = field(default_factory=list)


def _padded(values: list[bytes], length: int) -> np.ndarray:
    return np.frombuffer(b"".join(v.ljust(length, b"\0") for v in values), dtype=np.uint8).reshape(
        len(values), length
    )


def _text(padded: bytes) -> tuple[str, bool]:
    """A padded string as text, and whether it filled ``max_length`` (may have been cut)."""
    stripped = padded.rstrip(b"\0")
    return stripped.decode("utf-8", "replace"), len(stripped) == len(padded)


def _extend(survivors: np.ndarray) -> np.ndarray:
    """Every one-byte extension of each survivor; a terminated one (last byte 0) extends by
    the terminator only (devices pad with it)."""
    count, length = survivors.shape
    ended = survivors[:, -1] == 0 if length else np.zeros(count, dtype=bool)
    open_ = survivors[~ended]
    grown = np.repeat(open_, _BRANCHING, axis=0)
    grown = np.hstack([grown, np.tile(np.arange(_BRANCHING, dtype=np.uint8), len(open_))[:, None]])
    closed = np.hstack([survivors[ended], np.zeros((int(ended.sum()), 1), dtype=np.uint8)])
    return np.vstack([grown, closed]) if len(closed) else grown


def _shares(
    data: SketchCounts, values: list[bytes], confidence: float, simultaneous: int
) -> list[tuple[float, float, float, int, float]]:
    """Per padded string: its share pooled over every level that identifies it (those whose
    prefix holds its terminator, else the last level), its interval (Wilson on the pooled
    support, Bonferroni over ``simultaneous`` strings, then debiased, widened by the pooled
    collision noise), its reports and that collision variance."""
    sketch = data.sketch
    length = sketch.max_length
    matrix = _padded(values, length)
    support = np.zeros(len(values))
    reports = np.zeros(len(values))
    known = np.zeros(len(values))
    unknown = np.zeros(len(values))
    collision_sd = np.zeros(len(values))
    z_cut = _z(ALPHA / max(1, len(values)))
    ends = [len(v.rstrip(b"\0")) for v in values]
    for level in range(1, sketch.levels + 1):
        size = sketch.prefix_length(level)
        uses = np.array([size > end or level == sketch.levels for end in ends])
        if not uses.any():
            continue
        scored, _ = score_at_cut(data, level, matrix[:, :size], z_cut)
        collision_sd += np.where(uses, scored.n * math.sqrt(scored.collision), 0)
        support += np.where(uses, scored.support, 0)
        reports += np.where(uses, scored.n, 0)
        known += np.where(uses, scored.known * scored.n, 0)
        unknown += np.where(uses, scored.unknown * scored.n, 0)
    p, q = sketch.p, sketch.q
    scale = 1 - 1 / sketch.cells
    seen = reports > 0
    trials = np.maximum(reports, 1)
    shift = (known + unknown) / trials
    tail = (1 - confidence) / max(1, simultaneous)
    # sds added, levels taken as fully correlated: an upper bound on the pooled collision sd
    collision = (collision_sd / trials) ** 2
    widen = _z(tail / 2) * np.sqrt(collision) / scale
    low, high = rate_interval(support, trials, tail)
    point = ((support / trials - q) / (p - q) - shift) / scale
    low = np.clip(((low - q) / (p - q) - shift) / scale - widen, 0.0, 1.0)
    high = np.clip(((high - q) / (p - q) - shift) / scale + widen, 0.0, 1.0)
    point = np.minimum(np.maximum(point, low), high)
    return [
        (float(point[i]), float(low[i]), float(high[i]), int(reports[i]), float(collision[i]))
        if seen[i]
        else (0.0, 0.0, 1.0, 0, 0.0)
        for i in range(len(values))
    ]


def discover(
    sketch: PrefixSketch,
    counts: np.ndarray,
    *,
    confidence: float = 0.95,
    cap: int = SURVIVOR_CAP,
    alpha: float = ALPHA,
) -> Discovery:
    """The strings above the pruning threshold at every level, with shares and intervals."""
    data = SketchCounts(sketch, counts)
    tested_bound = hypotheses(sketch, cap)
    z_cut = _z(alpha / tested_bound)
    survivors = np.zeros((1, 0), dtype=np.uint8)
    cap_bound = False
    tested = 0
    kept: list[int] = []
    collision = 0.0
    for level in range(1, sketch.levels + 1):
        candidates = _extend(survivors)
        tested += len(candidates)
        n_level = int(data.tallies[level - 1].sum())
        if n_level == 0:
            survivors = candidates[:0]
            kept.append(0)
            break
        scored, tau = score_at_cut(data, level, candidates, z_cut)
        collision = max(collision, scored.collision)
        above = np.flatnonzero(scored.shares > tau)
        if level > 1 and len(above) > cap:
            cap_bound = True
            above = above[np.argsort(-scored.shares[above], kind="stable")[:cap]]
        survivors = candidates[above]
        kept.append(len(survivors))
        if not len(survivors):
            break
    values = [bytes(row) for row in survivors] if survivors.shape[1] == sketch.max_length else []
    shares = _shares(data, values, confidence, len(values))
    hitters = sorted(
        (
            HeavyHitter(*_text(v)[:1], s, lo, hi, n, _text(v)[1])
            for v, (s, lo, hi, n, _) in zip(values, shares, strict=True)
        ),
        key=lambda h: -h.share,
    )
    return Discovery(
        hitters,
        floor(sketch, data.n, alpha=alpha, collision=collision),
        cap_bound,
        len(kept),
        tested,
        confidence,
        kept,
    )


def score_candidates(
    sketch: PrefixSketch,
    counts: np.ndarray,
    candidates: list[str],
    *,
    confidence: float = 0.95,
    alpha: float = ALPHA,
) -> tuple[list[HeavyHitter], Floor]:
    """Candidate mode: each given string's share and interval from the same counts, and
    whether it passes the cut at z_{1-alpha/K} (K = the number of candidates); the floor
    stated is a full-length candidate's (a shorter one pools more levels, so it is lower)."""
    if not candidates:
        raise InvalidInput("candidates: give at least one string")
    if len(candidates) > MAX_CANDIDATES:
        raise InvalidInput(f"candidates: at most {MAX_CANDIDATES:,} strings per query")
    try:
        padded = list(dict.fromkeys(sketch.encode(c) for c in candidates))
    except ValueError as exc:
        raise InvalidInput(f"candidates: {exc}") from None
    data = SketchCounts(sketch, counts)
    shares = _shares(data, padded, confidence, len(padded))
    z_cut = _z(alpha / len(padded))
    out = []
    for value, (share, low, high, n, collision) in zip(padded, shares, strict=True):
        text, truncated = _text(value)
        cut = z_cut * math.sqrt(sketch.v_star / n + collision) if n else math.inf
        out.append(HeavyHitter(text, share, low, high, n, truncated, share > cut))
    out.sort(key=lambda h: -h.share)
    candidate_floor = floor(
        sketch,
        data.n // sketch.levels,
        levels=1,
        tested=len(padded),
        rounds=1,
        alpha=alpha,
        collision=max(row[4] for row in shares),
    )
    return out, candidate_floor


USEFUL_FLOOR = 0.05
"""Registration warns when a text metric's floor at :data:`EXPECTED_REPORTS` is above this
share: discovery then returns only strings held by more than one device in 20."""

EXPECTED_REPORTS = 100_000
"""The reports per period a registration's floor warning is computed at."""


def floor_warnings(sketch: PrefixSketch) -> list[str]:
    """Why a text metric's discovery floor deserves a warning at registration (empty if not)."""
    stated = floor(sketch, EXPECTED_REPORTS)
    if stated.t95 <= USEFUL_FLOOR:
        return []
    needed = reports_for_floor(sketch, USEFUL_FLOOR)
    more = f"{needed:,} reports per period bring it to {USEFUL_FLOOR:.0%}" if needed else ""
    return [
        f"discovery floor at {EXPECTED_REPORTS:,} reports per period is {stated.t95:.1%}"
        f" ({sketch.max_length}-byte strings, eps {sketch.epsilon:g}): only strings held by"
        f" at least that share of devices are found; {more} (shorter max_length or a larger"
        " eps lower it; candidate mode, ?candidates=, scores listed strings far lower)"
    ]


@dataclass(frozen=True)
class TextEstimate(MetricAbout):
    """A text metric's estimate over one period: the strings found (discovery) or scored
    (``candidates``), largest share first, each with its interval (simultaneous over the
    strings listed), and the run's detection ``floor``.

    ``floor.t95``: every string with at least that share is returned with probability >=
    0.95; with probability >= 0.95 no returned string is absent from the batch. A string
    below it may be missed, and one held by few devices is never returned. ``cap_bound``
    says the survivor cap bound in some round: the guarantee is then void.
    """

    metric: str
    start: str | None
    end: str | None
    mechanism: str
    epsilon: float
    max_length: int
    n: int
    confidence: float
    mode: str
    strings: list[HeavyHitter]
    floor: Floor
    cap_bound: bool
    survivor_cap: int
    tested: int


def text_document(
    metric: str,
    period: str | None,
    sketch: PrefixSketch,
    counts: np.ndarray,
    *,
    confidence: float = 0.95,
    candidates: list[str] | None = None,
    alpha: float = ALPHA,
) -> dict[str, object]:
    """The estimate document of a text metric's period (discovery, or candidate mode);
    ``alpha`` the run's family-wise probability of returning a string absent from the batch
    (a breakdown's slices share :data:`ALPHA` among them)."""
    if candidates is not None:
        hitters, stated = score_candidates(
            sketch, counts, candidates, confidence=confidence, alpha=alpha
        )
        mode, cap_bound, tested = "candidates", False, len(hitters)
    else:
        found = discover(sketch, counts, confidence=confidence, alpha=alpha)
        hitters, stated, cap_bound, tested = (
            found.hitters,
            found.floor,
            found.cap_bound,
            found.tested,
        )
        mode = "discovery"
    document = TextEstimate(
        metric,
        period,
        period,
        sketch.name,
        sketch.epsilon,
        sketch.max_length,
        SketchCounts(sketch, counts).n,
        confidence,
        mode,
        hitters,
        stated,
        cap_bound,
        SURVIVOR_CAP,
        tested,
    )
    return asdict(document)


PLAN_REPORTS = (10_000, 100_000, 1_000_000, 10_000_000)
"""The batch sizes ``deniable plan --text`` states the floor at."""


def floor_plan(
    sketch: PrefixSketch, *, target: float | None = None, reports: int | None = None
) -> dict[str, object]:
    """The discovery floor T95 (and the cut tau) at several batch sizes, at ``reports`` if
    given, and the fewest reports whose floor is at most ``target``."""
    sizes = sorted({*PLAN_REPORTS, *([reports] if reports else [])})
    document: dict[str, object] = {
        "max_length": sketch.max_length,
        "epsilon": sketch.epsilon,
        "mechanism": sketch.name,
        "levels": sketch.levels,
        "hypotheses": hypotheses(sketch),
        "floors": [
            {"reports": n, "t95": floor(sketch, n).t95, "tau": floor(sketch, n).tau} for n in sizes
        ],
    }
    if target is not None:
        document["target"] = target
        document["reports_needed"] = reports_for_floor(sketch, target)
    return document


@dataclass(frozen=True)
class TextSeries(MetricAbout):
    """A text metric's series: one discovery per period, oldest first, each with its own floor
    (each period is its own batch; nothing is pooled)."""

    metric: str
    confidence: float
    series: list[TextEstimate]


def text_series_document(
    metric: str,
    labels: list[str],
    sketch: PrefixSketch,
    counts: np.ndarray,
    *,
    confidence: float = 0.95,
) -> dict[str, object]:
    """The series document: :func:`text_document` of each period (``counts[i]`` its counts),
    its fields in :class:`TextSeries`' order (the unit, description and owner first, null
    until the collector fills them in)."""
    return {
        **MetricAbout().as_dict(),
        "metric": metric,
        "confidence": confidence,
        "series": [
            text_document(metric, label, sketch, counts[i], confidence=confidence)
            for i, label in enumerate(labels)
        ],
    }
