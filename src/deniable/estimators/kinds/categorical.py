"""The categorical kind's server side (boolean as its case): support counts per period,
summed per category, and the shares' estimate document from them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deniable.client.kinds import CategoricalSpec
from deniable.client.kinds.oracle import OracleSpec
from deniable.client.mechanisms import Mechanism
from deniable.client.spec import MetricSpec

from ..choices import DEFAULT_METHOD
from ..documents import estimate_document
from ..frequency import estimate
from ..results import CellStats, Estimate, PeriodCounts
from .base import (
    KindEstimator,
    Report,
    S,
    SliceOptions,
    Span,
    cell_counts,
    merge_periods,
    register,
)

if TYPE_CHECKING:
    from ..engine import CountsSource, DocumentQuery

Counts = Callable[[], Sequence[PeriodCounts]]
"""The counts of a document's periods, read when called: only by a kind whose document needs
them (a histogram's quantiles), so the others never read them."""


@dataclass(frozen=True)
class ShareCounts:
    """The accumulator of a kind reported through a frequency oracle: each period's n and
    support count per category, periods in label order."""

    periods: tuple[PeriodCounts, ...]

    def merge(self, other: ShareCounts) -> ShareCounts:
        """Both accumulators' counts added, period by period (a period in one only kept)."""
        return ShareCounts(merge_periods(self.periods, other.periods, _add_counts))


def _add_counts(mine: PeriodCounts, theirs: PeriodCounts) -> PeriodCounts:
    """One period's counts from two disjoint batches, added category by category."""
    return PeriodCounts(
        mine.period,
        mine.n + theirs.n,
        [a + b for a, b in zip(mine.counts, theirs.counts, strict=True)],
    )


def share_options(query: DocumentQuery) -> dict[str, Any]:
    """The options of a share estimate, the method defaulted."""
    return {
        "confidence": query.confidence,
        "method": query.method or DEFAULT_METHOD,
        "simultaneous": query.simultaneous,
        "pooling": query.pooling,
    }


def counted_shares(
    spec: MetricSpec, periods: Sequence[PeriodCounts], options: dict[str, Any]
) -> Estimate:
    """The shares' estimate from ``periods``' counts (periods without reports add nothing)."""
    return estimate(spec.randomizer, spec.categories, list(periods), **options)


def oracle_counts(randomizer: Mechanism, width: int, reports: Iterable[Report]) -> ShareCounts:
    """The support counts of a batch of reports of a frequency oracle over ``width`` items,
    per period."""
    n: dict[str, int] = {}
    counts: dict[str, list[int]] = {}
    for period, payload in reports:
        n[period] = n.get(period, 0) + 1
        row = counts.setdefault(period, [0] * width)
        for index in randomizer.supported(payload):
            row[index] += 1
    return ShareCounts(tuple(PeriodCounts(p, n[p], counts[p]) for p in sorted(n)))


class OracleCountsEstimator(KindEstimator[S, ShareCounts]):
    """A kind whose reports come through a frequency oracle (``spec.randomizer``): its
    accumulator is the oracle's support counts over its ``count_width`` items, per period."""

    def from_reports(self, spec: S, reports: Iterable[Report]) -> ShareCounts:
        """The oracle's support counts of the reports, per period."""
        return oracle_counts(spec.randomizer, spec.count_width, reports)

    def from_source(self, spec: S, source: CountsSource) -> ShareCounts:
        """The source's counts per period."""
        return ShareCounts(tuple(source.counts()))

    def from_cell(self, spec: S, stats: CellStats, labels: Sequence[str]) -> ShareCounts:
        """The cell's counts of each period."""
        return ShareCounts(tuple(cell_counts(labels, stats)))

    def slice_document(
        self, spec: S, accumulator: ShareCounts, span: Span, options: SliceOptions
    ) -> dict[str, Any]:
        """The slice's shares, simultaneous over its categories (a histogram's buckets too)."""
        shares = self.share_estimate(
            spec,
            list(accumulator.periods),
            confidence=options.confidence,
            method=options.method,
            simultaneous=True,
            pooling=options.pooling,
        )
        return self.range_document(spec, span, shares)

    def range_document(self, spec: S, span: Span, shares: Estimate) -> dict[str, Any]:
        """The document of ``shares`` over ``span``: the estimate document (a set has its own)."""
        return estimate_document(spec.name, span[0], span[1], shares)


@register(CategoricalSpec)
class CategoricalEstimator(OracleCountsEstimator[OracleSpec]):
    """Shares of categories: counts in, the shares' estimate document out."""

    def compute(
        self, spec: OracleSpec, accumulator: ShareCounts, span: Span, query: DocumentQuery
    ) -> dict[str, Any]:
        """The shares' document from the counts."""
        shares = counted_shares(spec, accumulator.periods, share_options(query))
        return self.shares_document(spec, span, shares, lambda: accumulator.periods, query)

    def document(
        self, spec: OracleSpec, source: CountsSource, query: DocumentQuery
    ) -> dict[str, Any]:
        """The shares' document with the source's shares (an export file's exact mle runs
        over its distinct reports), its counts read only if the kind needs them."""
        shares = source.shares(spec, share_options(query))
        return self.shares_document(spec, (source.first, source.last), shares, source.counts, query)

    def shares_document(
        self, spec: OracleSpec, span: Span, shares: Estimate, counts: Counts, query: DocumentQuery
    ) -> dict[str, Any]:
        """The document of ``shares`` (a kind that needs the counts too reads ``counts``)."""
        return estimate_document(spec.name, span[0], span[1], shares)
