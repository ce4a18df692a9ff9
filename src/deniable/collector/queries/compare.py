"""The change of an estimate from one window of periods to another (``compare_to``), after
the refusals and the cells limit that bound it (the statistics: :mod:`.changes`)."""

from __future__ import annotations

from typing import Any

from deniable.client.kinds import NumericSpec, TextSpec
from deniable.client.spec import MetricSpec

from ..context import Collector
from .breakdown import parse_by, parse_where, slice_count
from .changes import baseline_labels, period_comparison
from .limits import categories_of
from .query import EstimateQuery
from .reading import about, numeric_method
from .refusal import refuse


def compared_estimate(
    state: Collector, spec: MetricSpec, labels: list[str], query: EstimateQuery
) -> dict[str, Any]:
    """The change of ``spec`` from the query's ``compare_to`` window to ``labels``
    (:mod:`.changes`), after checking slices × periods of both windows × categories against
    the estimate cells limit; 422 for a text metric, with ``compare`` (one comparison at a
    time) or quantiles."""
    assert query.compare_to is not None
    if isinstance(spec, TextSpec):
        raise refuse(
            f"compare_to: {spec.name} is a text metric; compare its series' periods instead"
        )
    if query.compare is not None or query.quantiles:
        raise refuse("compare_to compares periods: leave out compare (slices) and q (quantiles)")
    if isinstance(spec, NumericSpec):
        numeric_method(spec, query)
    dims, kept = parse_by(spec, query.by), parse_where(spec, query.where)
    limit_periods = state.settings.max_range_periods
    baseline = baseline_labels(spec, labels, query.compare_to, limit_periods)
    slices = slice_count(spec, dims)
    periods = len(labels) + len(baseline)
    limit = state.settings.max_estimate_cells
    if slices * periods * categories_of(spec) > limit:
        raise refuse(
            f"the comparison would cover {slices:,} slices × {periods:,} periods (both"
            f" windows) × {categories_of(spec):,} categories, more than the limit of {limit:,}"
            " cells (DENIABLE_MAX_ESTIMATE_CELLS): ask for fewer periods or fewer dimensions"
        )
    document = period_comparison(
        state,
        spec,
        labels,
        baseline,
        None if query.by is None else dims,
        None if query.where is None else kept,
        confidence=query.confidence,
        method=query.shares_method(isinstance(spec, NumericSpec)),
        pooling=query.pooling,
    )
    return about(state, spec, document)
