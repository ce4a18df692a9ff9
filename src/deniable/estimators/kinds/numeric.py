"""The numeric kind's server side: each period's n, sum of payloads and sum of their
squares, and the mean's document from them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deniable.client.kinds import NumericSpec

from ..choices import Pooling
from ..differences import Change, mean_change
from ..documents import mean_document
from ..results import CellStats, PeriodSums
from .base import (
    KindEstimator,
    Report,
    SliceOptions,
    Span,
    Windows,
    cell_sums,
    merge_periods,
    register,
)

if TYPE_CHECKING:
    from ..engine import CountsSource, DocumentQuery


@dataclass(frozen=True)
class MeanSums:
    """The accumulator of a numeric metric: each period's sums, periods in label order."""

    periods: tuple[PeriodSums, ...]

    def merge(self, other: MeanSums) -> MeanSums:
        """Both accumulators' sums added, period by period (a period in one only kept)."""
        return MeanSums(merge_periods(self.periods, other.periods, _add_sums))


def _add_sums(mine: PeriodSums, theirs: PeriodSums) -> PeriodSums:
    """One period's sums from two disjoint batches, added."""
    return PeriodSums(
        mine.period,
        mine.n + theirs.n,
        mine.total + theirs.total,
        mine.total_squares + theirs.total_squares,
    )


@register(NumericSpec)
class NumericEstimator(KindEstimator[NumericSpec, MeanSums]):
    """A mean: sums in, the mean's document (in value units) out."""

    def from_reports(self, spec: NumericSpec, reports: Iterable[Report]) -> MeanSums:
        """The sums of the reports' payloads (y on the [-1, 1] axis), per period."""
        sums: dict[str, tuple[int, float, float]] = {}
        for period, payload in reports:
            if not isinstance(payload, int | float):
                raise TypeError(f"metric {spec.name}: a numeric payload is a number")
            y = float(payload)
            n, total, squares = sums.get(period, (0, 0.0, 0.0))
            sums[period] = (n + 1, total + y, squares + y * y)
        return MeanSums(tuple(PeriodSums(p, *sums[p]) for p in sorted(sums)))

    def from_source(self, spec: NumericSpec, source: CountsSource) -> MeanSums:
        """The source's sums per period."""
        return MeanSums(tuple(source.sums()))

    def from_cell(self, spec: NumericSpec, stats: CellStats, labels: Sequence[str]) -> MeanSums:
        """The cell's sums of each period."""
        return MeanSums(
            tuple(
                PeriodSums(
                    label, int(stats.n[i]), float(stats.total[i]), float(stats.total_squares[i])
                )
                for i, label in enumerate(labels)
            )
        )

    def changes(
        self,
        spec: NumericSpec,
        windows: Windows,
        stats: tuple[CellStats, CellStats],
        **options: Any,
    ) -> list[Change]:
        """The one change row of the mean (one estimator: the method left out)."""
        (now, then), (current, baseline) = windows, stats
        options.pop("method", None)
        change = mean_change(
            spec.numeric_randomizer,
            spec.lower,
            spec.upper,
            cell_sums(now, current),
            cell_sums(then, baseline),
            **options,
        )
        return [change]

    def slice_document(
        self, spec: NumericSpec, accumulator: MeanSums, span: Span, options: SliceOptions
    ) -> dict[str, Any]:
        """The slice's mean at the slice confidence."""
        return _mean_document(spec, accumulator, span, options.confidence, options.pooling)

    def compute(
        self, spec: NumericSpec, accumulator: MeanSums, span: Span, query: DocumentQuery
    ) -> dict[str, Any]:
        """The mean's document."""
        return _mean_document(spec, accumulator, span, query.confidence, query.pooling)


def _mean_document(
    spec: NumericSpec, accumulator: MeanSums, span: Span, confidence: float, pooling: Pooling
) -> dict[str, Any]:
    """The mean's document of ``accumulator``'s periods over ``span``, at ``confidence`` with
    ``pooling``: a breakdown's slice and a whole range differ only in these two."""
    return mean_document(
        spec,
        span[0],
        span[1],
        list(accumulator.periods),
        confidence=confidence,
        pooling=pooling,
    )
