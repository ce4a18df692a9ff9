"""Estimates over a range of periods and per-period series, read from stored counts (and a
numeric metric's stored sums) only.

The documents are built by :mod:`deniable.estimators.documents`, the same builders the CLI's
offline estimates use, and their dataclasses are the response models: a numeric metric's
documents carry its mean (from :func:`read_sums`), a histogram's add quantile intervals.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ParamSpec

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from deniable.client.errors import InvalidInput
from deniable.client.spec import (
    MetricSpec,
    period_count,
    period_label,
    period_range,
)
from deniable.estimators import (
    DEFAULT_METHOD,
    DEFAULT_PERIODS,
    AnyRangeEstimate,
    AnySeries,
    Estimate,
    Method,
    PeriodCounts,
    PeriodSums,
    Pooling,
    check_numeric_method,
    check_quantiles,
    estimate,
    estimate_document,
    estimate_quantiles,
    histogram_document,
    histogram_series_document,
    mean_document,
    mean_series_document,
    series_document,
)
from deniable.estimators.choices import periods_back
from deniable.estimators.heavyhitters import (
    MAX_CANDIDATES,
    text_document,
    text_series_document,
)
from deniable.estimators.quantiles import quantile_series

from ..context import Collector
from ..numbers import NumberRule, query_number
from ..readcache import cached_document
from ..storage.queries import count_width, load_about, read_counts, read_sums
from .breakdown import (
    BreakdownEstimate,
    breakdown,
    parse_by,
    parse_compare,
    parse_where,
    slice_count,
)
from .changes import PeriodComparison, baseline_labels, period_comparison
from .common import (
    DocumentResponse,
    MetricPeriods,
    MetricPeriodsQuery,
    find_spec,
    metric_read,
    period_bounds,
)
from .sliceseries import SliceSeries, slice_series

router = APIRouter(tags=["estimates"])

CONFIDENCE_RULE = NumberRule("confidence", 0, 1, open_low=True, open_high=True)
"""How the ``confidence`` query is read: a level strictly between 0 and 1."""
QUANTILE_RULE = NumberRule("q", 0, 1, open_low=True, open_high=True)
"""How each ``q`` query value is read: a quantile strictly between 0 and 1."""

Confidence = query_number(CONFIDENCE_RULE, float, "e.g. 0.95")
Quantiles = Annotated[
    list[Annotated[float, QUANTILE_RULE.validator()]] | None,
    Query(
        description="Histogram metrics only: a quantile to give an interval for, strictly between"
        " 0 and 1 (repeatable; default 0.5, 0.9 and 0.99)"
    ),
]
SeriesQuantiles = Annotated[
    list[Annotated[float, QUANTILE_RULE.validator()]] | None,
    Query(
        description="Histogram metrics only: a quantile to give each period's interval for,"
        " strictly between 0 and 1 (repeatable, at most 20; none unless asked)"
    ),
]
Candidates = Annotated[
    list[str] | None,
    Query(
        description="Text metrics only: a string to score instead of discovering (repeatable,"
        f" at most {MAX_CANDIDATES:,}); each gets its share and interval",
    ),
]


@dataclass
class EstimateOptions:
    """How each estimate of a read is made, as both estimate routes take it: the confidence
    level, the method (shares: :data:`~deniable.estimators.DEFAULT_METHOD` unless given; a
    mean: unbiased, its only one), and whether the intervals hold for all categories at once
    (by default they do, as every surface shows all categories).

    FastAPI fills it from the query as a dependency (:data:`EstimateOptionsQuery`).
    """

    confidence: Confidence = 0.95
    method: Method | None = None
    simultaneous: bool = True

    def for_shares(self) -> dict[str, Any]:
        """The options of a share estimate, the method defaulted."""
        return {
            "confidence": self.confidence,
            "method": self.method or DEFAULT_METHOD,
            "simultaneous": self.simultaneous,
        }


EstimateOptionsQuery = Annotated[EstimateOptions, Depends()]
"""The ``confidence``, ``method`` and ``simultaneous`` query parameters, as one object."""


def resolve_range(state: Collector, spec: MetricSpec, read: MetricPeriods) -> list[str]:
    """The period labels from start to end, oldest first: end defaults to the current
    period, start to :data:`~deniable.estimators.DEFAULT_PERIODS` periods ending at end."""
    current = period_label(spec.period, state.today())
    first, last = period_bounds(spec, read.start, read.end if read.end is not None else current)
    last = last or current
    try:
        first = first or periods_back(spec.period, last, DEFAULT_PERIODS)
    except OverflowError:  # before the calendar's first day
        raise HTTPException(
            status_code=422,
            detail=f"start: there are not {DEFAULT_PERIODS} periods up to {last}; give start",
        ) from None
    limit = state.settings.max_range_periods
    if period_count(spec.period, first, last) > limit:
        raise HTTPException(status_code=422, detail=f"the range covers more than {limit} periods")
    return period_range(spec.period, first, last)


def categories_of(spec: MetricSpec) -> int:
    """The cells one period of ``spec`` adds to a read: its categories (a numeric metric: one,
    its mean; a text metric: its sketch's counts)."""
    if spec.type == "text":
        return count_width(spec)
    return 1 if spec.type == "numeric" else spec.k


def check_cells(spec: MetricSpec, periods: int, limit: int, what: str, setting: str) -> None:
    """422 if ``periods`` periods of ``spec`` pass ``limit`` cells (periods × categories),
    naming the limit, its setting and the most periods of this metric that fit."""
    k = categories_of(spec)
    if periods * k <= limit:
        return
    fits = limit // k
    narrow = (
        f"ask for at most {fits} period{'s' if fits != 1 else ''} of {spec.name} (start, end)"
        if fits
        else f"{spec.name}'s {k:,} categories alone pass it"
    )
    raise HTTPException(
        status_code=422,
        detail=f"{what} would cover {periods:,} periods × {k:,} categories, more than the limit"
        f" of {limit:,} cells ({setting}): {narrow}",
    )


def range_labels(request: Request, read: MetricPeriods) -> tuple[Collector, MetricSpec, list[str]]:
    """The collector, the metric and the labels of its periods start..end, oldest first."""
    state, spec = find_spec(request, read.name)
    return state, spec, resolve_range(state, spec, read)


def range_counts(state: Collector, spec: MetricSpec, labels: list[str]) -> list[PeriodCounts]:
    """The counts of each of the metric's periods ``labels``, in that order."""
    n, counts = read_counts(state.database, spec, labels)
    return [PeriodCounts(label, int(n[i]), counts[i].tolist()) for i, label in enumerate(labels)]


def about(state: Collector, spec: MetricSpec, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the metric's unit, description and owner as registered now."""
    return document | load_about(state.database, spec.name).as_dict()


def refused(spec: MetricSpec, exc: InvalidInput) -> HTTPException:
    """The 422 naming the metric whose options or stored data the estimators refused."""
    return HTTPException(status_code=422, detail=f"metric {spec.name}: {exc}")


def estimate_periods(spec: MetricSpec, periods: list[PeriodCounts], **options: Any) -> Estimate:
    """The estimate over ``periods`` (those without reports add nothing); 422 naming the metric
    if the estimators refuse the options or the counts."""
    try:
        return estimate(spec.randomizer, spec.categories, periods, **options)
    except InvalidInput as exc:
        raise refused(spec, exc) from None


def numeric_method(spec: MetricSpec, options: EstimateOptions) -> None:
    """422 for a numeric metric's method other than unbiased (a mean has one estimator)."""
    try:
        check_numeric_method(options.method or "unbiased")
    except InvalidInput as exc:
        raise refused(spec, exc) from None


def numeric_sums(
    state: Collector, spec: MetricSpec, labels: list[str], options: EstimateOptions
) -> list[PeriodSums]:
    """The sums of numeric ``spec``'s periods ``labels``; 422 for a method other than
    unbiased (a mean has one estimator)."""
    numeric_method(spec, options)
    return read_sums(state.database, spec, labels)


def checked_quantiles(spec: MetricSpec, q: list[float] | None) -> tuple[float, ...]:
    """The quantiles asked for (the defaults if none); 422 unless each is in (0, 1) and the
    metric is a histogram."""
    if q and spec.type != "histogram":
        raise HTTPException(
            status_code=422, detail=f"q is for histogram metrics; {spec.name} is {spec.type}"
        )
    try:
        return check_quantiles(q)
    except InvalidInput as exc:
        raise refused(spec, exc) from None


By = Annotated[
    list[Annotated[str, Query(max_length=32)]] | None,
    Query(
        description="A dimension to break the estimate down by (repeatable, at most 2): one"
        " estimate per slice, every interval shown holding at once"
    ),
]
Where = Annotated[
    list[Annotated[str, Query(max_length=80)]] | None,
    Query(
        description="name:value, keep only that value of a dimension (repeatable; e.g."
        " platform:ios); with no by, the one filtered slice"
    ),
]


Compare = Annotated[
    str | None,
    Query(
        max_length=80,
        description="Two values of the one by dimension, first,second (e.g. ios,android): their"
        " difference per category (or mean) with an interval and a verdict",
    ),
]


CompareTo = Annotated[
    str | None,
    Query(
        max_length=80,
        description="previous (the window of as many periods just before start..end) or"
        " START..END: the estimate minus the one over that window, per category (or mean)"
        " and slice, with an interval valid whatever devices report in both, and a verdict",
    ),
]


@cached_document("estimate")
def metric_estimate(
    request: Request,
    read: MetricPeriodsQuery,
    options: EstimateOptionsQuery,
    pooling: Pooling = "overlap-safe",
    q: Quantiles = None,
    candidates: Candidates = None,
    by: By = None,
    where: Where = None,
    compare: Compare = None,
    compare_to: CompareTo = None,
) -> dict[str, Any]:
    """The estimate document ``GET /v1/metrics/{name}/estimate`` answers (the dashboard and
    the Prometheus exposition read it too): the population estimate over the periods
    start..end, pooled as ``pooling`` says: the shares of each category, a histogram's
    quantile intervals too, or a numeric metric's mean (its only method is unbiased;
    ``simultaneous`` changes nothing for one interval), or a text metric's heavy hitters over
    one period (``candidates`` to score given strings).
    With ``by`` or ``where``, the estimate per slice of the metric's dimensions instead
    (shares or means; a histogram's slices give its buckets' shares, without quantiles).
    With ``compare_to``, the change from that window to this one instead (per slice with
    ``by``/``where``)."""
    if candidates is not None and len(candidates) > MAX_CANDIDATES:
        raise HTTPException(
            status_code=422, detail=f"candidates: at most {MAX_CANDIDATES:,} strings per query"
        )
    state, spec, labels = range_labels(request, read)
    if candidates is not None and spec.type != "text":
        raise HTTPException(
            status_code=422,
            detail=f"candidates are for text metrics; {spec.name} is {spec.type}",
        )
    if compare_to is not None:
        return compared_estimate(
            state, spec, labels, by, where, options, pooling, compare_to, compare, q
        )
    if by is not None or where is not None or compare is not None:
        if spec.type == "text":
            checked_quantiles(spec, q)
            if compare is not None:
                raise HTTPException(
                    status_code=422,
                    detail=f"compare is for shares and means; {spec.name} is a text metric"
                    " (its slices list their own strings: compare them side by side)",
                )
            document = text_breakdown(state, spec, read, labels, by, where, options, candidates)
            return about(state, spec, document)
        return sliced_estimate(state, spec, labels, by, where, options, pooling, compare)
    if spec.type == "text":
        checked_quantiles(spec, q)
        return about(state, spec, text_estimate(state, spec, read, labels, options, candidates))
    limit = state.settings.max_estimate_cells
    check_cells(spec, len(labels), limit, "the estimate", "DENIABLE_MAX_ESTIMATE_CELLS")
    qs = checked_quantiles(spec, q)
    first, last = labels[0], labels[-1]
    if spec.type == "numeric":
        sums = numeric_sums(state, spec, labels, options)
        try:
            document = mean_document(
                spec, first, last, sums, confidence=options.confidence, pooling=pooling
            )
            return about(state, spec, document)
        except InvalidInput as exc:
            raise refused(spec, exc) from None
    periods = range_counts(state, spec, labels)
    result = estimate_periods(spec, periods, pooling=pooling, **options.for_shares())
    if spec.type != "histogram":
        return about(state, spec, estimate_document(spec.name, first, last, result))
    try:
        quantiles = estimate_quantiles(
            spec.randomizer,
            spec.edges,  # type: ignore[arg-type]
            periods,
            qs,
            confidence=options.confidence,
            pooling=pooling,
        )
    except InvalidInput as exc:
        raise refused(spec, exc) from None
    document = histogram_document(spec.name, first, last, result, quantiles, spec.edges)  # type: ignore[arg-type]
    return about(state, spec, document)


P = ParamSpec("P")


def _answered(document: Callable[P, dict[str, Any]], doc: str) -> Callable[P, DocumentResponse]:
    """A route taking ``document``'s parameters (FastAPI reads its signature through
    ``__wrapped__``) and answering its document with :class:`~.common.DocumentResponse`;
    ``doc`` is the route's own docstring."""

    @functools.wraps(document)
    def route(*args: P.args, **kwargs: P.kwargs) -> DocumentResponse:
        return DocumentResponse(document(*args, **kwargs))

    route.__doc__ = doc
    route.__name__ = route.__qualname__ = "get_estimate"
    return route


get_estimate = metric_read(
    router,
    "/v1/metrics/{name}/estimate",
    AnyRangeEstimate | BreakdownEstimate | PeriodComparison,
    operation_id="getEstimate",
    summary="Estimate a metric over a range of periods",
    viewer=True,
)(
    _answered(
        metric_estimate,
        "The population estimate over the periods start..end (shares, a mean, quantiles or a"
        " text metric's heavy hitters), per slice with by/where, or its change with compare_to.",
    )
)


def sliced_estimate(
    state: Collector,
    spec: MetricSpec,
    labels: list[str],
    by: list[str] | None,
    where: list[str] | None,
    options: EstimateOptions,
    pooling: str,
    compare: str | None = None,
) -> dict[str, Any]:
    """The breakdown of ``spec`` by ``by`` filtered by ``where`` (:mod:`.breakdown`), after
    checking slices × periods × categories against the estimate cells limit."""
    if spec.type == "numeric":
        numeric_method(spec, options)
    dims, kept = parse_by(spec, by), parse_where(spec, where)
    pair = parse_compare(spec, dims, compare)
    slices = slice_count(spec, dims)
    limit = state.settings.max_estimate_cells
    cells = slices * len(labels) * categories_of(spec)
    if cells > limit:
        raise HTTPException(
            status_code=422,
            detail=f"the breakdown would cover {slices:,} slices × {len(labels):,} periods ×"
            f" {categories_of(spec):,} categories, more than the limit of {limit:,} cells"
            " (DENIABLE_MAX_ESTIMATE_CELLS): ask for fewer periods or fewer dimensions",
        )
    method = options.method or ("unbiased" if spec.type == "numeric" else DEFAULT_METHOD)
    return about(
        state,
        spec,
        breakdown(
            state,
            spec,
            labels,
            dims,
            kept,
            confidence=options.confidence,
            method=method,
            pooling=pooling,
            compare=pair,
        ),
    )


def compared_estimate(
    state: Collector,
    spec: MetricSpec,
    labels: list[str],
    by: list[str] | None,
    where: list[str] | None,
    options: EstimateOptions,
    pooling: str,
    compare_to: str,
    compare: str | None,
    q: list[float] | None,
) -> dict[str, Any]:
    """The change of ``spec`` from the ``compare_to`` window to ``labels`` (:mod:`.changes`),
    after checking slices × periods of both windows × categories against the estimate cells
    limit; 422 for a text metric, with ``compare`` (one comparison at a time) or ``q``."""
    if spec.type == "text":
        raise HTTPException(
            status_code=422,
            detail=f"compare_to: {spec.name} is a text metric; compare its series' periods instead",
        )
    if compare is not None or q:
        raise HTTPException(
            status_code=422,
            detail="compare_to compares periods: leave out compare (slices) and q (quantiles)",
        )
    if spec.type == "numeric":
        numeric_method(spec, options)
    dims, kept = parse_by(spec, by), parse_where(spec, where)
    baseline = baseline_labels(spec, labels, compare_to, state.settings.max_range_periods)
    slices = slice_count(spec, dims)
    periods = len(labels) + len(baseline)
    limit = state.settings.max_estimate_cells
    if slices * periods * categories_of(spec) > limit:
        raise HTTPException(
            status_code=422,
            detail=f"the comparison would cover {slices:,} slices × {periods:,} periods (both"
            f" windows) × {categories_of(spec):,} categories, more than the limit of {limit:,}"
            " cells (DENIABLE_MAX_ESTIMATE_CELLS): ask for fewer periods or fewer dimensions",
        )
    method = options.method or ("unbiased" if spec.type == "numeric" else DEFAULT_METHOD)
    document = period_comparison(
        state,
        spec,
        labels,
        baseline,
        by if by is None else dims,
        where if where is None else kept,
        confidence=options.confidence,
        method=method,
        pooling=pooling,
    )
    return about(state, spec, document)


def check_quantile_cells(spec: MetricSpec, periods: int, quantiles: int, limit: int) -> None:
    """422 if a histogram series with ``quantiles`` quantile intervals per period passes
    ``limit`` cells, counting periods × (buckets + quantiles): each quantile of each period is
    one more inversion of that period's band. The message names the limit, its setting and
    the most periods that fit."""
    per_period = spec.k + quantiles
    if periods * per_period <= limit:
        return
    fits = limit // per_period
    raise HTTPException(
        status_code=422,
        detail=f"the series with quantiles would cover {periods:,} periods × ({spec.k:,} buckets"
        f" + {quantiles} quantiles), more than the limit of {limit:,} cells"
        f" (DENIABLE_MAX_SERIES_CELLS): ask for at most {fits} period{'s' if fits != 1 else ''}"
        f" of {spec.name} (start, end) or fewer quantiles",
    )


def text_estimate(
    state: Collector,
    spec: MetricSpec,
    read: MetricPeriods,
    labels: list[str],
    options: EstimateOptions,
    candidates: list[str] | None,
) -> dict[str, Any]:
    """A text metric's heavy hitters over one period (:func:`text_period`)."""
    label = text_period(spec, read, labels, options)
    check_cells(
        spec, 1, state.settings.max_estimate_cells, "the estimate", "DENIABLE_MAX_ESTIMATE_CELLS"
    )
    _, counts = read_counts(state.database, spec, [label])
    try:
        return text_document(
            spec.name,
            label,
            spec.text_randomizer,
            counts[0],
            confidence=options.confidence,
            candidates=candidates,
        )
    except InvalidInput as exc:
        raise refused(spec, exc) from None


def text_period(
    spec: MetricSpec, read: MetricPeriods, labels: list[str], options: EstimateOptions
) -> str:
    """The one period a text metric's estimate covers (the end period unless ``start`` is
    given and equal): its floor holds for one batch of independent reports, and one device
    reports in many periods, so a range is refused rather than pooled; so is a method."""
    if read.start is not None and len(labels) > 1:
        raise HTTPException(
            status_code=422,
            detail=f"metric {spec.name} is text: its estimate covers one period (its detection"
            " floor holds for one batch); give start equal to end, or end alone",
        )
    if options.method is not None and options.method != "unbiased":
        raise HTTPException(
            status_code=422,
            detail=f"metric {spec.name} is text: method has no meaning for it (its shares are"
            " the debiased sketch estimates)",
        )
    return labels[-1]


def text_breakdown(
    state: Collector,
    spec: MetricSpec,
    read: MetricPeriods,
    labels: list[str],
    by: list[str] | None,
    where: list[str] | None,
    options: EstimateOptions,
    candidates: list[str] | None,
) -> dict[str, Any]:
    """A text metric's heavy hitters per slice of its dimensions in one period
    (:func:`text_period`), each slice decoded from its summed cell counts (:mod:`.breakdown`).

    Work is bounded before it starts: every cell of the metric is read, each a whole sketch,
    so its cells × 1 period × its sketch's counts must be within the estimate cells limit
    (the spec keeps it within the default); decoding is per slice, each bounded by the sketch
    and the survivor cap."""
    label = text_period(spec, read, labels, options)
    dims, kept = parse_by(spec, by), parse_where(spec, where)
    cells, width = math.prod(len(v) + 1 for _, v in spec.dimensions), count_width(spec)
    limit = state.settings.max_estimate_cells
    if cells * width > limit:
        raise HTTPException(
            status_code=422,
            detail=f"the breakdown would read {cells:,} cells × 1 period × {width:,} sketch"
            f" counts, more than the limit of {limit:,} cells (DENIABLE_MAX_ESTIMATE_CELLS)",
        )
    return breakdown(
        state,
        spec,
        [label],
        dims,
        kept,
        confidence=options.confidence,
        method="unbiased",
        pooling="overlap-safe",
        candidates=candidates,
    )


def text_series(
    state: Collector, spec: MetricSpec, labels: list[str], options: EstimateOptions
) -> dict[str, Any]:
    """A text metric's discovery in each period, each with its own floor: its counts are a
    sketch, so the estimate's cells limit bounds the periods read."""
    if options.method is not None and options.method != "unbiased":
        raise HTTPException(
            status_code=422, detail=f"metric {spec.name} is text: method has no meaning for it"
        )
    limit = state.settings.max_estimate_cells
    check_cells(spec, len(labels), limit, "the series", "DENIABLE_MAX_ESTIMATE_CELLS")
    _, counts = read_counts(state.database, spec, labels)
    return text_series_document(
        spec.name, labels, spec.text_randomizer, counts, confidence=options.confidence
    )


@metric_read(
    router,
    "/v1/metrics/{name}/series",
    AnySeries | SliceSeries,
    operation_id="getSeries",
    summary="Estimate each period of a range on its own",
    viewer=True,
)
@cached_document("series")
def get_series(
    request: Request,
    read: MetricPeriodsQuery,
    options: EstimateOptionsQuery,
    q: SeriesQuantiles = None,
    by: By = None,
    where: Where = None,
) -> dict[str, Any]:
    """One estimate per period of start..end, oldest first; periods without reports have n = 0.

    ``simultaneous`` makes each period's intervals hold for all categories at once. A numeric
    metric's series has each period's mean instead. A histogram's series asked with ``q`` adds
    each period's quantile intervals (``quantiles``) and the metric's ``edges``. With ``by``
    or ``where``, a breakdown per period instead (:mod:`.sliceseries`).
    """
    state, spec, labels = range_labels(request, read)
    if by is not None or where is not None:
        if q:
            raise HTTPException(422, "q: a series by slice gives bucket shares, not quantiles")
        if spec.type == "numeric":
            numeric_method(spec, options)
        method = options.method or ("unbiased" if spec.type == "numeric" else DEFAULT_METHOD)
        document = slice_series(
            state, spec, labels, by, where, confidence=options.confidence, method=method
        )
        return about(state, spec, document)
    if spec.type == "text":
        return about(state, spec, text_series(state, spec, labels, options))
    limit = state.settings.max_series_cells
    check_cells(spec, len(labels), limit, "the series", "DENIABLE_MAX_SERIES_CELLS")
    qs = checked_quantiles(spec, q) if q else ()
    if qs:
        check_quantile_cells(spec, len(labels), len(qs), limit)
    if spec.type == "numeric":
        sums = numeric_sums(state, spec, labels, options)
        try:
            document = mean_series_document(spec, sums, confidence=options.confidence)
            return about(state, spec, document)
        except InvalidInput as exc:
            raise refused(spec, exc) from None
    periods = range_counts(state, spec, labels)
    chosen = options.for_shares()
    points = [(period.period, estimate_periods(spec, [period], **chosen)) for period in periods]
    if not qs:
        return about(state, spec, series_document(spec.name, points, **chosen))
    try:
        quantiles = quantile_series(
            spec.randomizer,
            spec.edges,  # type: ignore[arg-type]
            periods,
            qs,
            confidence=options.confidence,
        )
    except InvalidInput as exc:
        raise refused(spec, exc) from None
    rows = [(label, result, qi) for (label, result), qi in zip(points, quantiles, strict=True)]
    document = histogram_series_document(spec.name, rows, spec.edges, **chosen)  # type: ignore[arg-type]
    return about(state, spec, document)
