"""``GET /v1/estimates/metrics``: the current estimates in Prometheus text, for Grafana.

Each registered (not archived) metric's estimate as ``GET /v1/metrics/{name}/estimate``
answers it with its defaults (the last 7 periods ending at the current one, the default
method, simultaneous 95% intervals, pooled overlap-safe; a histogram's quantiles at 0.5, 0.9
and 0.99), answered by that route's own query function
(:func:`.queries.estimate.estimate`), so a scrape shows exactly the API's numbers. It needs the viewer token (or an admin token): an estimate is not the operator's
``/metrics``, which stays open and holds no estimate.

With ``?by=DIMENSION`` a scrape exports instead each metric that declares that dimension per
slice (``deniable_estimate_slice_*``, labelled ``dimension`` and ``slice``), as
``GET /v1/metrics/{name}/estimate?by=DIMENSION`` answers it: a separate scrape job, since a
slice's interval is wider (its level is shared among the slices) and the slices multiply the
cells.

A scrape is bounded like an overview page of the dashboard: at most
``dashboard_page_metrics`` metrics and ``max_series_cells`` cells (periods × categories, ×
slices with ``by``) per page, ``?page=N`` for the others; ``deniable_estimate_pages`` says how
many there are. It waits its turn at the read gate (:mod:`.readgate`) like every estimate.
Names are in docs/operations.md ("Estimates in Grafana"); ``deploy/grafana-dashboard.json``
queries them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from deniable.client.calendar import next_period, period_start
from deniable.client.kinds import TextSpec
from deniable.client.spec import DIMENSION_NAME, MetricSpec
from deniable.estimators import DEFAULT_PERIODS
from deniable.estimators.choices import periods_back
from deniable.estimators.documents import window_counts_devices

from .auth import VIEWER
from .context import Collector, collector
from .numbers import InvalidNumber, NumberRule
from .queries.breakdown import slice_count
from .queries.estimate import estimate
from .queries.limits import categories_of
from .queries.query import EstimateQuery
from .queries.refusal import QueryRefused, refuse
from .schemas import problem_responses
from .storage.queries import list_specs, read_period_reports

router = APIRouter(tags=["estimates"])

PATH = "/v1/estimates/metrics"
"""Where the estimates are scraped."""

PAGE_PARAMETER = "page"
"""The query parameter choosing a page of metrics (from 1)."""

PageQuery = Annotated[
    str | None,
    Query(
        max_length=32,
        description="Which page of metrics, from 1 (deniable_estimate_pages says how many)",
    ),
]
"""The ``page`` query parameter, read by a whole-number rule once the pages are known."""

BY_PARAMETER = "by"
"""The query parameter choosing a dimension to export per slice."""

ByQuery = Annotated[
    str | None,
    Query(
        max_length=32,
        description="A dimension: export each metric that declares it per slice instead"
        " (deniable_estimate_slice_*)",
    ),
]
"""The ``by`` query parameter: a dimension's name, checked against the dimension name rule."""

FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "deniable_estimate_pages": ("Pages of metrics this endpoint exports (?page=1..N)", ()),
    "deniable_estimate_info": (
        "1 per metric, its settings as labels (they change only with the metric)",
        ("metric", "type", "mechanism", "epsilon", "period", "confidence"),
    ),
    "deniable_estimate_start_timestamp_seconds": (
        "Start of the estimate's first period (Unix seconds, UTC)",
        ("metric",),
    ),
    "deniable_estimate_end_timestamp_seconds": (
        "End of the estimate's last period, exclusive (Unix seconds, UTC)",
        ("metric",),
    ),
    "deniable_estimate_reports": ("Reports in the estimate's periods", ("metric",)),
    "deniable_estimate_share": (
        "Estimated share of a category (absent without reports)",
        ("metric", "category"),
    ),
    "deniable_estimate_share_low": (
        "Low end of the share's simultaneous interval",
        ("metric", "category"),
    ),
    "deniable_estimate_share_high": (
        "High end of the share's simultaneous interval",
        ("metric", "category"),
    ),
    "deniable_estimate_margin": (
        "Median margin of the shares (half the interval width; absent without reports)",
        ("metric",),
    ),
    "deniable_estimate_mean": ("Estimated mean, value units (absent without reports)", ("metric",)),
    "deniable_estimate_mean_low": ("Low end of the mean's interval", ("metric",)),
    "deniable_estimate_mean_high": ("High end of the mean's interval", ("metric",)),
    "deniable_estimate_quantile_low": (
        "Low end of a histogram quantile's interval (absent: may lie below the first edge)",
        ("metric", "quantile"),
    ),
    "deniable_estimate_quantile_high": (
        "High end of a histogram quantile's interval (absent: may lie above the last edge)",
        ("metric", "quantile"),
    ),
    "deniable_estimate_floor": (
        "A text metric's detection floor T95: strings with at least this share are found",
        ("metric",),
    ),
    "deniable_estimate_unavailable": (
        "1 for a metric whose estimate the collector refused (e.g. past a cells limit)",
        ("metric",),
    ),
    "deniable_estimate_active_devices": (
        "An event metric's active devices in its last closed window (the period before the"
        " current one): one report per active device; late reports still add to it",
        ("metric", "period"),
    ),
}
"""Every metric family exported: its help and labels (names end up in Grafana queries)."""

SOMETIMES = frozenset({"deniable_estimate_active_devices"})
"""Families exported only when a metric gives them a sample (event metrics), so that a scrape
without such a metric is what it was before they existed."""


SLICE_LABELS = ("dimension", "slice")
"""The labels a per-slice sample adds to its family's: the dimension and the slice's value."""

SLICE_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "deniable_estimate_slice_reports": (
        "Reports of a slice in the estimate's periods",
        ("metric",),
    ),
    "deniable_estimate_slice_share": (
        "Estimated share of a category in a slice (absent without reports)",
        ("metric", "category"),
    ),
    "deniable_estimate_slice_share_low": (
        "Low end of the slice share's simultaneous interval (at the slice level)",
        ("metric", "category"),
    ),
    "deniable_estimate_slice_share_high": (
        "High end of the slice share's simultaneous interval (at the slice level)",
        ("metric", "category"),
    ),
    "deniable_estimate_slice_mean": ("Estimated mean of a slice, value units", ("metric",)),
    "deniable_estimate_slice_mean_low": ("Low end of the slice mean's interval", ("metric",)),
    "deniable_estimate_slice_mean_high": ("High end of the slice mean's interval", ("metric",)),
    "deniable_estimate_slice_floor": (
        "A text metric's detection floor T95 in a slice",
        ("metric",),
    ),
    "deniable_estimate_slice_suppressed": (
        "1 for a slice with too few reports to estimate (its estimate is withheld)",
        ("metric",),
    ),
    "deniable_estimate_slice_confidence": (
        "The level of each slice's intervals (the 95% shared among the slices)",
        ("metric",),
    ),
}
"""The families of a ``?by=`` scrape: their help and labels before :data:`SLICE_LABELS`."""

SLICE_PAGE_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "deniable_estimate_pages": FAMILIES["deniable_estimate_pages"],
    "deniable_estimate_unavailable": FAMILIES["deniable_estimate_unavailable"],
}
"""The families a ``?by=`` scrape shares with the default one (no slice labels)."""


def page_bounds(
    specs: list[MetricSpec],
    page_metrics: int,
    cells: int,
    slices: Callable[[MetricSpec], int] | None = None,
) -> list[tuple[int, int]]:
    """Pages of ``specs`` as (start, stop) slices: at most ``page_metrics`` metrics and
    ``cells`` cells (the default range's periods × categories, × ``slices(spec)`` if given)
    each; a metric larger than that is alone on its page."""
    bounds: list[tuple[int, int]] = []
    start, used = 0, 0
    for index, spec in enumerate(specs):
        cost = (1 if isinstance(spec, TextSpec) else DEFAULT_PERIODS) * categories_of(spec)
        cost *= slices(spec) if slices is not None else 1
        full = index - start >= page_metrics
        if index > start and (full or used + cost > cells):
            bounds.append((start, index))
            start, used = index, 0
        used += cost
    bounds.append((start, len(specs)))
    return bounds


def period_bounds(kind: str, first: str, last: str) -> tuple[float, float]:
    """The Unix seconds (UTC) where period ``first`` starts and period ``last`` ends: the
    estimate's window as values, so the info series' labels stay the same day after day."""
    start = dt.datetime.combine(period_start(kind, first), dt.time(), dt.UTC)
    end = dt.datetime.combine(period_start(kind, next_period(kind, last)), dt.time(), dt.UTC)
    return start.timestamp(), end.timestamp()


class Families:
    """The gauge families of one scrape, filled metric by metric."""

    def __init__(self) -> None:
        self.gauges = {
            name: GaugeMetricFamily(name, text, labels=list(labels))
            for name, (text, labels) in FAMILIES.items()
        }

    def add(self, name: str, labels: Iterable[str], value: float | None) -> None:
        """One sample of family ``name``; None (no estimate) adds nothing."""
        if value is not None:
            self.gauges[name].add_metric(list(labels), float(value))

    def add_estimate(self, spec: MetricSpec, document: dict[str, Any]) -> None:
        """The samples of one metric's estimate document."""
        name = spec.name
        self.add(
            "deniable_estimate_info",
            [
                name,
                spec.type,
                spec.mechanism,
                f"{spec.epsilon:g}",
                spec.period,
                f"{document['confidence']:g}",
            ],
            1,
        )
        if document["start"] and document["end"]:
            start, end = period_bounds(spec.period, document["start"], document["end"])
            self.add("deniable_estimate_start_timestamp_seconds", [name], start)
            self.add("deniable_estimate_end_timestamp_seconds", [name], end)
        self.add("deniable_estimate_reports", [name], document["n"])
        if "mean" in document:
            mean = document["mean"]
            self.add("deniable_estimate_mean", [name], mean["estimate"])
            self.add("deniable_estimate_mean_low", [name], mean["ci_low"])
            self.add("deniable_estimate_mean_high", [name], mean["ci_high"])
            return
        if "strings" in document:
            self.add("deniable_estimate_floor", [name], document["floor"]["t95"])
            for row in document["strings"]:
                labels = [name, row["value"]]
                self.add("deniable_estimate_share", labels, row["share"])
                self.add("deniable_estimate_share_low", labels, row["ci_low"])
                self.add("deniable_estimate_share_high", labels, row["ci_high"])
            return
        self.add("deniable_estimate_margin", [name], document["margin"])
        for row in document["estimates"]:
            labels = [name, row["category"]]
            self.add("deniable_estimate_share", labels, row["frequency"])
            self.add("deniable_estimate_share_low", labels, row["ci_low"])
            self.add("deniable_estimate_share_high", labels, row["ci_high"])
        for entry in document.get("quantiles", []):
            labels = [name, f"{entry['q']:g}"]
            self.add("deniable_estimate_quantile_low", labels, entry["low"])
            self.add("deniable_estimate_quantile_high", labels, entry["high"])

    def collect(self) -> Iterable[Metric]:
        """The families, for a registry (prometheus_client's collector protocol); one of
        :data:`SOMETIMES` only with samples."""
        return [
            family
            for name, family in self.gauges.items()
            if family.samples or name not in SOMETIMES
        ]


def export_page(state: Collector, page: str | None) -> bytes:
    """The text exposition of one page of metrics' current estimates; InvalidNumber naming a
    bad page."""
    settings = state.settings
    specs = list_specs(state.database, archived=False)
    bounds = page_bounds(specs, settings.dashboard_page_metrics, settings.max_series_cells)
    families = Families()
    for spec, document in _page_estimates(state, specs, bounds, page, families, None):
        families.add_estimate(spec, document)
        if window_counts_devices(spec) and document["end"]:
            closed = periods_back(spec.period, document["end"], 2)
            active = read_period_reports(state.database, spec.name, [closed])[0]
            families.add("deniable_estimate_active_devices", [spec.name, closed], active)
    return _exposition(families)


def _page_estimates(
    state: Collector,
    specs: list[MetricSpec],
    bounds: list[tuple[int, int]],
    page: str | None,
    families: Families | SliceFamilies,
    by: tuple[str, ...] | None,
) -> Iterator[tuple[MetricSpec, dict[str, Any]]]:
    """Each metric of the chosen ``page`` of ``specs`` with its estimate (broken down ``by``
    if given), after adding the page count to ``families``; a refused metric is only counted
    there as unavailable. InvalidNumber names a bad page."""
    rule = NumberRule(PAGE_PARAMETER, 1, len(bounds), whole=True)
    number = int(rule.parse(page)) if page else 1
    start, stop = bounds[number - 1]
    families.add("deniable_estimate_pages", [], len(bounds))
    for spec in specs[start:stop]:
        try:
            document = estimate(state, EstimateQuery(spec.name, by=by))
        except QueryRefused:
            families.add("deniable_estimate_unavailable", [spec.name], 1)
            continue
        yield spec, document


def _exposition(families: Families | SliceFamilies) -> bytes:
    """The text exposition of one scrape's filled ``families``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(families)
    return generate_latest(registry)


class SliceFamilies:
    """The gauge families of one ``?by=`` scrape, filled slice by slice."""

    def __init__(self) -> None:
        self.gauges = {
            name: GaugeMetricFamily(name, text, labels=list(labels))
            for name, (text, labels) in SLICE_PAGE_FAMILIES.items()
        } | {
            name: GaugeMetricFamily(name, text, labels=[*labels, *SLICE_LABELS])
            for name, (text, labels) in SLICE_FAMILIES.items()
        }

    def add(self, name: str, labels: Iterable[str], value: float | None) -> None:
        """One sample of family ``name``; None (no estimate) adds nothing."""
        if value is not None:
            self.gauges[name].add_metric(list(labels), float(value))

    def add_breakdown(self, spec: MetricSpec, dimension: str, document: dict[str, Any]) -> None:
        """The samples of one metric's breakdown by ``dimension``, slice by slice."""
        for entry in document["slices"]:
            where = [dimension, entry["values"][dimension]]
            found = entry["estimate"]
            if entry["suppressed"] or found is None:
                self.add("deniable_estimate_slice_suppressed", [spec.name, *where], 1)
                continue
            self.add_slice(spec.name, where, found)

    def add_slice(self, name: str, where: list[str], found: dict[str, Any]) -> None:
        """The samples of one slice's estimate document ``found``."""
        self.add("deniable_estimate_slice_reports", [name, *where], found["n"])
        self.add("deniable_estimate_slice_confidence", [name, *where], found.get("confidence"))
        if "mean" in found:
            mean = found["mean"]
            self.add("deniable_estimate_slice_mean", [name, *where], mean["estimate"])
            self.add("deniable_estimate_slice_mean_low", [name, *where], mean["ci_low"])
            self.add("deniable_estimate_slice_mean_high", [name, *where], mean["ci_high"])
            return
        if "floor" in found:
            self.add("deniable_estimate_slice_floor", [name, *where], found["floor"]["t95"])
        rows = [
            (row["category"], row["frequency"], row["ci_low"], row["ci_high"])
            for row in found.get("estimates", [])
        ] + [
            (row["value"], row["share"], row["ci_low"], row["ci_high"])
            for row in found.get("strings", [])
        ]
        for category, share, low, high in rows:
            labels = [name, category, *where]
            self.add("deniable_estimate_slice_share", labels, share)
            self.add("deniable_estimate_slice_share_low", labels, low)
            self.add("deniable_estimate_slice_share_high", labels, high)

    def collect(self) -> Iterable[Metric]:
        """The families, for a registry (prometheus_client's collector protocol)."""
        return list(self.gauges.values())


def export_slices(state: Collector, page: str | None, dimension: str) -> bytes:
    """The text exposition of one page of the metrics that declare ``dimension``, each
    estimated per slice of it; a refusal naming a malformed dimension, InvalidNumber naming a
    bad page."""
    if not DIMENSION_NAME.fullmatch(dimension):
        raise refuse(
            f"{BY_PARAMETER} must be a dimension's name (lower-case letters, digits and _,"
            " from a letter, at most 32)"
        )
    settings = state.settings
    specs = [
        spec
        for spec in list_specs(state.database, archived=False)
        if dimension in dict(spec.dimensions)
    ]
    bounds = page_bounds(
        specs,
        settings.dashboard_page_metrics,
        settings.max_series_cells,
        lambda spec: slice_count(spec, [dimension]),
    )
    families = SliceFamilies()
    for spec, document in _page_estimates(state, specs, bounds, page, families, (dimension,)):
        families.add_breakdown(spec, dimension, document)
    return _exposition(families)


@router.get(
    PATH,
    dependencies=[VIEWER],
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}},
        **problem_responses(401, 422),
    },
    operation_id="scrapeEstimates",
    summary="Current estimates in Prometheus text",
)
def estimates_metrics(request: Request, page: PageQuery = None, by: ByQuery = None) -> Response:
    """Every metric's current estimate (the estimate route's defaults) in the Prometheus text
    exposition format, for a Prometheus server to scrape with the viewer token and Grafana to
    chart; ``page`` (from 1) chooses among pages of at most the dashboard overview's size;
    ``by`` a dimension to export per slice instead."""
    try:
        if by is None:
            body = export_page(collector(request), page)
        else:
            body = export_slices(collector(request), page, by)
    except InvalidNumber as exc:
        raise refuse(str(exc)) from None
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})
