"""An empirical lower bound on the eps the shipped randomizers really give (docs/audit.md).

For a metric spec, :func:`audit_spec` draws ``samples`` reports of each of its inputs (every
category when k <= 16, a grid of t for numbers: :func:`audit_inputs`) through the device's
own recording path (:func:`deniable.client.sampling.randomized_reports`: ``prepare``,
``randomize``, the wire text), and reads the payloads back from the upload body. Over a family
of output events fixed before sampling, it bounds each log-ratio log P(E | x) / P(E | x'), for
every pair of inputs, from below with one-sided Clopper-Pearson bounds on each input's event
counts (drawn once, shared by every pair), Bonferroni over every count used, so that the
reported bound exceeds the code's true eps with probability at most 1 - confidence. A bound
above the claimed eps is proof (at that confidence) that the code leaks more than it claims:
the verdict ``fail``. An event metric's inputs are the values its windows aggregate to
(:func:`sampled_inputs`), each drawn as many windows of one event stream through the event
path (:func:`deniable.client.sampling.window_reports`). The auditor only detects violations; privacy itself is proven by review
and the exact checks (STATS.md section 8).

numpy and scipy load on first use, so the CLI can read the constants below without them.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from typing import TYPE_CHECKING, Any, Literal, Protocol

from deniable.client.errors import DeniableError, InvalidInput
from deniable.client.events import MEDIAN_BINS, median_bin
from deniable.client.kinds import (
    BooleanSpec,
    CategoricalSpec,
    HistogramSpec,
    NumericSpec,
    OracleSpec,
    TextSpec,
)
from deniable.client.mechanisms import OLH_PRIME, Hybrid, Piecewise
from deniable.client.randomness import Randomness, SeededRandomness
from deniable.client.sampling import randomized_reports
from deniable.client.spec import MetricSpec

if TYPE_CHECKING:
    import numpy as np

DEFAULT_CONFIDENCE = 0.99
"""The confidence of the audited bound: P(bound > the code's true eps) <= 1 - confidence."""

DEFAULT_REPORTS = 200_000
"""Reports drawn per audit by default, spread evenly over its inputs (the CI default, from
the power calculation in docs/audit.md): 100,000 each for a boolean's two, 40,000 each for
five categories or the five numeric inputs. The cost of an audit is then about the same
whatever its number of inputs.

At eps = 1 a brr that answers truthfully 1 percentage point too often (true log-ratio 1.051)
is caught with z = 5.2 (a miss once in 12 million seeds) under the normal approximation to
the binomial; an oue that never flips its middle bit is caught whatever the seed (bound
8.35), and a pm whose window probability is e^eps/(e^eps+1) for interior t only with z = 32
(docs/audit.md; ``python -m bench.audit_power``).
"""

LOOSE_FRACTION = 0.9
"""The verdict is ``loose`` when even the upper confidence bound of the family's largest
log-ratio is below this fraction of the claimed eps: the code provably spends less privacy
than it is charged (loose accounting, or wrong parameters that cost accuracy)."""

SMALL_K = 16
"""With at most this many categories (or buckets) every one is an input, every pair of them is
compared, and for krr and brr every single output is an event; above it, only the first, the
middle and the last category, and their own outputs."""

NUMERIC_INPUTS = 5
"""Numeric mechanisms: the inputs t = -1, -1/2, 0, 1/2, 1 (evenly spaced, the ends included),
so that a randomizer wrong only inside (-1, 1) is reached."""

NUMERIC_BINS = 32
"""pm and hybrid: the tails {y > c} and {y < c} at the inner edges of this many equal bins over
[-B, B], B the mechanism's bound, plus c = -1, 0, 1 (pm's windows for t = -1 and t = +1 end
and start at -1 and +1). duchi's outputs are +-C1, so its only tails are at c = 0."""

CHUNK = 50_000
"""Reports drawn per upload body: memory holds one body (about 7 MB) at a time."""

SWEEP_EPSILONS = (0.5, 1.0, 2.0, 4.0)
"""The eps values :func:`mechanism_sweep` audits every mechanism at (the CI sweep)."""

SWEEP_CATEGORIES = ("c0", "c1", "c2", "c3", "c4")
"""The categories of the sweep's categorical specs (k = 5)."""

SWEEP_EDGES = (0, 10, 50, 100, 500, 1000)
"""The edges of the sweep's histogram specs (five buckets)."""

SWEEP_HISTOGRAM_MECHANISMS = ("krr", "oue", "olh")
"""The sweep's histogram uses these in turn, one per eps, so each goes through a bucket."""

Verdict = Literal["pass", "loose", "fail"]
VERDICTS: tuple[Verdict, ...] = ("pass", "loose", "fail")
"""Every verdict: ``fail`` when the lower bound exceeds the claimed eps, ``loose`` when the
upper bound is below :data:`LOOSE_FRACTION` of it, ``pass`` otherwise."""


class AuditError(DeniableError):
    """The randomizer produced payloads a collector would refuse, so no bound can be read."""


@dataclass(frozen=True)
class AuditResult:
    """One metric's audit: the claimed eps against the bounds read from sampled reports."""

    metric: str
    type: str
    mechanism: str
    epsilon: float
    """The eps the spec claims."""
    lower_bound: float
    """The audited lower bound on the eps the code gives (at ``confidence``; 0 at least)."""
    upper_bound: float
    """An upper bound (at ``confidence``) on the largest log-ratio over the event family;
    infinite when an event was too rare to bound it."""
    confidence: float
    samples: int
    """Reports drawn per input."""
    seconds: float
    verdict: Verdict
    inputs: str
    """The inputs compared (every pair of them), in words."""
    event: str
    """The event and ordered pair of inputs that gave the lower bound, in words."""
    message: str
    """The verdict in one sentence."""

    @property
    def ratio(self) -> float:
        """The lower bound as a fraction of the claimed eps."""
        return self.lower_bound / self.epsilon

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (an infinite upper bound is ``null``), with ``ratio``."""
        data = asdict(self)
        if not math.isfinite(self.upper_bound):
            data["upper_bound"] = None
        data["ratio"] = self.ratio
        return data


@dataclass(frozen=True)
class EventFamily:
    """Output events fixed before sampling: their names, how to count every one of them in a
    body, and for each the inputs (positions in :func:`audit_inputs`) it is compared across."""

    names: tuple[str, ...]
    count: Callable[[list[Any]], np.ndarray]
    support: tuple[tuple[int, ...], ...]


def _payloads(body: bytes) -> list[Any]:
    """The payloads of an upload body, in order (parsed once)."""
    return [report["payload"] for report in json.loads(body)["reports"]]


def payload_ints(payloads: list[Any], low: int, high: int, what: str) -> np.ndarray:
    """Integer payloads as an array; :class:`AuditError` for anything outside [low, high]."""
    import numpy as np

    values = np.array(payloads)
    if values.dtype.kind not in "iu" or values.min() < low or values.max() > high:
        raise AuditError(f"{what} payloads are not all integers in {low}..{high}")
    return values.astype(np.int64)


def oue_payload_bits(payloads: list[Any], n_bytes: int) -> np.ndarray:
    """oue payloads (base64 of ``n_bytes`` bytes each) as one row of bits per report, bit i of
    a row being item i; :class:`AuditError` for a payload that is not so."""
    import numpy as np

    try:
        joined = b"".join(base64.b64decode(p, validate=True) for p in payloads)
        raw = np.frombuffer(joined, np.uint8).reshape(len(payloads), n_bytes)
    except (TypeError, ValueError):
        raise AuditError(f"oue payloads are not all base64 of {n_bytes} bytes") from None
    return np.unpackbits(raw, axis=1, bitorder="little")


def olh_payload_columns(payloads: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """olh payloads as their ``a``, ``b`` and ``y`` columns (int64 arrays);
    :class:`AuditError` for a payload that is not an object of integers below 2^31 - 1."""
    import numpy as np

    try:
        table = np.array([(p["a"], p["b"], p["y"]) for p in payloads])
    except (TypeError, KeyError):
        raise AuditError('olh payloads are not all objects with "a", "b", "y"') from None
    if table.dtype.kind not in "iu" or table.min() < 0 or table.max() >= OLH_PRIME:
        raise AuditError("olh payloads are not all integers below 2^31 - 1")
    a, b, y = table.astype(np.int64).T
    return a, b, y


def ordered_pairs(m: int) -> list[tuple[int, int]]:
    """Every ordered pair (a, b) of distinct positions among m inputs."""
    return [(a, b) for a in range(m) for b in range(m) if a != b]


def _choice_family(spec: MetricSpec, indices: list[int]) -> EventFamily:
    """krr and brr: {report = o} for every output o (the inputs' own when k > SMALL_K),
    each compared across every pair of inputs."""
    import numpy as np

    outputs = list(range(spec.k)) if spec.k <= SMALL_K else indices

    def count(payloads: list[Any]) -> np.ndarray:
        values = payload_ints(payloads, 0, spec.k - 1, spec.mechanism)
        return np.bincount(values, minlength=spec.k)[outputs]

    names = tuple(f"report = {spec.categories[o]}" for o in outputs)
    return EventFamily(names, count, (tuple(range(len(indices))),) * len(outputs))


def _oue_family(spec: MetricSpec, indices: list[int]) -> EventFamily:
    """oue: for each ordered pair of inputs (i, j), {bit i = 1 and bit j = 0} compared across
    that pair; and each input's bit alone, compared across every pair."""
    import numpy as np

    n_bytes, m = (spec.k + 7) // 8, len(indices)
    pairs = ordered_pairs(m)
    rows, columns = np.array(pairs, dtype=np.int64).reshape(-1, 2).T

    def count(payloads: list[Any]) -> np.ndarray:
        bits = oue_payload_bits(payloads, n_bytes)[:, indices].astype(np.int64)
        joint = bits.T @ (1 - bits)  # [a, b]: reports with bit a = 1 and bit b = 0
        return np.concatenate([joint[rows, columns], bits.sum(axis=0)])

    labels = [spec.categories[i] for i in indices]
    names = tuple(f"bit {labels[a]} = 1 and bit {labels[b]} = 0" for a, b in pairs)
    names += tuple(f"bit {label} = 1" for label in labels)
    return EventFamily(names, count, tuple(pairs) + (tuple(range(m)),) * m)


def _olh_family(spec: MetricSpec, indices: list[int]) -> EventFamily:
    """olh: for each ordered pair of inputs (i, j), {y = H(i) and H(j) != H(i)} (H from the
    payload's own a, b), compared across that pair."""
    import numpy as np

    g = spec.randomizer.g  # type: ignore[attr-defined]
    pairs = ordered_pairs(len(indices))
    rows, columns = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    values = np.array(indices, dtype=np.int64)

    def count(payloads: list[Any]) -> np.ndarray:
        a, b, y = olh_payload_columns(payloads)
        hashes = ((a[:, None] * values + b[:, None]) % OLH_PRIME) % g
        hit = hashes == y[:, None]
        return np.array(
            [
                (hit[:, i] & (hashes[:, i] != hashes[:, j])).sum()
                for i, j in zip(rows, columns, strict=True)
            ]
        )

    labels = [spec.categories[i] for i in indices]
    names = tuple(f"y = H({labels[a]}) and H({labels[b]}) != H({labels[a]})" for a, b in pairs)
    return EventFamily(names, count, tuple(pairs))


TEXT_INPUTS = ("alpha", "bravo", "charlie")
"""The strings a text audit compares: their first bytes differ, so their prefixes differ at
every level the device may be pinned to."""


def _text_family(spec: MetricSpec, values: Sequence[str]) -> EventFamily:
    """pem: for each ordered pair of inputs (i, j), {the bit of i's cell = 1, the bit of j's
    cell = 0, and the two cells differ}, the cells read at the report's own level and row,
    compared across that pair (its ratio is p(1-q) / ((1-p) q) = e^eps for the real one)."""
    import numpy as np

    from .heavyhitters import SketchCounts

    sketch = spec.text_randomizer
    data = SketchCounts(sketch, np.zeros(sketch.cell_count, dtype=np.int64))
    padded = np.frombuffer(b"".join(sketch.encode(v) for v in values), np.uint8).reshape(
        len(values), -1
    )
    cells = np.stack(  # [input, level - 1, row]
        [
            data.hashes(padded[:, : sketch.prefix_length(level)])
            for level in range(1, sketch.levels + 1)
        ],
        axis=1,
    )
    pairs = ordered_pairs(len(values))

    def count(payloads: list[Any]) -> np.ndarray:
        try:
            raw = np.frombuffer(
                b"".join(base64.b64decode(p["b"], validate=True) for p in payloads), np.uint8
            ).reshape(len(payloads), sketch.n_bytes)
            level = np.array([p["l"] for p in payloads], dtype=np.int64) - 1
            row = np.array([p["r"] for p in payloads], dtype=np.int64)
            mine = cells[:, level, row]  # [input, report]
        except (TypeError, KeyError, ValueError, IndexError):
            raise AuditError("pem payloads are not all objects with b, l and r") from None
        bits = np.unpackbits(raw, axis=1, bitorder="little")
        hit = bits[np.arange(len(payloads)), mine]  # [input, report]
        return np.array(
            [((hit[i] == 1) & (hit[j] == 0) & (mine[i] != mine[j])).sum() for i, j in pairs]
        )

    names = tuple(f"cell of {values[a]} = 1 and cell of {values[b]} = 0" for a, b in pairs)
    return EventFamily(names, count, tuple(pairs))


def numeric_thresholds(bound: float) -> list[float]:
    """The tails' split points c: inner edges of :data:`NUMERIC_BINS` bins over [-B, B],
    and -1, 0, 1."""
    edges = {-bound + 2 * bound * i / NUMERIC_BINS for i in range(1, NUMERIC_BINS)}
    return sorted(edges | {-1.0, 0.0, 1.0})


def _piecewise_part(spec: MetricSpec) -> Piecewise | None:
    """The pm randomizer inside a numeric spec's mechanism (pm itself, or hybrid's when it
    uses pm at all); None for duchi."""
    randomizer = spec.numeric_randomizer
    if isinstance(randomizer, Piecewise):
        return randomizer
    if isinstance(randomizer, Hybrid) and randomizer.pm_probability > 0:
        return randomizer.piecewise
    return None


def window_gaps(spec: MetricSpec, ts: Sequence[float]) -> list[tuple[float, float]]:
    """For each ordered pair of inputs (t, t'), the open interval inside pm's window for t
    and outside the window for t': where the densities' ratio is e^eps. Empty for duchi."""
    piecewise = _piecewise_part(spec)
    if piecewise is None:
        return []
    windows = [piecewise.window(t) for t in ts]
    gaps = []
    for a, b in ordered_pairs(len(ts)):
        (left, right), (other_left, other_right) = windows[a], windows[b]
        if ts[a] < ts[b]:
            gaps.append((left, min(right, other_left)))
        else:
            gaps.append((max(left, other_right), right))
    return gaps


def _numeric_family(spec: MetricSpec, ts: Sequence[float]) -> EventFamily:
    """duchi, pm, hybrid: the tails {y > c} and {y < c} (post-processing of y), compared
    across every pair of inputs (duchi's outputs are +-C1, so only c = 0 there); and for pm's
    part, each ordered pair's window gap (:func:`window_gaps`), compared across that pair."""
    import numpy as np

    bound = spec.numeric_randomizer.bound
    has_pm = _piecewise_part(spec) is not None
    cuts = np.array(numeric_thresholds(bound) if has_pm else [0.0])
    gaps = window_gaps(spec, ts)
    gap_low = np.array([low for low, _ in gaps])
    gap_high = np.array([high for _, high in gaps])

    def count(payloads: list[Any]) -> np.ndarray:
        y = np.array(payloads)
        if y.dtype.kind not in "iuf" or not np.all(np.abs(y) <= bound * (1 + 1e-9)):
            raise AuditError(f"numeric payloads are not all numbers in [-{bound:.6g}, {bound:.6g}]")
        y = np.sort(y.astype(np.float64))
        above = len(y) - np.searchsorted(y, cuts, side="right")
        below = np.searchsorted(y, cuts, side="left")
        inside = np.searchsorted(y, gap_high, side="left") - np.searchsorted(
            y, gap_low, side="right"
        )
        return np.concatenate([above, below, np.maximum(inside, 0)])

    names = tuple([f"y > {c:.4g}" for c in cuts.tolist()] + [f"y < {c:.4g}" for c in cuts.tolist()])
    names += tuple(f"{low:.4g} < y < {high:.4g}" for low, high in gaps)
    pairs = tuple(ordered_pairs(len(ts))) if gaps else ()
    support = (tuple(range(len(ts))),) * (2 * len(cuts)) + pairs
    return EventFamily(names, count, support)


def _category_indices(spec: MetricSpec) -> list[int]:
    """The categories audited: all of them when k <= SMALL_K, else the first, middle, last."""
    if spec.k <= SMALL_K:
        return list(range(spec.k))
    return [0, spec.k // 2, spec.k - 1]


def numeric_inputs(spec: NumericSpec) -> list[float]:
    """The recorded values of a numeric audit: :data:`NUMERIC_INPUTS` points evenly spaced
    on t in [-1, 1], the ends included."""
    steps = NUMERIC_INPUTS - 1
    return [spec.unscale(-1 + 2 * i / steps) for i in range(NUMERIC_INPUTS)]


@functools.singledispatch
def audit_inputs(spec: MetricSpec) -> list[tuple[Any, str]]:
    """The recorded values the audit draws reports of, each with its text; every pair of
    them is compared (LDP bounds the ratio for any two inputs). Booleans: false, true;
    categories and buckets: every one when k <= SMALL_K, else the first, middle and last (a
    histogram's bucket by its lower edge, the last by the closed upper edge, so ``bucket_of``
    clamps); numbers: :func:`numeric_inputs`, so pm's interior windows are reached. One
    implementation per kind; a kind without one cannot be audited."""
    raise TypeError(f"metric {spec.name}: the auditor has no inputs for a {spec.type} metric")


@audit_inputs.register
def _categorical_inputs(spec: CategoricalSpec) -> list[tuple[Any, str]]:
    """Categories: each audited one, by its name."""
    return [(spec.categories[i], spec.categories[i]) for i in _category_indices(spec)]


@audit_inputs.register
def _boolean_inputs(spec: BooleanSpec) -> list[tuple[Any, str]]:
    """Booleans: false and true."""
    return [(False, "false"), (True, "true")]


@audit_inputs.register
def _histogram_inputs(spec: HistogramSpec) -> list[tuple[Any, str]]:
    """Buckets: each audited one by its lower edge, the last by its closed upper edge."""
    indices = _category_indices(spec)
    edges = spec.edges
    values = [edges[-1] if i == spec.k - 1 else edges[i] for i in indices]
    return [(v, f"{v:g} in {spec.categories[i]}") for v, i in zip(values, indices, strict=True)]


@audit_inputs.register
def _numeric_inputs(spec: NumericSpec) -> list[tuple[Any, str]]:
    """Numbers: :func:`numeric_inputs`, each with its t."""
    return [(x, f"{x:g} (t = {spec.scale(x):+.3g})") for x in numeric_inputs(spec)]


@audit_inputs.register
def _text_inputs(spec: TextSpec) -> list[tuple[Any, str]]:
    """Strings: :data:`TEXT_INPUTS`."""
    return [(value, value) for value in TEXT_INPUTS]


def sampled_inputs(spec: MetricSpec) -> list[tuple[Any, str]]:
    """The values the audit draws reports of: :func:`audit_inputs`, or for an event metric
    the nearest values one of its windows can aggregate to (a ``count`` is a whole number of
    events, in the same bucket for a histogram; a numeric ``median`` is the middle of its
    bin), each once. :class:`~deniable.client.errors.InvalidInput` if fewer than two remain."""
    inputs = audit_inputs(spec)
    rule = spec.events
    if rule is None:
        return inputs
    reachable: list[tuple[Any, str]] = []
    seen: set[Any] = set()
    for value, text in inputs:
        window = _window_value(spec, rule.aggregate, value)
        if window is None:
            continue
        if window != value:
            text = f"{window:g}" + (
                f" in {spec.categories[spec.index_of(window)]}"
                if isinstance(spec, HistogramSpec)
                else f" (t = {spec.scale(window):+.3g})"
            )
        key = spec.index_of(window) if isinstance(spec, HistogramSpec) else window
        if key not in seen:
            seen.add(key)
            reachable.append((window, text))
    if len(reachable) < 2:
        raise InvalidInput(f"metric {spec.name}: its windows reach fewer than two audited values")
    return reachable


def _window_value(spec: MetricSpec, aggregate: str, value: Any) -> Any:
    """The value nearest ``value`` that a window aggregating by ``aggregate`` reports (None:
    none in ``value``'s bucket)."""
    if aggregate == "count":
        if isinstance(spec, HistogramSpec):
            whole = float(math.ceil(value))
            return whole if spec.bucket_of(whole) == spec.bucket_of(value) else None
        return float(round(value))
    if aggregate == "median" and isinstance(spec, NumericSpec):
        lower, upper = float(spec.lower), float(spec.upper)
        return lower + (median_bin(value, lower, upper) + 0.5) * (upper - lower) / MEDIAN_BINS
    return value


@functools.singledispatch
def event_family(spec: MetricSpec) -> EventFamily:
    """The spec's output events, fixed before any report is drawn (one implementation per
    kind)."""
    raise TypeError(f"metric {spec.name}: the auditor has no events for a {spec.type} metric")


@event_family.register
def _numeric_events(spec: NumericSpec) -> EventFamily:
    """A numeric metric's events over its inputs' t."""
    return _numeric_family(spec, [spec.scale(x) for x, _ in sampled_inputs(spec)])


@event_family.register
def _text_events(spec: TextSpec) -> EventFamily:
    """A text metric's events over its strings."""
    return _text_family(spec, [value for value, _ in sampled_inputs(spec)])


@event_family.register
def _oracle_events(spec: OracleSpec) -> EventFamily:
    """A kind with categories: the events of its frequency oracle."""
    indices = [spec.index_of(value) for value, _ in sampled_inputs(spec)]
    if spec.mechanism in ("krr", "brr"):
        return _choice_family(spec, indices)
    if spec.mechanism == "oue":
        return _oue_family(spec, indices)
    return _olh_family(spec, indices)


class ReportSource(Protocol):
    """Draws the upload body a device's SDK sends after ``count`` records of ``value``:
    Python's :func:`~deniable.client.sampling.randomized_reports`, or another SDK's twin."""

    def __call__(
        self, spec: MetricSpec, value: Any, count: int, *, randomness: Randomness | None = None
    ) -> bytes: ...


def _event_counts(
    spec: MetricSpec,
    value: Any,
    family: EventFamily,
    samples: int,
    rng: Randomness | None,
    source: ReportSource,
) -> np.ndarray:
    """How many of ``samples`` reports of ``value`` fall in each event, drawn a chunk at a time."""
    import numpy as np

    counts = np.zeros(len(family.names), dtype=np.int64)
    for start in range(0, samples, CHUNK):
        body = source(spec, value, min(CHUNK, samples - start), randomness=rng)
        counts += family.count(_payloads(body))
    return counts


def log_ratio_bounds(
    counts: np.ndarray,
    samples: int,
    support: Sequence[Sequence[int]],
    confidence: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower and upper confidence bounds on log P(E | x) / P(E | x') for each event E and each
    ordered pair (x, x') of distinct inputs in E's support, holding jointly at ``confidence``;
    and those comparisons as rows (event, x, x').

    ``counts[x, e]`` counts event e among ``samples`` reports of input x. Every cell (x, e)
    used, x in e's support, gets a one-sided Clopper-Pearson bound below and above, each at
    (1 - confidence) / (2 * cells) (Bonferroni over all of them, however many pairs share a
    cell); a ratio's lower bound divides its numerator's lower bound by its denominator's upper
    bound, and the reverse for its upper bound.
    """
    import numpy as np

    from .intervals import clopper_pearson

    cells = np.array([(x, e) for e, inputs in enumerate(support) for x in inputs], dtype=np.int64)
    alpha = (1 - confidence) / (2 * len(cells))
    low_cells, high_cells = clopper_pearson(
        counts[cells[:, 0], cells[:, 1]], np.full(len(cells), samples), 2 * alpha
    )
    low = np.full(counts.shape, np.nan)
    high = np.full(counts.shape, np.nan)
    low[cells[:, 0], cells[:, 1]] = low_cells
    high[cells[:, 0], cells[:, 1]] = high_cells
    comparisons = np.array(
        [(e, x, y) for e, inputs in enumerate(support) for x in inputs for y in inputs if x != y],
        dtype=np.int64,
    ).reshape(-1, 3)
    e, x, y = comparisons.T
    with np.errstate(divide="ignore"):
        lower = np.log(low[x, e] / high[y, e])
        upper = np.log(high[x, e] / low[y, e])
    return lower, upper, comparisons


def _verdict(epsilon: float, lower: float, upper: float) -> Verdict:
    """``fail`` above the claim, ``loose`` well below it, ``pass`` otherwise (see VERDICTS)."""
    if lower > epsilon:
        return "fail"
    if upper < LOOSE_FRACTION * epsilon:
        return "loose"
    return "pass"


def _message(result: dict[str, Any]) -> str:
    """The verdict in one sentence."""
    eps, lower, upper = result["epsilon"], result["lower_bound"], result["upper_bound"]
    level = f"{result['confidence'] * 100:g}%"
    if result["verdict"] == "fail":
        return (
            f"the randomizer leaks more than it claims: eps >= {lower:.3f} > {eps:g}"
            f" at {level} confidence ({result['event']})"
        )
    if result["verdict"] == "loose":
        return (
            f"the randomizer gives at most eps {upper:.3f} at {level} confidence, below"
            f" {LOOSE_FRACTION:g} x {eps:g}: the accounting is loose or its parameters cost"
            " accuracy"
        )
    if not math.isfinite(upper):
        return (
            f"no violation found (eps >= {lower:.3f}); too few samples to bound the ratio from"
            " above"
        )
    return f"no violation found: eps >= {lower:.3f} ({lower / eps:.0%} of the claimed {eps:g})"


def audit_spec(
    spec: MetricSpec,
    *,
    samples: int | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int | None = None,
    source: ReportSource = randomized_reports,
) -> AuditResult:
    """Audit one spec's randomizer through the recording path (see the module docstring) of
    the SDK ``source`` draws from (Python's by default).

    ``samples`` reports are drawn per input, once, and reused for every pair holding it;
    None spreads :data:`DEFAULT_REPORTS` evenly over the inputs. ``seed`` None draws from the
    OS CSPRNG, as a device does; a seed makes the run deterministic
    (``SeededRandomness(seed)``, the same for every spec, so a metric's result does not depend
    on which others are audited with it).
    """
    import numpy as np

    if samples is not None and (
        isinstance(samples, bool) or not isinstance(samples, int) or samples < 1
    ):
        raise InvalidInput("samples must be a whole number of at least 1")
    if not 0 < confidence < 1:
        raise InvalidInput("confidence must be strictly between 0 and 1")
    started = time.perf_counter()
    family = event_family(spec)
    inputs = sampled_inputs(spec)
    per_input = samples if samples is not None else max(1, DEFAULT_REPORTS // len(inputs))
    rng = SeededRandomness(seed) if seed is not None else None
    counts = np.stack(
        [_event_counts(spec, value, family, per_input, rng, source) for value, _ in inputs]
    )
    lower, upper, comparisons = log_ratio_bounds(counts, per_input, family.support, confidence)
    best = int(lower.argmax())
    event, over, under = comparisons[best]
    texts = [text for _, text in inputs]
    fields: dict[str, Any] = {
        "metric": spec.name,
        "type": spec.type,
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "lower_bound": max(0.0, float(lower[best])),
        "upper_bound": float(upper.max()),
        "confidence": confidence,
        "samples": per_input,
        "inputs": f"every pair of {len(texts)}: {', '.join(texts)}",
        "event": f"{family.names[event]}: P(. | {texts[over]}) / P(. | {texts[under]})",
    }
    fields["verdict"] = _verdict(spec.epsilon, fields["lower_bound"], fields["upper_bound"])
    fields["message"] = _message(fields)
    return AuditResult(**fields, seconds=time.perf_counter() - started)


def audit_specs(
    specs: Iterable[MetricSpec],
    *,
    samples: int | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int | None = None,
    jobs: int = 1,
    on_result: Callable[[AuditResult], None] | None = None,
    source: ReportSource = randomized_reports,
) -> list[AuditResult]:
    """Audit each spec (see :func:`audit_spec`), in ``jobs`` processes at once; the results
    come in the specs' order, each told to ``on_result`` as it is ready. With a seed, the
    results do not depend on ``jobs``. Workers are spawned, not forked: they start from a
    clean interpreter whatever threads the caller runs (a progress bar's, a server's)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidInput("jobs must be a whole number of at least 1")
    specs = list(specs)
    audit = functools.partial(
        audit_spec, samples=samples, confidence=confidence, seed=seed, source=source
    )
    results = []
    with contextlib.ExitStack() as stack:
        if min(jobs, len(specs)) == 1:
            answers: Iterator[AuditResult] = map(audit, specs)
        else:
            pool = stack.enter_context(
                ProcessPoolExecutor(min(jobs, len(specs)), mp_context=get_context("spawn"))
            )
            answers = pool.map(audit, specs)
        for result in answers:
            if on_result is not None:
                on_result(result)
            results.append(result)
    return results


def mechanism_sweep(epsilons: Sequence[float] = SWEEP_EPSILONS) -> list[MetricSpec]:
    """One spec per mechanism per eps: brr on a boolean, krr/oue/olh on five categories,
    duchi/pm/hybrid on a number, and a histogram (through krr, oue and olh in turn)."""
    specs = []
    for i, eps in enumerate(epsilons):
        tag = f"eps{eps:g}"
        specs.append(MetricSpec.boolean(f"brr-{tag}", epsilon=eps, mechanism="brr"))
        specs += [
            MetricSpec.categorical(f"{m}-{tag}", SWEEP_CATEGORIES, epsilon=eps, mechanism=m)
            for m in ("krr", "oue", "olh")
        ]
        specs += [
            MetricSpec.numeric(f"{m}-{tag}", lower=0, upper=1000, epsilon=eps, mechanism=m)
            for m in ("duchi", "pm", "hybrid")
        ]
        histogram = SWEEP_HISTOGRAM_MECHANISMS[i % len(SWEEP_HISTOGRAM_MECHANISMS)]
        specs.append(
            MetricSpec.histogram(
                f"histogram-{histogram}-{tag}", SWEEP_EDGES, epsilon=eps, mechanism=histogram
            )
        )
    return specs


def audit_document(
    results: Sequence[AuditResult], seconds: float, *, seed: int | None = None
) -> dict[str, Any]:
    """The JSON document of an audit: every result, the count of each verdict, the wall time,
    the seed (null: the OS CSPRNG) and whether any failed (the CLI's exit status)."""
    return {
        "results": [r.to_dict() for r in results],
        "summary": {v: sum(r.verdict == v for r in results) for v in VERDICTS},
        "seconds": seconds,
        "seed": seed,
        "failed": any(r.verdict == "fail" for r in results),
    }


from . import setaudit as setaudit  # noqa: E402  (registers the set kind's inputs and events)
