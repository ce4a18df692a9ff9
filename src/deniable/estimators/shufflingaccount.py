"""The privacy account's shuffled section: per batch a shuffler released, the central guarantee
against an analyst beside the local one against the shuffler.

Its input is a plain record, :class:`ShuffledBatch` (metric, mechanism, local eps, n distinct
devices, delta; the collector's ``shuffled_batches`` rows are this type too), so that it does not
depend on where batches are kept: the collector passes the batches it received from the
shuffler, or, to plan, one assumed batch size for every metric
(``GET /v1/privacy?shuffle_batch=N``).

A batch counts the devices whose reports the collector took, never the size its shuffler
stated: its ``n`` is the distinct reports the collector opened and stored from it (the sealed
reports it refused, not opened, of another batch or invalid, hide nobody, and a report repeated
counts once). A batch whose parts have not all arrived is counted at what arrived, which is
what the collector saw (the reports of the arrived parts are themselves a shuffled batch: a
random subset of the released one), and flagged incomplete. A batch left with fewer than the
collector's minimum is still counted, at the devices it holds (the local eps where that gives
no amplification), and the section says so.

Bounded work: the central eps is non-increasing in n, so the released batches of one metric
under one (mechanism, local eps) are all covered by the bound of the smallest of them. A
:class:`BatchGroup` carries that smallest batch and the group's count (the collector reads the
groups in one SQL aggregate); the section computes one bound per group, plus one per batch it
lists individually (at most :data:`LISTED_BATCHES`, the most recent), each distinct
(metric, mechanism, eps0, n, delta) once. The bound for each batch is the one valid for the
metric's mechanism (:func:`~.shuffling.central_guarantee`, chosen from the mechanism object);
a batch of a metric not among the specs gets FMT21's bound, valid for every eps0-LDP
randomizer. The accountant's limits and its result type live in :mod:`.shufflelimits`, without
numpy, so that the CLI and the API can state them before any computation; this module imports
:mod:`.shuffling` (lazily: numpy and scipy load when a batch is counted), never the reverse.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from deniable.client.mechanisms import check_epsilon, make_numeric_mechanism
from deniable.client.spec import MetricSpec, Randomizer

from .shufflelimits import (
    BOUND_NAMES,
    DEFAULT_DELTA,
    MAX_BATCH,
    MAX_DELTA,
    MIN_DELTA,
    Bound,
    CentralGuarantee,
    check_batch,
)

__all__ = [
    "BOUND_NAMES",
    "DEFAULT_DELTA",
    "LISTED_BATCHES",
    "MAX_BATCH",
    "MAX_DELTA",
    "MIN_DELTA",
    "BatchGroup",
    "Bound",
    "CentralGuarantee",
    "ShuffleSection",
    "ShuffledBatch",
    "ShuffledBatchRow",
    "ShuffledMetric",
    "assumed_batches",
    "batch_row",
    "below_note",
    "check_batch",
    "devices_text",
    "group_batches",
    "shuffle_section",
    "shuffle_statement",
]

Source = Literal["released", "assumed", "none"]

LISTED_BATCHES = 20
"""How many released batches the account lists one by one (the most recent); every batch,
listed or not, is covered by its metric's weakest (:class:`ShuffledMetric`)."""


@dataclass(frozen=True)
class ShuffledBatch:
    """One batch of reports a shuffler released to the collector: ``n`` reports of
    ``metric`` from ``n`` distinct devices, each ``epsilon``-LDP under ``mechanism``, and the
    ``delta`` the account states for it; ``batch`` names it (the shuffler's id, or None). As
    the collector records it, also its spec ``fingerprint`` and ``released_at`` (when the
    collector first saw it); an assumed batch has neither. ``refused``: how many of its sealed
    reports the collector refused; ``declared``: the size its shuffler stated (0: not stated),
    shown but never counted; ``incomplete``: not all of its parts have arrived (``n`` counts
    what did)."""

    metric: str
    mechanism: str
    epsilon: float
    n: int
    delta: float = DEFAULT_DELTA
    batch: str | None = None
    fingerprint: str = ""
    released_at: dt.datetime | None = None
    refused: int = 0
    declared: int = 0
    incomplete: bool = False


@dataclass(frozen=True)
class BatchGroup:
    """The released batches of one metric under one (mechanism, local eps): how many
    (``batches``), the ``smallest``, whose central eps holds for every one of them, how
    many count fewer devices than the collector's minimum (``below_minimum``) and how many
    have parts missing (``incomplete``); ``reports``: the devices they count together."""

    smallest: ShuffledBatch
    batches: int
    below_minimum: int = 0
    incomplete: int = 0
    reports: int = 0


def _below(batch: ShuffledBatch, min_batch: int | None) -> bool:
    """Whether ``batch`` counts fewer devices than ``min_batch`` (None: no minimum)."""
    return min_batch is not None and batch.n < min_batch


def group_batches(
    batches: Iterable[ShuffledBatch], min_batch: int | None = None
) -> list[BatchGroup]:
    """``batches`` grouped by (metric, mechanism, local eps, delta), each group with its smallest
    batch and how many fall below ``min_batch``, in the order groups first appear (the
    collector does the same in SQL)."""
    groups: dict[tuple[str, str, float, float], BatchGroup] = {}
    for batch in batches:
        key = (batch.metric, batch.mechanism, batch.epsilon, batch.delta)
        below = int(_below(batch, min_batch))
        group = groups.get(key)
        if group is None:
            groups[key] = BatchGroup(batch, 1, below, int(batch.incomplete), batch.n)
        else:
            smallest = batch if batch.n < group.smallest.n else group.smallest
            groups[key] = BatchGroup(
                smallest,
                group.batches + 1,
                group.below_minimum + below,
                group.incomplete + int(batch.incomplete),
                group.reports + batch.n,
            )
    return list(groups.values())


@dataclass(frozen=True)
class ShuffledBatchRow:
    """A batch and its guarantees: against an analyst who sees only released batches
    (``central_epsilon``, ``delta``, by ``bound``), and against the shuffler, alone or with the
    collector (``local_epsilon``). ``n`` counts the devices whose reports the collector took,
    ``refused`` the sealed reports it refused; ``below_minimum``: ``n`` is below the
    collector's minimum batch, and the guarantee is the one of those ``n`` devices;
    ``declared``: the size its shuffler stated (shown, not counted); ``incomplete``: parts of it
    have not arrived, and ``n`` counts those that did."""

    metric: str
    mechanism: str
    batch: str | None
    n: int
    local_epsilon: float
    delta: float
    central_epsilon: float
    bound: Bound
    bound_name: str
    refused: int = 0
    below_minimum: bool = False
    declared: int = 0
    incomplete: bool = False


@dataclass(frozen=True)
class ShuffledMetric:
    """A metric's weakest batch: the largest central eps among its batches (the smallest
    batch of each (mechanism, local eps)), which holds for every batch of it; ``batches``
    counts all of them, listed or not, ``below_minimum`` those that count fewer devices than
    the collector's minimum and ``incomplete`` those with parts missing. ``delivery`` is the
    metric's rule (``shuffled``: only through a shuffler); ``shuffled_reports`` counts the
    reports its batches delivered and ``direct_reports`` those the collector received
    otherwise (straight from devices; None: not known, as for an assumed batch size)."""

    metric: str
    batches: int
    smallest_batch: int
    local_epsilon: float
    delta: float
    central_epsilon: float
    bound: Bound
    below_minimum: int = 0
    incomplete: int = 0
    delivery: str = "direct"
    shuffled_reports: int = 0
    direct_reports: int | None = None


@dataclass(frozen=True)
class ShuffleSection:
    """The account's section on the shuffler: where the batches come from (``released``:
    received from the shuffler; ``assumed``: one batch size asked for every metric; ``none``:
    no shuffled batch), the guarantees of the batches listed (released: the most recent
    :data:`LISTED_BATCHES`), ``batch_count`` (all of them), each metric's weakest (covering every
    batch, listed or not), the collector's ``min_batch`` (released batches; None otherwise)
    and what they mean in words."""

    source: Source
    batch_count: int = 0
    batches: list[ShuffledBatchRow] = field(default_factory=list)
    metrics: list[ShuffledMetric] = field(default_factory=list)
    statement: str = ""
    min_batch: int | None = None


def _mechanism(batch: ShuffledBatch, specs: dict[str, MetricSpec]) -> Randomizer:
    """The mechanism object of ``batch``'s metric, from its spec (the one source of its
    parameters); without a spec of that name and mechanism, a randomizer that gets the
    generic bound (FMT21 holds for every eps0-LDP randomizer)."""
    spec = specs.get(batch.metric)
    if spec is not None and spec.mechanism == batch.mechanism:
        return spec.report_randomizer
    return make_numeric_mechanism("duchi", check_epsilon(batch.epsilon))


def batch_row(
    batch: ShuffledBatch, specs: dict[str, MetricSpec], min_batch: int | None = None
) -> ShuffledBatchRow:
    """``batch`` with its central guarantee (InvalidInput for a negative size or a delta out of
    range; a batch above :data:`MAX_BATCH` is counted at that size; a released batch of 0,
    every report refused, hides nobody: its local eps), flagged if below ``min_batch``."""
    from .shuffling import central_guarantee  # numpy and scipy: loaded when a batch is counted

    if batch.n == 0:  # every sealed report refused: nothing to hide among
        check_batch(1, batch.delta)
        guarantee = CentralGuarantee(0, batch.epsilon, batch.delta, batch.epsilon, "none")
    else:
        counted = min(batch.n, MAX_BATCH)  # eps is non-increasing in n: still a valid bound
        check_batch(counted, batch.delta)
        guarantee = central_guarantee(
            _mechanism(batch, specs), counted, batch.delta, local_epsilon=batch.epsilon
        )
    return ShuffledBatchRow(
        metric=batch.metric,
        mechanism=batch.mechanism,
        batch=batch.batch,
        n=batch.n,
        local_epsilon=batch.epsilon,
        delta=batch.delta,
        central_epsilon=guarantee.epsilon,
        bound=guarantee.bound,
        bound_name=BOUND_NAMES[guarantee.bound],
        refused=batch.refused,
        below_minimum=_below(batch, min_batch),
        declared=batch.declared,
        incomplete=batch.incomplete,
    )


def assumed_batches(
    specs: Iterable[MetricSpec], n: int, delta: float = DEFAULT_DELTA
) -> list[ShuffledBatch]:
    """One batch of ``n`` devices per metric: what the account says if every metric went
    through a shuffler releasing batches of ``n``."""
    return [ShuffledBatch(s.name, s.mechanism, s.epsilon, n, delta) for s in specs]


def _weakest(
    groups: list[BatchGroup],
    row_of: Callable[[ShuffledBatch], ShuffledBatchRow],
    specs: Mapping[str, MetricSpec],
    received: Mapping[str, int] | None,
) -> list[ShuffledMetric]:
    """Per metric, the group whose smallest batch has the largest central eps, in the order
    metrics first appear; its count is every batch of the metric, and (``received``: every
    distinct report the collector holds per metric) how many of its reports came directly."""
    by_metric: dict[str, list[tuple[BatchGroup, ShuffledBatchRow]]] = {}
    for group in groups:
        by_metric.setdefault(group.smallest.metric, []).append((group, row_of(group.smallest)))
    weakest = []
    for metric, pairs in by_metric.items():
        worst = max((row for _, row in pairs), key=lambda r: (r.central_epsilon, -r.n))
        shuffled = sum(group.reports for group, _ in pairs)
        spec = specs.get(metric)
        direct = None if received is None else max(received.get(metric, 0) - shuffled, 0)
        weakest.append(
            ShuffledMetric(
                metric=metric,
                batches=sum(group.batches for group, _ in pairs),
                smallest_batch=min(row.n for _, row in pairs),
                local_epsilon=worst.local_epsilon,
                delta=worst.delta,
                central_epsilon=worst.central_epsilon,
                bound=worst.bound,
                below_minimum=sum(group.below_minimum for group, _ in pairs),
                incomplete=sum(group.incomplete for group, _ in pairs),
                delivery=spec.delivery if spec is not None else "direct",
                shuffled_reports=shuffled,
                direct_reports=direct,
            )
        )
    return weakest


def devices_text(row: Mapping[str, Any]) -> str:
    """A batch's size as tables show it, ``row`` a :class:`ShuffledBatchRow` as JSON: its
    accounted devices, the refused reports left out, the size its shuffler stated when that is
    not what arrived (repeats, missing parts or a false size), and whether it is incomplete or below the collector's minimum
    (``2 (3 refused, 100,000,000 stated, incomplete, below minimum)``)."""
    n, refused = int(row["n"]), int(row.get("refused") or 0)
    declared = int(row.get("declared") or 0)
    notes = (
        [f"{refused:,} refused"] * (refused > 0)
        + [f"{declared:,} stated"] * (declared > 0 and declared != n + refused)
        + ["incomplete"] * bool(row.get("incomplete"))
        + ["below minimum"] * bool(row.get("below_minimum"))
    )
    return f"{n:,}" + (f" ({', '.join(notes)})" if notes else "")


def batches_text(metric: Mapping[str, Any]) -> str:
    """A metric's released batches as its weakest bound's note, the same on the dashboard and
    in the CLI: ``1 batch of 7 devices`` or ``3 batches, the smallest of 7 devices``, then
    those below the minimum; ``metric`` a :class:`ShuffledMetric` as JSON."""
    count, smallest = int(metric["batches"]), int(metric["smallest_batch"])
    size = (
        f"1 batch of {smallest:,} devices"
        if count == 1
        else f"{count:,} batches, the smallest of {smallest:,} devices"
    )
    return size + below_note(metric)


def below_note(metric: Mapping[str, Any]) -> str:
    """A metric's batches below the collector's minimum or incomplete, as notes after its
    weakest show them (``, 2 below the minimum, 1 incomplete``; "" if none), ``metric`` a
    :class:`ShuffledMetric` as JSON."""
    below = int(metric.get("below_minimum") or 0)
    incomplete = int(metric.get("incomplete") or 0)
    return (f", {below:,} below the minimum" if below else "") + (
        f", {incomplete:,} incomplete" if incomplete else ""
    )


def _figure(x: float) -> str:
    """An eps figure to four significant digits."""
    return f"{x:.4g}"


def _flagged(
    metrics: list[ShuffledMetric], batches: Callable[[ShuffledMetric], int]
) -> tuple[int, str]:
    """How many batches of ``metrics`` are flagged, ``batches`` giving a metric's count, and
    the metrics that hold them with their counts (``a (2), b (1)``; 0 and "" if none)."""
    flagged = [m for m in metrics if batches(m)]
    count = sum(batches(m) for m in flagged)
    return count, ", ".join(f"{m.metric} ({batches(m):,})" for m in flagged)


def _below_text(metrics: list[ShuffledMetric], min_batch: int | None) -> str:
    """The sentence on batches left below the collector's minimum ("" if none)."""
    count, which = _flagged(metrics, lambda m: m.below_minimum)
    if min_batch is None or not count:
        return ""
    return (
        f"{count:,} {'batch holds' if count == 1 else 'batches hold'} fewer than the minimum of"
        f" {min_batch:,} devices once the sealed reports the collector refused are left out"
        f" ({which}): refused reports hide nobody, so such a batch is counted at the devices"
        " it holds, its central ε at that size (the local ε where that gives nothing), and the"
        " figures above include it."
    )


def _incomplete_text(metrics: list[ShuffledMetric]) -> str:
    """The sentence on batches whose parts have not all arrived ("" if none)."""
    count, which = _flagged(metrics, lambda m: m.incomplete)
    if not count:
        return ""
    return (
        f"{count:,} {'batch has' if count == 1 else 'batches have'} not arrived whole"
        f" ({which}): such a batch is counted at the distinct reports that arrived, never at"
        " the size its shuffler stated, and the figures above include it at that size."
    )


def _metric_text(m: ShuffledMetric) -> str:
    """One metric's part of the statement, true of what arrived: its central eps for the
    reports its batches delivered, the share that came directly at the local eps."""
    local = f"the local ε = {_figure(m.local_epsilon)}"
    name = m.metric + (" (only through the shuffler)" if m.delivery == "shuffled" else "")
    direct = m.direct_reports or 0
    if m.direct_reports is not None and m.shuffled_reports == 0:
        return f"{name}: none of its reports came through the shuffler, so only {local} holds"
    if m.bound == "none":
        central = f"no lower than {local}"
    else:
        central = f"ε = {_figure(m.central_epsilon)} with δ = {m.delta:g} instead of {local}"
    if not direct:
        return f"{name}: {central}"
    total = m.shuffled_reports + direct
    share = 100 * m.shuffled_reports / total
    return (
        f"{name}: {central} for the {share:.3g}% of its reports that came through the shuffler"
        f" ({m.shuffled_reports:,} of {total:,}), while its other {direct:,} reports came to"
        f" the collector directly and hold only {local}"
    )


def _unbatched_text(specs: Iterable[MetricSpec]) -> str:
    """The sentences on metrics without a released batch ("" if none): a direct metric's
    reports came directly; a shuffled-only one's can only come through the shuffler."""
    direct = sorted(spec.name for spec in specs if spec.delivery != "shuffled")
    waiting = sorted(spec.name for spec in specs if spec.delivery == "shuffled")
    sentences = []
    if direct:
        one = len(direct) == 1
        sentences.append(
            f"{', '.join(direct)} {'has' if one else 'have'} no released batch:"
            f" {'its' if one else 'their'} reports came to the collector directly and hold only"
            f" {'its' if one else 'their'} local ε."
        )
    if waiting:
        one = len(waiting) == 1
        sentences.append(
            f"{', '.join(waiting)} {'is' if one else 'are'} sent only through the shuffler and"
            f" {'has' if one else 'have'} no released batch yet: the collector holds no report"
            f" of {'it' if one else 'them'}."
        )
    return " ".join(sentences)


def shuffle_statement(
    source: Source,
    metrics: list[ShuffledMetric],
    min_batch: int | None = None,
    unshuffled: Iterable[MetricSpec] = (),
) -> str:
    """The section in plain words: which guarantee holds against whom, per metric for what
    arrived through the shuffler and what came directly, which batches fell below
    ``min_batch`` or are incomplete (released batches), and which metrics (``unshuffled``)
    had no batch at all: a direct one's reports came directly, a shuffled-only one has none."""
    if source == "none" or not metrics:
        return (
            "No shuffled batches: reports go to the collector directly, and only each report's"
            " local ε holds, against the collector and anyone who reads its data."
        )
    lead = (
        "If reports passed through a shuffler releasing batches of"
        if source == "assumed"
        else "Reports sent through a shuffler, a separate party that removes who sent each"
        " report, when and from where, reach the collector only as whole batches in a random"
        " order; in the batches released so far, of"
    )
    sizes = sorted({m.smallest_batch for m in metrics})
    size_text = (
        f"{sizes[0]:,} devices"
        if len(sizes) == 1
        else f"{sizes[0]:,} to {sizes[-1]:,} devices (smallest per metric)"
    )
    against_analyst = (
        "against an analyst who sees only the released batches (the collector, its operator,"
        " or anyone who reads its data), one device's report in a batch is"
        " (ε, δ)-differentially private with " + "; ".join(map(_metric_text, metrics)) + "."
    )
    if source == "assumed":
        opening = f"{lead} {size_text}, then, " + against_analyst
    else:
        opening = f"{lead} {size_text}, " + against_analyst
    direct_only = _unbatched_text(unshuffled) if source == "released" else ""
    return " ".join(
        [
            opening,
            *filter(
                None,
                [direct_only, _below_text(metrics, min_batch), _incomplete_text(metrics)],
            ),
            "This central guarantee is per batch: a device's reports in several batches add"
            " up, as local ε do.",
            "Against the shuffler itself, or the shuffler and the collector together, only"
            " each report's local ε holds, exactly as without a shuffler: the shuffler sees who"
            " sent each sealed report, and with the collector it could link reports to"
            " devices.",
            "Valid reports injected by anyone (fresh ones, made with the app's keys) count"
            " toward a batch's n but hide nobody: a batch of n with n − 1 fake reports leaves"
            " the one real device at its local ε, so the local ε must be acceptable on its"
            " own.",
        ]
    )


def shuffle_section(
    specs: Iterable[MetricSpec],
    batches: Iterable[ShuffledBatch],
    source: Source,
    groups: list[BatchGroup] | None = None,
    min_batch: int | None = None,
    received: Mapping[str, int] | None = None,
) -> ShuffleSection:
    """The shuffled section of the privacy account for ``batches``, each listed (``source``
    says whether they were released or assumed), the bound of each from its metric's spec in
    ``specs``. ``groups`` summarize every batch when ``batches`` lists only some (the
    collector's most recent); by default ``batches`` are all. ``min_batch``: the collector's
    minimum (released batches), below which a batch (counted without its refused reports) is
    flagged and stated. ``received``: the distinct reports the collector holds per metric
    (released batches), so that each metric's statement says what share came through the
    shuffler. Each distinct batch key is computed once: the work is one bound per group and
    per listed batch."""
    by_name = {spec.name: spec for spec in specs}
    listed = list(batches)
    if groups is None:
        groups = group_batches(listed, min_batch)
    cache: dict[tuple[str, str, float, int, float], ShuffledBatchRow] = {}

    def row_of(batch: ShuffledBatch) -> ShuffledBatchRow:
        key = (batch.metric, batch.mechanism, batch.epsilon, batch.n, batch.delta)
        if key not in cache:
            plain = replace(batch, batch=None, refused=0, declared=0, incomplete=False)
            cache[key] = batch_row(plain, by_name, min_batch)
        return replace(
            cache[key],
            batch=batch.batch,
            refused=batch.refused,
            declared=batch.declared,
            incomplete=batch.incomplete,
        )

    metrics = _weakest(groups, row_of, by_name, received)
    rows = [row_of(batch) for batch in listed]
    if not metrics:
        source = "none"
    named = {m.metric for m in metrics}
    unshuffled = [spec for name, spec in by_name.items() if name not in named]
    return ShuffleSection(
        source=source,
        batch_count=sum(m.batches for m in metrics),
        batches=rows,
        metrics=metrics,
        statement=shuffle_statement(source, metrics, min_batch, unshuffled),
        min_batch=min_batch,
    )
