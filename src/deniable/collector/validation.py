"""Check every report of a batch against its registered metric, collecting all problems.

Structural checks (types, UUID form) come from :mod:`.schemas`; here: the metric exists and
is not archived, the fingerprint matches, the payload lies in the mechanism's domain (and, for
a bit vector, sets a number of bits an honest device may set), and the period is a
well-formed label of the metric's kind inside the accepted window (not more than one period
ahead of the server's clock, not older than the retention window).
"""

from __future__ import annotations

import binascii
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple, cast

import numpy as np

from deniable.client.mechanisms import (
    KRR,
    OUE,
    BitVectorPayload,
    Duchi,
    Hybrid,
    Mechanism,
    NumericMechanism,
    Payload,
    PrefixSketch,
)
from deniable.client.spec import MetricSpec, next_period, period_label, period_start

from .schemas import ReportIn, dims_problem

UNKNOWN_METRIC_LABEL = "_unknown"
"""The telemetry label of every metric name that is not registered (bounds cardinality)."""

_EXAMPLES = {"day": "2026-11-21", "week": "2026-W47", "month": "2026-11"}


class ValidReport(NamedTuple):
    """A report that passed validation, with its payload in canonical form (a named tuple:
    one is built per stored report, three times faster than a frozen dataclass)."""

    id: str
    metric: str
    period: str
    payload: Payload | float
    cell: str = ""
    """Its dimension values as the stored cell text (``""``: its metric has no dimensions)."""


@dataclass(frozen=True)
class ReportProblem:
    """Why one report was refused: its index, a fixed reason code and a message for the client."""

    index: int
    metric_label: str
    code: str
    message: str


class PeriodWindow:
    """The period labels a report may carry, given the server's date and the retention window."""

    def __init__(self, today: dt.date, retention_days: int) -> None:
        self.today = today
        self.cutoff = today - dt.timedelta(days=retention_days)
        self._verdicts: dict[tuple[str, str], tuple[str, str] | None] = {}

    def current(self, kind: str) -> str:
        """The label of the period holding today."""
        return period_label(kind, self.today)

    def check(self, kind: str, label: str) -> tuple[str, str] | None:
        """None if ``label`` is acceptable, else (reason code, message)."""
        key = (kind, label)
        if key not in self._verdicts:
            self._verdicts[key] = self._judge(kind, label)
        return self._verdicts[key]

    def _judge(self, kind: str, label: str) -> tuple[str, str] | None:
        try:
            start = period_start(kind, label)
        except ValueError:
            return (
                "period_format",
                f"period is not a well-formed {kind} label like {_EXAMPLES[kind]}",
            )
        if period_label(kind, start) != label:
            return (
                "period_format",
                f"period is not a well-formed {kind} label like {_EXAMPLES[kind]}",
            )
        latest = next_period(kind, self.current(kind))
        if label > latest:
            return (
                "period_future",
                f"period {label} is more than one period ahead of the server ({latest} is the latest accepted)",
            )
        oldest = period_label(kind, self.cutoff)
        if label < oldest:
            return (
                "period_expired",
                f"period {label} is older than the retention window ({oldest} is the oldest accepted)",
            )
        return None


PayloadCheck = Callable[[Any], bool]
"""True if a payload is valid and already canonical; False means: ask ``parse_payload``."""


def _never(_payload: Any) -> bool:
    return False


def _numeric_check(mechanism: NumericMechanism) -> PayloadCheck:
    """A numeric payload already canonical: a float of magnitude exactly C1 (duchi, hybrid at
    small eps) or a float within [-C, C] (pm, hybrid); NaN fails both comparisons."""
    bound = mechanism.bound
    if isinstance(mechanism, Duchi) or (
        isinstance(mechanism, Hybrid) and mechanism.pm_probability == 0.0
    ):
        return lambda p: type(p) is float and (p == bound or p == -bound)
    return lambda p: type(p) is float and -bound <= p <= bound


@cache
def canonical_check(mechanism: Mechanism | NumericMechanism | PrefixSketch) -> PayloadCheck:
    """A fast test for the usual payload of ``mechanism``: valid and already in canonical form.

    Only a shortcut: whatever it does not accept goes to the mechanism's own ``parse_payload``,
    which stays the one authority on validity, canonical form and error messages.
    """
    if isinstance(mechanism, NumericMechanism):
        return _numeric_check(mechanism)
    if isinstance(mechanism, KRR):
        k = mechanism.k
        return lambda p: type(p) is int and 0 <= p < k
    if isinstance(mechanism, OUE):
        n_bytes, tail = mechanism.n_bytes, mechanism.k % 8

        def oue(p: Any) -> bool:
            if type(p) is not str:
                return False
            try:
                raw = binascii.a2b_base64(p)
            except (binascii.Error, ValueError):
                return False
            return (
                len(raw) == n_bytes
                and not (tail and raw[-1] >> tail)
                and binascii.b2a_base64(raw, newline=False) == p.encode("ascii")
            )

        return oue
    return _never


_BASE64_VALUES = np.full(256, 255, dtype=np.uint8)
_BASE64_VALUES[
    np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)
] = np.arange(64, dtype=np.uint8)
"""Each ASCII code's 6-bit value in standard base64; 255 for a character outside it."""


BulkVector = OUE | PrefixSketch
"""A mechanism whose payloads' bit vectors are judged a batch at a time: oue's payload is its
vector's base64, a text sketch's payload holds it as ``"b"``."""


def oue_canonical_plausible(mechanism: BulkVector, payloads: Sequence[str]) -> np.ndarray:
    """Which of ``payloads`` (base64 strings of ``mechanism``'s bit vectors: an oue payload, a
    text payload's ``"b"``) are canonical base64 of its bytes, set no bit past its cells and
    set a plausible number of bits: the whole batch's vectors checked at once rather than one
    decode and re-encode per report.

    Only a shortcut, like :func:`canonical_check`: a payload it refuses goes through the
    mechanism's own ``parse_payload`` and ``implausible``, which say why.
    """
    m = len(payloads)
    length = 4 * ((mechanism.n_bytes + 2) // 3)
    joined = "".join(payloads).encode("ascii", "replace")
    if len(joined) != m * length:
        return np.zeros(m, dtype=bool)
    encoded = np.frombuffer(joined, dtype=np.uint8).reshape(m, length)
    pad = length // 4 * 3 - mechanism.n_bytes
    values = _BASE64_VALUES[encoded]
    ok = (values[:, : length - pad] != 255).all(axis=1)
    if pad:
        ok &= (encoded[:, length - pad :] == ord("=")).all(axis=1)
        values[:, length - pad :] = 0
    groups = values.reshape(m, length // 4, 4)
    decoded = np.empty((m, length // 4, 3), dtype=np.uint8)
    decoded[:, :, 0] = (groups[:, :, 0] << 2) | (groups[:, :, 1] >> 4)
    decoded[:, :, 1] = ((groups[:, :, 1] & 15) << 4) | (groups[:, :, 2] >> 2)
    decoded[:, :, 2] = ((groups[:, :, 2] & 3) << 6) | groups[:, :, 3]
    data = decoded.reshape(m, -1)
    if pad:  # the unused bits of the last character are zero in canonical base64
        ok &= (data[:, mechanism.n_bytes :] == 0).all(axis=1)
    data = data[:, : mechanism.n_bytes]
    tail = mechanism.vector_cells % 8
    if tail:
        ok &= (data[:, -1] >> tail) == 0
    bits = np.unpackbits(data, axis=1, bitorder="little").sum(axis=1)
    low, high = mechanism.plausible_set_bits
    return ok & (bits >= low) & (bits <= high)


VectorOf = Callable[[Any], "str | None"]
"""A bulk-judged payload's bit vector as base64 text, or None for a payload of another shape
(it then goes through ``parse_payload``, which says what is wrong)."""


def _oue_vector(payload: Any) -> str | None:
    return payload if type(payload) is str else None


@cache
def vector_of(mechanism: BulkVector) -> VectorOf:
    """How to find a payload's bit vector for :func:`oue_canonical_plausible`: an oue payload
    is one; a text payload is an object of exactly ``"b"`` (a string), ``"l"`` and ``"r"``
    (integers in range), kept as received once its ``"b"`` passes (its stored text sorts its
    keys, so their order as sent does not matter)."""
    if isinstance(mechanism, OUE):
        return _oue_vector
    levels, rows = mechanism.levels, mechanism.rows

    def text_vector(payload: Any) -> str | None:
        if type(payload) is not dict or len(payload) != 3:
            return None
        vector, level, row = payload.get("b"), payload.get("l"), payload.get("r")
        if (
            type(vector) is str
            and type(level) is int
            and type(row) is int
            and 1 <= level <= levels
            and 0 <= row < rows
        ):
            return vector
        return None

    return text_vector


def bulk_mechanism(mechanism: Mechanism | NumericMechanism | PrefixSketch) -> BulkVector | None:
    """``mechanism`` if its payloads are judged a batch at a time (oue, text), else None."""
    return mechanism if type(mechanism) is OUE or type(mechanism) is PrefixSketch else None


PayloadParse = Callable[[Any], Any]
"""A mechanism's ``parse_payload``: the payload in canonical form, or ``ValueError`` saying why."""

Plausibility = Callable[[Any], "str | None"]
"""A bit-vector mechanism's ``implausible``: why no honest device sends a valid payload, or None."""

_DERIVED: dict[int, tuple[MetricSpec, str, PayloadCheck, PayloadParse, Plausibility | None]] = {}
_DERIVED_MAX = 10_000


def payload_mechanism(spec: MetricSpec) -> Mechanism | NumericMechanism | PrefixSketch:
    """The mechanism that judges ``spec``'s payloads: its numeric one, its text sketch, or its
    frequency oracle (a histogram's is over its buckets, a set's over its k + L items, so that
    oue's plausibility check and the fast canonical check apply to a set's payloads too)."""
    return spec.frequency_oracle or spec.report_randomizer


def _derived(spec: MetricSpec) -> tuple[str, PayloadCheck, PayloadParse, Plausibility | None]:
    """A spec's fingerprint, payload check, parser and plausibility check (bit vectors only),
    computed once per spec object (specs are frozen)."""
    entry = _DERIVED.get(id(spec))
    if entry is None or entry[0] is not spec:
        if len(_DERIVED) >= _DERIVED_MAX:
            _DERIVED.clear()
        mechanism = payload_mechanism(spec)
        entry = _DERIVED[id(spec)] = (
            spec,
            spec.fingerprint,
            canonical_check(mechanism),
            mechanism.parse_payload,
            mechanism.implausible if isinstance(mechanism, BitVectorPayload) else None,
        )
    return entry[1], entry[2], entry[3], entry[4]


ARCHIVED_REASON = "metric archived"
"""How a report of an archived metric is refused (the start of its 422 reason)."""


def _no_archive(_name: str) -> bool:
    return False


def _shuffled_only(name: str) -> str:
    """Why a direct report of a shuffled-only metric is refused."""
    return (
        f"metric {name} has delivery rule 'shuffled': its reports reach the collector only"
        " through a shuffler, never uploaded directly"
    )


def validate_reports(
    reports: Sequence[tuple[int, ReportIn]],
    lookup: Callable[[str], MetricSpec | None],
    window: PeriodWindow,
    archived: Callable[[str], bool] = _no_archive,
    direct: bool = False,
) -> tuple[list[ValidReport], list[ReportProblem], dict[str, MetricSpec]]:
    """Validate (index, report) pairs; return the valid reports, every problem, and the specs used.

    ``archived(name)`` says whether a registered metric is archived: its reports are refused.
    ``direct``: the reports were uploaded straight to the collector, so those of a metric whose
    delivery rule is ``shuffled`` are refused (its reports come only through a shuffler).
    """
    whole = _one_valid_metric(reports, lookup, window, archived, direct)
    if whole is not None:
        return whole
    specs: dict[str, MetricSpec | None] = {}
    retired: dict[str, bool] = {}
    fingerprints: dict[str, str] = {}
    checks: dict[str, PayloadCheck] = {}
    parsers: dict[str, PayloadParse] = {}
    plausibility: dict[str, Plausibility | None] = {}
    valid: list[ValidReport] = []
    problems: list[ReportProblem] = []
    # Each (metric, dims as sent) already found valid, and its cell: a batch's reports mostly
    # repeat a few devices' contexts, so each is checked once (only valid ones are kept, all
    # strings: a value equal to a kept one is the same string).
    cells: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
    bulk: dict[str, BulkVector | None] = {}
    # Each metric's oue and text payloads judged after the loop, all at once (their reports'
    # places in ``valid``, their indexes, payloads and vectors); the ones the bulk check
    # refuses go one by one.
    deferred: dict[str, Deferred] = {}
    for index, report in reports:
        name = report["metric"]
        if name not in specs:
            specs[name] = found = lookup(name)
            if found is not None:
                fingerprints[name], checks[name], parsers[name], plausibility[name] = _derived(
                    found
                )
                retired[name] = archived(name)
                bulk[name] = bulk_mechanism(payload_mechanism(found))
        spec = specs[name]
        if spec is None:
            problems.append(
                ReportProblem(
                    index,
                    UNKNOWN_METRIC_LABEL,
                    "unknown_metric",
                    f"metric {name!r} is not registered",
                )
            )
            continue
        if retired[name]:
            problems.append(
                ReportProblem(
                    index,
                    name,
                    "archived",
                    f"{ARCHIVED_REASON}: {name} takes no more reports (an admin archived it)",
                )
            )
            continue
        if report["fingerprint"] != fingerprints[name]:
            problems.append(
                ReportProblem(
                    index,
                    name,
                    "fingerprint",
                    f"fingerprint does not match metric {name}'s registered spec; fetch the spec again",
                )
            )
            continue
        if direct and spec.delivery == "shuffled":
            problems.append(ReportProblem(index, name, "delivery", _shuffled_only(name)))
            continue
        verdict = window.check(spec.period, report["period"])
        if verdict is not None:
            problems.append(ReportProblem(index, name, verdict[0], f"metric {name}: {verdict[1]}"))
            continue
        payload = report["payload"]
        judge = bulk[name]
        vector = None if judge is None else vector_of(judge)(payload)
        later = vector is not None
        if not later:
            payload, problem = _judge_payload(
                index, name, spec, payload, checks[name], parsers[name], plausibility[name]
            )
            if problem is not None:
                problems.append(problem)
                continue
        cell = ""
        if spec.dimensions or "dims" in report:
            dims = report.get("dims")
            try:
                found = cells.get((name, tuple(dims.items())))
            except (AttributeError, TypeError):  # not an object, or a value not a string
                found = None
            if found is None:
                reason = None if dims is None else dims_problem(dims)
                if reason is None:
                    try:
                        found = spec.cell_of(dims)
                    except ValueError as exc:
                        reason = str(exc)
                if reason is not None:
                    if later:  # the payload's problem comes first, as for any other report
                        _, problem = _judge_payload(
                            index,
                            name,
                            spec,
                            payload,
                            checks[name],
                            parsers[name],
                            plausibility[name],
                        )
                        if problem is not None:
                            reason = None
                            problems.append(problem)
                    if reason is not None:
                        problems.append(ReportProblem(index, name, "dims", reason))
                    continue
                if dims:
                    cells[(name, tuple(dims.items()))] = found
            cell = found
        if vector is not None:
            places, indexes, payloads, vectors = deferred.setdefault(name, ([], [], [], []))
            places.append(len(valid))
            indexes.append(index)
            payloads.append(payload)
            vectors.append(vector)
        valid.append(ValidReport(report["id"], name, report["period"], payload, cell))
    if deferred:
        valid, problems = _judge_deferred(
            valid, problems, deferred, bulk, specs, checks, parsers, plausibility
        )
    used = {name: spec for name, spec in specs.items() if spec is not None}
    return valid, problems, used


def _one_valid_metric(
    reports: Sequence[tuple[int, ReportIn]],
    lookup: Callable[[str], MetricSpec | None],
    window: PeriodWindow,
    archived: Callable[[str], bool],
    direct: bool,
) -> tuple[list[ValidReport], list[ReportProblem], dict[str, MetricSpec]] | None:
    """The usual batch judged whole: every report of one registered metric, valid, with its
    payload already canonical and its dims (if the metric has dimensions) naming a cell;
    None for any other batch (it then goes report by report, which finds the same valid
    reports and says why the others fail)."""
    if not reports:
        return None
    name = reports[0][1]["metric"]
    spec = lookup(name)
    if spec is None or (direct and spec.delivery == "shuffled"):
        return None
    # Each pass over the batch is a map of a C getter, not a Python loop.
    items = list(map(itemgetter(1), reports))
    fingerprint, check, _, plausibility = _derived(spec)
    ids, metrics, fingerprints, periods, payloads = zip(*map(_REPORT_FIELDS, items), strict=True)
    if set(metrics) != {name} or set(fingerprints) != {fingerprint} or archived(name):
        return None
    if spec.dimensions:
        cells = _batch_cells(spec, items)
        if cells is None:
            return None
    elif any(map(dict.__contains__, items, repeat("dims"))):
        return None
    else:
        cells = repeat("")
    if any(window.check(spec.period, label) for label in set(periods)):
        return None
    mechanism = bulk_mechanism(payload_mechanism(spec))
    if mechanism is not None:
        vectors = list(map(vector_of(mechanism), payloads))
        if None in vectors:
            return None
        if not oue_canonical_plausible(mechanism, cast("list[str]", vectors)).all():
            return None
    elif plausibility is not None or not all(map(check, payloads)):
        return None
    # tuple.__new__ builds each report as ValidReport._make does, without a Python call.
    rows = zip(ids, repeat(name), periods, payloads, cells)
    valid = list(map(tuple.__new__, repeat(ValidReport), rows))
    return valid, [], {name: spec}


_REPORT_FIELDS = itemgetter("id", "metric", "fingerprint", "period", "payload")
"""A well-formed report's fields the whole-batch judgement reads."""


def _batch_cells(spec: MetricSpec, items: Sequence[ReportIn]) -> list[str] | None:
    """Each report's cell of ``spec``'s dimensions, each distinct dims checked once; None if
    any report's dims are missing or refused (the batch then goes report by report)."""
    known: dict[tuple[tuple[str, str], ...], str] = {}
    cells = []
    for report in items:
        dims = report.get("dims")
        if type(dims) is not dict:
            return None
        try:
            key = tuple(dims.items())
            cell = known.get(key)
        except TypeError:  # a value that is not a string (nor hashable)
            return None
        if cell is None:
            if dims_problem(dims) is not None:
                return None
            try:
                cell = spec.cell_of(dims)
            except ValueError:
                return None
            known[key] = cell
        cells.append(cell)
    return cells


def _judge_payload(
    index: int,
    name: str,
    spec: MetricSpec,
    payload: Any,
    check: PayloadCheck,
    parse: PayloadParse,
    implausible: Plausibility | None,
) -> tuple[Any, ReportProblem | None]:
    """One report's payload in canonical form, or the problem that refuses it."""
    if not check(payload):
        try:
            payload = parse(payload)
        except ValueError as exc:
            return payload, ReportProblem(
                index, name, "payload", f"metric {name} ({spec.mechanism}): {exc}"
            )
    if implausible is not None:
        reason = implausible(payload)
        if reason is not None:
            return payload, ReportProblem(
                index, name, "implausible", f"metric {name} ({spec.mechanism}): {reason}"
            )
    return payload, None


Deferred = tuple[list[int], list[int], list[Any], list[str]]
"""One metric's bulk-judged reports: their places in the valid reports, their indexes in the
batch, their payloads and their vectors (:func:`vector_of`)."""


def _judge_deferred(
    valid: list[ValidReport],
    problems: list[ReportProblem],
    deferred: dict[str, Deferred],
    bulk: dict[str, BulkVector | None],
    specs: dict[str, MetricSpec | None],
    checks: dict[str, PayloadCheck],
    parsers: dict[str, PayloadParse],
    plausibility: dict[str, Plausibility | None],
) -> tuple[list[ValidReport], list[ReportProblem]]:
    """Judge each metric's oue and text payloads at once (:func:`oue_canonical_plausible`),
    the refused ones one by one: the valid reports without the refused, in batch order, and
    every problem in index order."""
    dropped: set[int] = set()
    for name, (places, indexes, payloads, vectors) in deferred.items():
        mechanism, spec = bulk[name], specs[name]
        assert mechanism is not None and spec is not None
        good = oue_canonical_plausible(mechanism, vectors)
        if good.all():
            continue
        for j in np.flatnonzero(~good).tolist():
            payload, problem = _judge_payload(
                indexes[j],
                name,
                spec,
                payloads[j],
                checks[name],
                parsers[name],
                plausibility[name],
            )
            if problem is not None:
                problems.append(problem)
                dropped.add(places[j])
            elif payload != payloads[j]:
                place = places[j]
                valid[place] = valid[place]._replace(payload=payload)
    if not dropped:
        return valid, problems
    kept = [report for place, report in enumerate(valid) if place not in dropped]
    return kept, sorted(problems, key=lambda problem: problem.index)
