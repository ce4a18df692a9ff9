"""The estimate and series routes: thin views that fill an
:class:`~..queries.query.EstimateQuery` from the request and answer its document.

What each document holds and every refusal (answered 4xx by :func:`.common.query_refused`)
are the query layer's: :func:`..queries.estimate.estimate` and
:func:`..queries.series.series`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, cast, get_args
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from deniable.client.errors import InvalidInput
from deniable.estimators import AnyRangeEstimate, AnySeries, Method, Pooling
from deniable.estimators.heavyhitters import MAX_CANDIDATES
from deniable.service.bearer import any_match, bearer_token

from ..auth import accepted_tokens
from ..context import collector
from ..numbers import query_number
from ..queries.breakdown import BreakdownEstimate
from ..queries.changes import PeriodComparison
from ..queries.estimate import estimate, estimate_json
from ..queries.query import CONFIDENCE_RULE, QUANTILE_RULE, EstimateQuery, listed
from ..queries.series import series
from ..queries.slices import SliceSeries
from .common import DocumentResponse, MetricPeriods, MetricPeriodsQuery, metric_read

PERIOD_MAX_CHARS = 32
"""The longest ``start`` or ``end`` the estimate routes take (:data:`.common.PeriodQuery`)."""

router = APIRouter(tags=["estimates"])

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


EstimateOptionsQuery = Annotated[EstimateOptions, Depends()]


def estimate_query(
    read: MetricPeriods,
    options: EstimateOptions,
    *,
    pooling: Pooling = "overlap-safe",
    quantiles: list[float] | None = None,
    candidates: list[str] | None = None,
    by: list[str] | None = None,
    where: list[str] | None = None,
    compare: str | None = None,
    compare_to: str | None = None,
) -> EstimateQuery:
    """The query both estimate routes fill: ``read``'s metric and periods estimated with
    ``options``, the repeatable parameters made query fields."""
    return EstimateQuery(
        read.name,
        read.start,
        read.end,
        options.confidence,
        options.method,
        options.simultaneous,
        pooling,
        listed(quantiles),
        listed(candidates),
        listed(by),
        listed(where),
        compare,
        compare_to,
    )


"""The ``confidence``, ``method`` and ``simultaneous`` query parameters, as one object."""


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


@metric_read(
    router,
    "/v1/metrics/{name}/estimate",
    AnyRangeEstimate | BreakdownEstimate | PeriodComparison,
    operation_id="getEstimate",
    summary="Estimate a metric over a range of periods",
    viewer=True,
    description="The population estimate over the periods start..end (shares, a mean, quantiles"
    " or a text metric's heavy hitters), per slice with by/where, or its change with compare_to.",
)
def get_estimate(
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
) -> DocumentResponse:
    """The population estimate over the periods start..end (shares, a mean, quantiles or a
    text metric's heavy hitters), per slice with by/where, or its change with compare_to."""
    query = estimate_query(
        read,
        options,
        pooling=pooling,
        quantiles=q,
        candidates=candidates,
        by=by,
        where=where,
        compare=compare,
        compare_to=compare_to,
    )
    return DocumentResponse(estimate(collector(request), query))


THIN_TAKES = frozenset({"start", "end", "confidence", "method", "simultaneous", "pooling"})
"""The query parameters the thin estimate path reads; a request with any other parameter of
:func:`get_estimate` (q, candidates, by, where, compare, compare_to) is left to FastAPI."""
THIN_LEAVES = frozenset({"q", "candidates", "by", "where", "compare", "compare_to"})
BOOLEANS = {"true": True, "false": False, "1": True, "0": False}
"""The ``simultaneous`` values the thin path reads (pydantic reads these the same way; it
reads more, which the thin path leaves to it)."""
METHODS = frozenset(get_args(Method))
POOLINGS = frozenset(get_args(Pooling))


def thin_estimate_query(request: Request) -> EstimateQuery | None:
    """The query of a plain ``GET /v1/metrics/{name}/estimate`` (:mod:`..fastpaths`), read
    without FastAPI: its token accepted and every parameter well formed as
    :func:`get_estimate` would take it. None for anything else (a token refused, a value
    FastAPI would refuse or read in a way this does not, a repeated parameter, a parameter
    of a breakdown, a comparison, quantiles or candidates), which FastAPI then answers."""
    settings = collector(request).settings
    accepted = accepted_tokens(settings, "viewer")
    if accepted and not any_match(bearer_token(request), accepted):
        return None
    given: dict[str, str] = {}
    for key, value in parse_qsl(request.scope["query_string"].decode("latin-1"), True):
        if key in THIN_LEAVES or key in given:
            return None
        if key in THIN_TAKES:
            given[key] = value
    start, end = given.get("start"), given.get("end")
    if any(text is not None and len(text) > PERIOD_MAX_CHARS for text in (start, end)):
        return None
    options = EstimateOptions()
    if "confidence" in given:
        try:
            options.confidence = CONFIDENCE_RULE.parse(given["confidence"])
        except InvalidInput:
            return None
    if "method" in given:
        if given["method"] not in METHODS:
            return None
        options.method = cast(Method, given["method"])
    if "simultaneous" in given:
        simultaneous = BOOLEANS.get(given["simultaneous"])
        if simultaneous is None:
            return None
        options.simultaneous = simultaneous
    pooling = given.get("pooling", "overlap-safe")
    if pooling not in POOLINGS:
        return None
    read = MetricPeriods(request.path_params["name"], start, end)
    return estimate_query(read, options, pooling=cast(Pooling, pooling))


async def thin_estimate(request: Request, query: EstimateQuery) -> Response:
    """:func:`get_estimate`'s answer to ``query`` (read by :func:`thin_estimate_query`): the
    same bytes and headers, a read-cache hit's bytes sent as kept."""
    state = collector(request)
    body = await run_in_threadpool(estimate_json, state, query)
    return Response(body, media_type=DocumentResponse.media_type)


SERIES_DESCRIPTION = (
    "One estimate per period of start..end, oldest first; periods without reports have n = 0."
    "\n\n``simultaneous`` makes each period's intervals hold for all categories at once. A"
    " numeric\nmetric's series has each period's mean instead. A histogram's series asked with"
    " ``q`` adds\neach period's quantile intervals (``quantiles``) and the metric's ``edges``."
    " With ``by``\nor ``where``, a breakdown per period instead (:mod:`.sliceseries`)."
)
"""The series route's description in the OpenAPI document, as published (its last words name
the module the series by slice was in then)."""


@metric_read(
    router,
    "/v1/metrics/{name}/series",
    AnySeries | SliceSeries,
    operation_id="getSeries",
    summary="Estimate each period of a range on its own",
    viewer=True,
    description=SERIES_DESCRIPTION,
)
def get_series(
    request: Request,
    read: MetricPeriodsQuery,
    options: EstimateOptionsQuery,
    q: SeriesQuantiles = None,
    by: By = None,
    where: Where = None,
) -> DocumentResponse:
    """One estimate per period of start..end (:func:`..queries.series.series`), or with ``by``
    or ``where`` a breakdown per period (:mod:`..queries.slices`), written by orjson: FastAPI
    validating a 90-period series against its model took more time than making it."""
    query = estimate_query(read, options, quantiles=q, by=by, where=where)
    return DocumentResponse(series(collector(request), query))
