"""An empirical lower bound on the eps the shipped randomizers really give (docs/audit.md).

For a metric spec, :func:`audit_spec` draws ``samples`` reports of each of two adjacent inputs
chosen to be the mechanism's worst case, through the device's own recording path
(:func:`deniable.client.sampling.randomized_reports`: ``prepare``, ``randomize``, the wire
text), and reads the payloads back from the upload body. Over a family of output events fixed
before sampling, it bounds each log-ratio log P(E | x) / P(E | x') from below with one-sided
Clopper-Pearson bounds, Bonferroni over the family, so that the reported bound exceeds the
code's true eps with probability at most 1 - confidence. A bound above the claimed eps is
proof (at that confidence) that the code leaks more than it claims: the verdict ``fail``.
The auditor only detects violations; privacy itself is proven by review and the exact checks
(STATS.md section 8).

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
from typing import TYPE_CHECKING, Any, Literal

from deniable.client.errors import DeniableError, InvalidInput
from deniable.client.mechanisms import OLH_PRIME
from deniable.client.randomness import Randomness, SeededRandomness
from deniable.client.sampling import randomized_reports
from deniable.client.spec import MetricSpec

if TYPE_CHECKING:
    import numpy as np

DEFAULT_CONFIDENCE = 0.99
"""The confidence of the audited bound: P(bound > the code's true eps) <= 1 - confidence."""

DEFAULT_SAMPLES = 100_000
"""Reports drawn per input, the CI default, from the power calculation in docs/audit.md.

At eps = 1 a brr that answers truthfully 1 percentage point too often (true log-ratio 1.051)
is caught with z = 5.2 (a miss once in 12 million seeds) under the normal approximation to
the binomial, and the real brr and krr (k = 5) give bounds of about 0.98 and 0.96: the
Bonferroni margin costs 6.8/sqrt(n) and 11.9/sqrt(n) in log-ratio. The sweep of every
mechanism at four eps (:func:`mechanism_sweep`) takes 34 s with two jobs on the idle 2-core
CI machine (68 s in one), 43 to 54 s while another test suite shares its cores.
"""

LOOSE_FRACTION = 0.9
"""The verdict is ``loose`` when even the upper confidence bound of the family's largest
log-ratio is below this fraction of the claimed eps: the code provably spends less privacy
than it is charged (loose accounting, or wrong parameters that cost accuracy)."""

SMALL_K = 16
"""krr and brr: with at most this many categories every single output is an event; above
it, only the outputs equal to the two inputs (the others' ratio is 1 for a correct krr)."""

NUMERIC_BINS = 32
"""Numeric mechanisms: the tails {y > c} and {y < c} at the inner edges of this many equal
bins over [-B, B], B the mechanism's bound, plus c = -1, 0, 1 (pm's windows for t = -1 and
t = +1 end and start at -1 and +1; duchi's outputs are +-C1, split at 0)."""

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
    """The two adjacent inputs, in words."""
    event: str
    """The event and order that gave the lower bound, in words."""
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
class _Family:
    """Output events fixed before sampling: their names, and how to count them in a body."""

    names: tuple[str, ...]
    count: Callable[[list[Any]], np.ndarray]


def _payloads(body: bytes) -> list[Any]:
    """The payloads of an upload body, in order (parsed once)."""
    return [report["payload"] for report in json.loads(body)["reports"]]


def _ints(payloads: list[Any], low: int, high: int, what: str) -> np.ndarray:
    """Integer payloads as an array; :class:`AuditError` for anything outside [low, high]."""
    import numpy as np

    values = np.array(payloads)
    if values.dtype.kind not in "iu" or values.min() < low or values.max() > high:
        raise AuditError(f"{what} payloads are not all integers in {low}..{high}")
    return values.astype(np.int64)


def _choice_family(spec: MetricSpec, i0: int, i1: int) -> _Family:
    """krr and brr: {report = o} for every output o (or the two inputs' when k > SMALL_K)."""
    import numpy as np

    outputs = list(range(spec.k)) if spec.k <= SMALL_K else [i0, i1]

    def count(payloads: list[Any]) -> np.ndarray:
        values = _ints(payloads, 0, spec.k - 1, spec.mechanism)
        return np.bincount(values, minlength=spec.k)[outputs]

    names = tuple(f"report = {spec.categories[o]}" for o in outputs)
    return _Family(names, count)


def _oue_family(spec: MetricSpec, i0: int, i1: int) -> _Family:
    """oue: the two inputs' bits, jointly and each alone."""
    import numpy as np

    n_bytes = (spec.k + 7) // 8

    def bit(raw: np.ndarray, v: int) -> np.ndarray:
        return (raw[:, v >> 3] >> (v & 7)) & 1 == 1

    def count(payloads: list[Any]) -> np.ndarray:
        try:
            joined = b"".join(base64.b64decode(p, validate=True) for p in payloads)
            raw = np.frombuffer(joined, np.uint8).reshape(len(payloads), n_bytes)
        except (TypeError, ValueError):
            raise AuditError(f"oue payloads are not all base64 of {n_bytes} bytes") from None
        b0, b1 = bit(raw, i0), bit(raw, i1)
        return np.array([(b0 & ~b1).sum(), (~b0 & b1).sum(), b0.sum(), b1.sum()])

    c0, c1 = spec.categories[i0], spec.categories[i1]
    names = (
        f"bit {c0} = 1 and bit {c1} = 0",
        f"bit {c0} = 0 and bit {c1} = 1",
        f"bit {c0} = 1",
        f"bit {c1} = 1",
    )
    return _Family(names, count)


def _olh_family(spec: MetricSpec, i0: int, i1: int) -> _Family:
    """olh: y is one input's hash and the two hashes differ (H from the payload's own a, b)."""
    import numpy as np

    g = spec.randomizer.g  # type: ignore[attr-defined]

    def count(payloads: list[Any]) -> np.ndarray:
        try:
            table = np.array([(p["a"], p["b"], p["y"]) for p in payloads])
        except (TypeError, KeyError):
            raise AuditError('olh payloads are not all objects with "a", "b", "y"') from None
        if table.dtype.kind not in "iu" or table.min() < 0 or table.max() >= OLH_PRIME:
            raise AuditError("olh payloads are not all integers below 2^31 - 1")
        a, b, y = table.astype(np.int64).T
        h0 = ((a * i0 + b) % OLH_PRIME) % g
        h1 = ((a * i1 + b) % OLH_PRIME) % g
        apart = h0 != h1
        return np.array([((y == h0) & apart).sum(), ((y == h1) & apart).sum()])

    c0, c1 = spec.categories[i0], spec.categories[i1]
    names = (
        f"y = H({c0}) and H({c1}) != H({c0})",
        f"y = H({c1}) and H({c0}) != H({c1})",
    )
    return _Family(names, count)


def numeric_thresholds(bound: float) -> list[float]:
    """The tails' split points c: inner edges of :data:`NUMERIC_BINS` bins over [-B, B],
    and -1, 0, 1."""
    edges = {-bound + 2 * bound * i / NUMERIC_BINS for i in range(1, NUMERIC_BINS)}
    return sorted(edges | {-1.0, 0.0, 1.0})


def _numeric_family(spec: MetricSpec) -> _Family:
    """duchi, pm, hybrid: the tails {y > c} and {y < c} (post-processing of y)."""
    import numpy as np

    bound = spec.numeric_randomizer.bound
    cuts = np.array(numeric_thresholds(bound))

    def count(payloads: list[Any]) -> np.ndarray:
        y = np.array(payloads)
        if y.dtype.kind not in "iuf" or not np.all(np.abs(y) <= bound * (1 + 1e-9)):
            raise AuditError(f"numeric payloads are not all numbers in [-{bound:.6g}, {bound:.6g}]")
        y = np.sort(y.astype(np.float64))
        above = len(y) - np.searchsorted(y, cuts, side="right")
        below = np.searchsorted(y, cuts, side="left")
        return np.concatenate([above, below])

    names = tuple([f"y > {c:.4g}" for c in cuts.tolist()] + [f"y < {c:.4g}" for c in cuts.tolist()])
    return _Family(names, count)


def adjacent_inputs(spec: MetricSpec) -> tuple[tuple[Any, str], tuple[Any, str]]:
    """The two recorded values the audit compares, each with its text: the mechanism's worst
    case (the first and the last category or bucket; a number's lower and upper end)."""
    if spec.type == "boolean":
        return (False, "false"), (True, "true")
    if spec.type == "categorical":
        first, last = spec.categories[0], spec.categories[-1]
        return (first, first), (last, last)
    if spec.type == "histogram":
        edges = spec.edges or ()
        first, last = spec.categories[0], spec.categories[-1]
        return (edges[0], f"{edges[0]:g} in {first}"), (edges[-1], f"{edges[-1]:g} in {last}")
    lower, upper = spec.lower, spec.upper
    return (lower, f"{lower:g} (t = -1)"), (upper, f"{upper:g} (t = +1)")


def event_family(spec: MetricSpec) -> _Family:
    """The spec's output events, fixed before any report is drawn."""
    if spec.type == "numeric":
        return _numeric_family(spec)
    (x0, _), (x1, _) = adjacent_inputs(spec)
    i0, i1 = spec.index_of(x0), spec.index_of(x1)
    if spec.mechanism in ("krr", "brr"):
        return _choice_family(spec, i0, i1)
    if spec.mechanism == "oue":
        return _oue_family(spec, i0, i1)
    return _olh_family(spec, i0, i1)


def _event_counts(
    spec: MetricSpec, value: Any, family: _Family, samples: int, rng: Randomness | None
) -> np.ndarray:
    """How many of ``samples`` reports of ``value`` fall in each event, drawn a chunk at a time."""
    import numpy as np

    counts = np.zeros(len(family.names), dtype=np.int64)
    for start in range(0, samples, CHUNK):
        body = randomized_reports(spec, value, min(CHUNK, samples - start), randomness=rng)
        counts += family.count(_payloads(body))
    return counts


def log_ratio_bounds(
    first: np.ndarray, second: np.ndarray, samples: int, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper confidence bounds on log P(E | x) / P(E | x') for each event E and both
    orders (the first half x over x', the second x' over x), holding jointly at ``confidence``.

    ``first`` and ``second`` count each event among ``samples`` reports of x and of x'. Every
    count gets a one-sided Clopper-Pearson bound below and above, each at
    (1 - confidence) / (4 * events) (Bonferroni over all of them); a ratio's lower bound divides
    its numerator's lower bound by its denominator's upper bound, and the reverse for its
    upper bound.
    """
    import numpy as np

    from .intervals import clopper_pearson

    events = len(first)
    alpha = (1 - confidence) / (4 * events)
    counts = np.concatenate([first, second])
    low, high = clopper_pearson(counts, np.full(2 * events, samples), 2 * alpha)
    low_x, low_y, high_x, high_y = low[:events], low[events:], high[:events], high[events:]
    with np.errstate(divide="ignore"):
        lower = np.log(np.concatenate([low_x / high_y, low_y / high_x]))
        upper = np.log(np.concatenate([high_x / low_y, high_y / low_x]))
    return lower, upper


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
    samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int | None = None,
) -> AuditResult:
    """Audit one spec's randomizer through the recording path (see the module docstring).

    ``seed`` None draws from the OS CSPRNG, as a device does; a seed makes the run
    deterministic (``SeededRandomness(seed)``, the same for every spec, so a metric's result
    does not depend on which others are audited with it).
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise InvalidInput("samples must be a whole number of at least 1")
    if not 0 < confidence < 1:
        raise InvalidInput("confidence must be strictly between 0 and 1")
    started = time.perf_counter()
    family = event_family(spec)
    (x0, text0), (x1, text1) = adjacent_inputs(spec)
    rng = SeededRandomness(seed) if seed is not None else None
    first = _event_counts(spec, x0, family, samples, rng)
    second = _event_counts(spec, x1, family, samples, rng)
    lower, upper = log_ratio_bounds(first, second, samples, confidence)
    best = int(lower.argmax())
    events = len(family.names)
    over, under = (text0, text1) if best < events else (text1, text0)
    fields: dict[str, Any] = {
        "metric": spec.name,
        "type": spec.type,
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "lower_bound": max(0.0, float(lower[best])),
        "upper_bound": float(upper.max()),
        "confidence": confidence,
        "samples": samples,
        "inputs": f"{text0} vs {text1}",
        "event": f"{family.names[best % events]}: P(. | {over}) / P(. | {under})",
    }
    fields["verdict"] = _verdict(spec.epsilon, fields["lower_bound"], fields["upper_bound"])
    fields["message"] = _message(fields)
    return AuditResult(**fields, seconds=time.perf_counter() - started)


def audit_specs(
    specs: Iterable[MetricSpec],
    *,
    samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int | None = None,
    jobs: int = 1,
    on_result: Callable[[AuditResult], None] | None = None,
) -> list[AuditResult]:
    """Audit each spec (see :func:`audit_spec`), in ``jobs`` processes at once; the results
    come in the specs' order, each told to ``on_result`` as it is ready. With a seed, the
    results do not depend on ``jobs``. Workers are spawned, not forked: they start from a
    clean interpreter whatever threads the caller runs (a progress bar's, a server's)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidInput("jobs must be a whole number of at least 1")
    specs = list(specs)
    audit = functools.partial(audit_spec, samples=samples, confidence=confidence, seed=seed)
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
