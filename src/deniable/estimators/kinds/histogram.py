"""The histogram kind's server side: the categorical kind's counts over buckets, and its
document adds quantile intervals to the buckets' shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deniable.client.kinds import HistogramSpec
from deniable.client.kinds.oracle import OracleSpec

from ..choices import check_quantiles
from ..documents import histogram_document
from ..quantiles import estimate_quantiles
from ..results import Estimate
from .base import Span, register
from .categorical import CategoricalEstimator, Counts

if TYPE_CHECKING:
    from ..engine import DocumentQuery


@register(HistogramSpec)
class HistogramEstimator(CategoricalEstimator):
    """The buckets' shares and the quantiles' intervals from the same counts."""

    def shares_document(
        self, spec: OracleSpec, span: Span, shares: Estimate, counts: Counts, query: DocumentQuery
    ) -> dict[str, Any]:
        """The buckets' shares with the quantiles' intervals (the defaults if none asked)."""
        assert isinstance(spec, HistogramSpec)
        qs = check_quantiles(None if query.quantiles is None else list(query.quantiles))
        intervals = estimate_quantiles(
            spec.randomizer,
            spec.edges,
            list(counts()),
            qs,
            confidence=query.confidence,
            pooling=query.pooling,
        )
        return histogram_document(spec.name, span[0], span[1], shares, intervals, spec.edges)
