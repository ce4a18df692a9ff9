"""The set kind's server side: the k + L support counts of its oracle per period (the
categorical accumulator, over the oracle's items), and each category's share of devices from
them (:mod:`..setfrequency`, docs/STATS.md section 16)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from deniable.client.kinds import SetSpec

from ..differences import Change
from ..results import CellStats, Estimate, PeriodCounts
from ..setfrequency import (
    SetEstimate,
    set_changes,
    set_document,
    set_estimate,
    set_source_document,
)
from .base import Span, Windows, cell_counts, register
from .categorical import OracleCountsEstimator, ShareCounts, share_options

if TYPE_CHECKING:
    import polars as pl

    from ..engine import DocumentQuery

SET_OPTIONS = ("confidence", "simultaneous", "pooling")
"""The options a set's shares take: no method, as they have one estimator (unbiased)."""


@register(SetSpec)
class SetEstimator(OracleCountsEstimator[SetSpec]):
    """Shares of devices: the oracle's k + L counts in, each category's share out (one
    method, unbiased: the shares of a set do not lie on a simplex)."""

    def compute(
        self, spec: SetSpec, accumulator: ShareCounts, span: Span, query: DocumentQuery
    ) -> dict[str, Any]:
        """Each category's share of devices over the periods."""
        return set_source_document(
            spec, span[0], span[1], accumulator.periods, share_options(query)
        )

    def range_document(self, spec: SetSpec, span: Span, shares: Estimate) -> dict[str, Any]:
        """The document of the shares of devices over ``span``, a slice's among them."""
        return set_document(spec.name, span[0], span[1], cast(SetEstimate, shares))

    def share_estimate(
        self, spec: SetSpec, periods: Sequence[PeriodCounts], **options: Any
    ) -> Estimate:
        """Each category's share of devices from the k + L counts (the method, and any option
        other than :data:`SET_OPTIONS`, left out: its one estimator is unbiased)."""
        shares = {key: value for key, value in options.items() if key in SET_OPTIONS}
        return set_estimate(spec.set_randomizer, spec.categories, periods, **shares)

    def reports_estimate(self, spec: SetSpec, table: pl.DataFrame, **options: Any) -> Estimate:
        """The shares of devices from the raw reports' k + L counts."""
        from ..reports import report_counts

        return self.share_estimate(spec, report_counts(spec.randomizer, table), **options)

    def changes(
        self,
        spec: SetSpec,
        windows: Windows,
        stats: tuple[CellStats, CellStats],
        **options: Any,
    ) -> list[Change]:
        """Each category's change of its share of devices (one estimator: the method left out)."""
        (now, then), (current, baseline) = windows, stats
        options.pop("method", None)
        return set_changes(
            spec.set_randomizer,
            spec.categories,
            cell_counts(now, current),
            cell_counts(then, baseline),
            **options,
        )
