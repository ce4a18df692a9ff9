"""One estimate per period of a range: what ``GET /v1/metrics/{name}/series`` answers, and the
trends the dashboard draws (by slice: :mod:`.slices`)."""

from __future__ import annotations

from typing import Any

from deniable.client.errors import InvalidInput
from deniable.client.kinds import HistogramSpec, NumericSpec, TextSpec
from deniable.client.spec import MetricSpec
from deniable.estimators import (
    histogram_series_document,
    mean_series_document,
    series_document,
)
from deniable.estimators.documents import counted_series
from deniable.estimators.heavyhitters import text_series_document
from deniable.estimators.quantiles import quantile_series

from ..context import Collector
from ..readcache import cached_document
from ..storage.queries import read_counts
from .limits import check_cells, check_quantile_cells
from .query import EstimateQuery
from .ranges import range_labels
from .reading import (
    about,
    checked_quantiles,
    estimate_periods,
    numeric_method,
    numeric_sums,
    range_counts,
    refused,
    share_options,
)
from .refusal import refuse
from .slices import slice_series


@cached_document("series")
def series(state: Collector, query: EstimateQuery) -> dict[str, Any]:
    """One estimate per period of start..end, oldest first; periods without reports have n = 0.

    ``simultaneous`` makes each period's intervals hold for all categories at once. A numeric
    metric's series has each period's mean instead. A histogram's series asked with quantiles
    adds each period's quantile intervals (``quantiles``) and the metric's ``edges``. With
    ``by`` or ``where``, a breakdown per period instead (:mod:`.slices`)."""
    spec, labels = range_labels(state, query.metric, query.start, query.end)
    if not spec.sliced_series and (query.by is not None or query.where is not None):
        raise refuse(
            f"{spec.name} is a {spec.type} metric: a series by slice of its shares is not"
            " available yet; ask for its series without by or where"
        )
    if query.by is not None or query.where is not None:
        if query.quantiles:
            raise refuse("q: a series by slice gives bucket shares, not quantiles")
        if isinstance(spec, NumericSpec):
            numeric_method(spec, query)
        return about(state, spec, slice_series(state, spec, labels, query))
    if isinstance(spec, TextSpec):
        return about(state, spec, text_series(state, spec, labels, query))
    limit = state.settings.max_series_cells
    check_cells(spec, len(labels), limit, "the series", "DENIABLE_MAX_SERIES_CELLS")
    qs = checked_quantiles(spec, query.quantiles) if query.quantiles else ()
    if qs:
        check_quantile_cells(spec, len(labels), len(qs), limit)
    if isinstance(spec, NumericSpec):
        sums = numeric_sums(state, spec, labels, query)
        try:
            document = mean_series_document(spec, sums, confidence=query.confidence)
            return about(state, spec, counted_series(spec, document))
        except InvalidInput as exc:
            raise refused(spec, exc) from None
    periods = range_counts(state, spec, labels)
    chosen = share_options(query)
    if spec.fixed_method is not None:  # the kind's one estimator, which the document names
        chosen["method"] = spec.fixed_method
    points = [(period.period, estimate_periods(spec, [period], **chosen)) for period in periods]
    if not qs:
        document = series_document(spec.name, points, **chosen)
        return about(state, spec, counted_series(spec, document))
    assert isinstance(spec, HistogramSpec)  # checked_quantiles refused q for any other kind
    try:
        quantiles = quantile_series(
            spec.randomizer,
            spec.edges,
            periods,
            qs,
            confidence=query.confidence,
        )
    except InvalidInput as exc:
        raise refused(spec, exc) from None
    rows = [(label, result, qi) for (label, result), qi in zip(points, quantiles, strict=True)]
    document = histogram_series_document(spec.name, rows, spec.edges, **chosen)
    return about(state, spec, counted_series(spec, document))


def text_series(
    state: Collector, spec: MetricSpec, labels: list[str], query: EstimateQuery
) -> dict[str, Any]:
    """A text metric's discovery in each period, each with its own floor: its counts are a
    sketch, so the estimate's cells limit bounds the periods read."""
    if query.method is not None and query.method != "unbiased":
        raise refuse(f"metric {spec.name} is text: method has no meaning for it")
    limit = state.settings.max_estimate_cells
    check_cells(spec, len(labels), limit, "the series", "DENIABLE_MAX_ESTIMATE_CELLS")
    _, counts = read_counts(state.database, spec, labels)
    return text_series_document(
        spec.name, labels, spec.text_randomizer, counts, confidence=query.confidence
    )
