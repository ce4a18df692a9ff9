"""What every server kind is: an accumulator of its reports (from a batch, or from a count
source, and merged across periods, cells or files) and its estimate document from one, keyed
by the client kind class it estimates.

PipelineDP's ``Combiner`` (create_accumulator, merge_accumulators, compute_metrics) is the
model: :meth:`KindEstimator.from_reports`, :meth:`~Accumulator.merge` and
:meth:`KindEstimator.compute`. A kind registers itself once, with :func:`register` on its
estimator class, and :func:`estimator_of` finds it for a spec (a subclass of a registered
kind, such as boolean of categorical, takes its parent's).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from deniable.client.mechanisms import Payload
from deniable.client.spec import MetricSpec

from ..choices import Method, Pooling
from ..differences import Change, share_changes
from ..frequency import estimate
from ..results import CellStats, Estimate, PeriodCounts, PeriodSums

if TYPE_CHECKING:
    import polars as pl

    from ..engine import CountsSource, DocumentQuery

Report = tuple[str, Payload]
"""One report as an accumulator takes it: its period label and its parsed payload."""

Span = tuple[str | None, str | None]
"""The first and last period label a document names (None where unknown)."""

Windows = tuple[list[str], list[str]]
"""A comparison's two windows of period labels: the current one and its baseline."""


def cell_counts(labels: Sequence[str], stats: CellStats) -> list[PeriodCounts]:
    """A cell's support counts of each period of ``labels``, as the share estimators take them."""
    return [
        PeriodCounts(label, int(stats.n[i]), stats.counts[i].tolist())
        for i, label in enumerate(labels)
    ]


def cell_sums(labels: Sequence[str], stats: CellStats) -> list[PeriodSums]:
    """A cell's sums of each period of ``labels``, as the mean estimators take them."""
    return [
        PeriodSums(label, int(stats.n[i]), float(stats.total[i]), float(stats.total_squares[i]))
        for i, label in enumerate(labels)
    ]


@dataclass(frozen=True)
class SliceOptions:
    """How a breakdown estimates each shown slice: at the slice ``confidence`` (the query's,
    shared among the ``shown`` slices), with the shares' ``method`` and ``pooling``, and a text
    metric's ``candidates`` to score (None: discover)."""

    confidence: float
    method: Method
    pooling: Pooling
    shown: int
    candidates: list[str] | None = None


class Accumulator(Protocol):
    """The sufficient statistics of a kind's reports, which add up: merging the accumulators
    of two disjoint batches gives the accumulator of both."""

    def merge(self, other: Self) -> Self:
        """The accumulator of this one's reports and ``other``'s."""
        ...


class PeriodTotals(Protocol):
    """One period's sufficient statistics, named by its period label."""

    @property
    def period(self) -> str:
        """The period's label."""
        ...


P = TypeVar("P", bound=PeriodTotals)


def merge_periods(
    ours: Iterable[P], theirs: Iterable[P], add: Callable[[P, P], P]
) -> tuple[P, ...]:
    """Two accumulators' periods as one, in label order: a period in both is ``add(ours,
    theirs)``, a period in one only is kept as it is."""
    merged: dict[str, P] = {p.period: p for p in ours}
    for period in theirs:
        mine = merged.get(period.period)
        merged[period.period] = period if mine is None else add(mine, period)
    return tuple(merged[label] for label in sorted(merged))


A = TypeVar("A", bound=Accumulator)
S = TypeVar("S", bound=MetricSpec)


class KindEstimator(ABC, Generic[S, A]):
    """One kind's server side: its accumulator made from reports or read from a count
    source, and its estimate document computed from the accumulator."""

    @abstractmethod
    def from_reports(self, spec: S, reports: Iterable[Report]) -> A:
        """The accumulator of a batch of ``spec``'s reports, periods in label order."""

    @abstractmethod
    def from_source(self, spec: S, source: CountsSource) -> A:
        """The accumulator of ``source``'s range, as the source reduced its reports."""

    @abstractmethod
    def compute(self, spec: S, accumulator: A, span: Span, query: DocumentQuery) -> dict[str, Any]:
        """The estimate document of ``spec`` over ``span`` from ``accumulator``."""

    @abstractmethod
    def from_cell(self, spec: S, stats: CellStats, labels: Sequence[str]) -> A:
        """The accumulator of one dimension cell (or slice) over the periods ``labels``."""

    @abstractmethod
    def slice_document(
        self, spec: S, accumulator: A, span: Span, options: SliceOptions
    ) -> dict[str, Any]:
        """The estimate document of one shown slice of a breakdown (simultaneous intervals
        over the slices' categories, no quantiles)."""

    def share_estimate(self, spec: S, periods: Sequence[PeriodCounts], **options: Any) -> Estimate:
        """The shares' estimate over ``periods`` (a kind with shares; the default is the
        frequency oracle's, with the options as given)."""
        return estimate(spec.randomizer, spec.categories, periods, **options)

    def reports_estimate(self, spec: S, table: pl.DataFrame, **options: Any) -> Estimate:
        """The shares' estimate from a table of raw reports (an export file's), the default
        the frequency oracle's over its reports."""
        from ..reports import estimate_reports

        return estimate_reports(spec.randomizer, spec.categories, table, **options)

    def changes(
        self, spec: S, windows: Windows, stats: tuple[CellStats, CellStats], **options: Any
    ) -> list[Change]:
        """The change rows of one slice between its current and baseline window's statistics
        (the default: each category's share, with the method asked)."""
        (now, then), (current, baseline) = windows, stats
        return share_changes(
            spec.randomizer,
            spec.categories,
            cell_counts(now, current),
            cell_counts(then, baseline),
            **options,
        )

    def document(self, spec: S, source: CountsSource, query: DocumentQuery) -> dict[str, Any]:
        """The estimate document over ``source``'s range (a kind whose source may know
        better, such as an export file's exact mle, reads it there)."""
        return self.compute(
            spec, self.from_source(spec, source), (source.first, source.last), query
        )


_ESTIMATORS: dict[type[MetricSpec], KindEstimator[Any, Any]] = {}
"""Every server kind by the client kind class it estimates."""

E = TypeVar("E", bound=KindEstimator[Any, Any])


def register(kind: type[MetricSpec]) -> Callable[[type[E]], type[E]]:
    """Register the decorated estimator class (one instance) as the server side of ``kind``
    and of its subclasses that register none of their own."""

    def decorate(cls: type[E]) -> type[E]:
        _ESTIMATORS[kind] = cls()
        return cls

    return decorate


def registered() -> dict[type[MetricSpec], KindEstimator[Any, Any]]:
    """A copy of the registry: kind class to its estimator."""
    return dict(_ESTIMATORS)


def estimator_of(spec: MetricSpec | type[MetricSpec]) -> KindEstimator[Any, Any]:
    """The estimator of ``spec``'s kind: its class's, or the nearest registered base's."""
    cls = spec if isinstance(spec, type) else type(spec)
    for base in cls.__mro__:
        found = _ESTIMATORS.get(base)
        if found is not None:
            return found
    raise TypeError(f"no estimator is registered for the kind {cls.__name__}")
