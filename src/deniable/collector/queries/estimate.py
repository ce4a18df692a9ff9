"""The estimate of a range of periods: what ``GET /v1/metrics/{name}/estimate`` answers, and
what the dashboard and the Prometheus exposition show.

A range's document is the estimate engine's (:func:`deniable.estimators.engine.document`)
over the stored counts (:class:`.stored.StoredCounts`), the engine the CLI runs over an
archive or an export file: a numeric metric's documents carry its mean, a histogram's add
quantile intervals, a text metric's list its heavy hitters.
"""

from __future__ import annotations

import math
from typing import Any

from deniable.client.errors import InvalidInput
from deniable.client.kinds import NumericSpec, TextSpec
from deniable.client.spec import MetricSpec
from deniable.estimators.engine import document

from ..context import Collector
from ..readcache import cached_document, rendered_document
from ..storage.queries import SpecChanged
from .breakdown import Slicing, breakdown, parse_by, parse_compare, parse_where, slice_count
from .compare import compared_estimate
from .limits import categories_of, check_cells
from .query import EstimateQuery
from .ranges import range_labels, resolve_range
from .reading import about, checked_quantiles, numeric_method, refused
from .refusal import QueryRefused, UnknownMetric, refuse
from .stored import StoredCounts


def made_estimate(state: Collector, query: EstimateQuery) -> dict[str, Any]:
    """The population estimate over the periods start..end, pooled as the query says: the
    shares of each category, a histogram's quantile intervals too, or a numeric metric's mean
    (its only method is unbiased; ``simultaneous`` changes nothing for one interval), or a
    text metric's heavy hitters over one period (``candidates`` to score given strings).
    With ``by``, ``where`` or ``compare``, the estimate per slice of the metric's dimensions
    instead (shares or means; a histogram's slices give its buckets' shares, without
    quantiles). With ``compare_to``, the change from that window to this one instead (per
    slice with ``by``/``where``)."""
    if query.compare_to is None and not query.sliced:
        return range_estimate(state, query)
    spec, labels = range_labels(state, query.metric, query.start, query.end)
    if query.candidates is not None and not isinstance(spec, TextSpec):
        raise refuse(f"candidates are for text metrics; {spec.name} is {spec.type}")
    if query.compare_to is not None:
        return compared_estimate(state, spec, labels, query)
    if isinstance(spec, TextSpec):
        checked_quantiles(spec, query.quantiles)
        if query.compare is not None:
            raise refuse(
                f"compare is for shares and means; {spec.name} is a text metric"
                " (its slices list their own strings: compare them side by side)"
            )
        return about(state, spec, text_breakdown(state, spec, labels, query))
    return sliced_estimate(state, spec, labels, query)


estimate = cached_document("estimate")(made_estimate)
"""The estimate document (:func:`made_estimate`), from the read cache when it holds it."""


def estimate_json(state: Collector, query: EstimateQuery) -> bytes:
    """:func:`estimate`'s document as the JSON bytes its answer carries: a read-cache hit's
    bytes as kept, neither parsed nor written again."""
    return rendered_document("estimate", made_estimate, state, query)


def range_estimate(state: Collector, query: EstimateQuery) -> dict[str, Any]:
    """The estimate of one range, no slices, no comparison (:func:`estimate`).

    It starts from the spec as cached, unchecked: every read of its counts checks the
    registered fingerprint in the same statement (:class:`SpecChanged` otherwise), so a
    document it makes is one of the current spec. Only when it ends in a refusal or
    :class:`SpecChanged` is the cached spec checked against the database; if it was stale,
    the estimate is made again from the current one, as every other read is. One database
    round trip fewer per estimate than checking first."""
    cached = state.specs.cached(query.metric)
    if cached is not None:
        try:
            return _range_document(state, cached, query)
        except (QueryRefused, SpecChanged):
            current = state.specs.get(query.metric)
            if current is not None and current.fingerprint == cached.fingerprint:
                raise
    current = state.specs.get(query.metric)
    if current is None:
        raise UnknownMetric(query.metric)
    return _range_document(state, current, query)


def _range_document(state: Collector, spec: MetricSpec, query: EstimateQuery) -> dict[str, Any]:
    """:func:`range_estimate` of ``spec`` as registered: its range, the query's options
    checked, then the document (a text metric's of its one period)."""
    labels = resolve_range(state, spec, query.start, query.end)
    if query.candidates is not None and not isinstance(spec, TextSpec):
        raise refuse(f"candidates are for text metrics; {spec.name} is {spec.type}")
    limit = state.settings.max_estimate_cells
    if isinstance(spec, TextSpec):
        checked_quantiles(spec, query.quantiles)
        labels = [text_period(spec, labels, query)]
    check_cells(spec, len(labels), limit, "the estimate", "DENIABLE_MAX_ESTIMATE_CELLS")
    if not isinstance(spec, TextSpec):
        checked_quantiles(spec, query.quantiles)
    if isinstance(spec, NumericSpec):
        numeric_method(spec, query)
    source = StoredCounts(state.database, spec, labels)
    try:
        found = document(spec, source, query)
    except InvalidInput as exc:
        raise refused(spec, exc) from None
    if source.about is not None:  # read with the counts, from the same snapshot
        return found | source.about.as_dict()
    return about(state, spec, found)


def sliced_estimate(
    state: Collector, spec: MetricSpec, labels: list[str], query: EstimateQuery
) -> dict[str, Any]:
    """The breakdown of ``spec`` by the query's ``by`` filtered by its ``where``
    (:mod:`.breakdown`), after checking slices × periods × categories against the estimate
    cells limit."""
    if isinstance(spec, NumericSpec):
        numeric_method(spec, query)
    dims, kept = parse_by(spec, query.by), parse_where(spec, query.where)
    pair = parse_compare(spec, dims, query.compare)
    slices = slice_count(spec, dims)
    limit = state.settings.max_estimate_cells
    cells = slices * len(labels) * categories_of(spec)
    if cells > limit:
        raise refuse(
            f"the breakdown would cover {slices:,} slices × {len(labels):,} periods ×"
            f" {categories_of(spec):,} categories, more than the limit of {limit:,} cells"
            " (DENIABLE_MAX_ESTIMATE_CELLS): ask for fewer periods or fewer dimensions"
        )
    return about(
        state,
        spec,
        breakdown(
            state,
            Slicing(spec, labels, dims, kept),
            confidence=query.confidence,
            method=query.shares_method(isinstance(spec, NumericSpec)),
            pooling=query.pooling,
            compare=pair,
        ),
    )


def candidates_of(query: EstimateQuery) -> list[str] | None:
    """The query's candidate strings as the estimators take them (None: discover)."""
    return None if query.candidates is None else list(query.candidates)


def text_period(spec: MetricSpec, labels: list[str], query: EstimateQuery) -> str:
    """The one period a text metric's estimate covers (the end period unless ``start`` is
    given and equal): its floor holds for one batch of independent reports, and one device
    reports in many periods, so a range is refused rather than pooled; so is a method."""
    if query.start is not None and len(labels) > 1:
        raise refuse(
            f"metric {spec.name} is text: its estimate covers one period (its detection"
            " floor holds for one batch); give start equal to end, or end alone"
        )
    if query.method is not None and query.method != "unbiased":
        raise refuse(
            f"metric {spec.name} is text: method has no meaning for it (its shares are"
            " the debiased sketch estimates)"
        )
    return labels[-1]


def text_breakdown(
    state: Collector, spec: MetricSpec, labels: list[str], query: EstimateQuery
) -> dict[str, Any]:
    """A text metric's heavy hitters per slice of its dimensions in one period
    (:func:`text_period`), each slice decoded from its summed cell counts (:mod:`.breakdown`).

    Work is bounded before it starts: every cell of the metric is read, each a whole sketch,
    so its cells × 1 period × its sketch's counts must be within the estimate cells limit
    (the spec keeps it within the default); decoding is per slice, each bounded by the sketch
    and the survivor cap."""
    label = text_period(spec, labels, query)
    dims, kept = parse_by(spec, query.by), parse_where(spec, query.where)
    cells, width = math.prod(len(v) + 1 for _, v in spec.dimensions), spec.count_width
    limit = state.settings.max_estimate_cells
    if cells * width > limit:
        raise refuse(
            f"the breakdown would read {cells:,} cells × 1 period × {width:,} sketch"
            f" counts, more than the limit of {limit:,} cells (DENIABLE_MAX_ESTIMATE_CELLS)"
        )
    return breakdown(
        state,
        Slicing(spec, [label], dims, kept),
        confidence=query.confidence,
        method="unbiased",
        pooling="overlap-safe",
        candidates=candidates_of(query),
    )
