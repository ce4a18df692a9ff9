"""What the dashboard shows, read through the API's own query functions.

Every number on a page comes from the estimate and series documents the API answers
(:mod:`..queries`), built by :mod:`deniable.estimators.documents`; the margins of the
overview come from the planner (:mod:`deniable.estimators.advisor`). Nothing is estimated
here a second way.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from fastapi import Request

from deniable.client.errors import InvalidInput
from deniable.client.spec import MetricSpec, period_label, period_range
from deniable.estimators.choices import Method, Pooling, periods_back
from deniable.estimators.heavyhitters import floor

from ..context import collector
from ..numbers import NumberRule
from ..queries import estimate as estimates
from ..queries import series as serieses
from ..queries.limits import categories_of
from ..queries.privacy import (
    DEFAULT_RATIO,
    LIFETIME_RULE,
    REPORTS_RULE,
    SHUFFLE_BATCH_RULE,
    PrivacyQuery,
)
from ..queries.privacy import privacy as privacy_account
from ..queries.query import EstimateQuery
from ..queries.refusal import QueryRefused
from ..storage.arrivals import read_arrivals
from ..storage.queries import list_specs, read_period_reports
from .charts import value_text
from .kindviews import view_of

OVERVIEW_PERIODS = 14
"""Periods the overview's sparklines cover (fewer for a metric too large for the cells limit)."""
DEFAULT_TOP = 5
"""Categories the metric page's time series draws unless ``top`` says otherwise."""


@dataclasses.dataclass(frozen=True)
class MetricRow:
    """One metric of the overview."""

    spec: MetricSpec
    current: int
    previous: int
    trend: list[float | None]
    leading: str | None
    margin: float | None
    band: list[tuple[float, float] | None] = dataclasses.field(default_factory=list)
    change: dict[str, Any] | None = None
    unit: str | None = None
    """The metric's unit, kept beside a mean's margin."""
    margin_source: str = "planned"
    """Which margin ``margin`` is: "this data's" (half the widest of the current period's
    intervals, as the metric page's table and ``deniable estimate`` give it) or the
    "planned" one at the current period's reports (a text metric's floor)."""


def last_periods(spec: MetricSpec, request: Request, count: int) -> list[str]:
    """The labels of the metric's last ``count`` periods up to the current one, oldest first."""
    current = period_label(spec.period, collector(request).today())
    return period_range(spec.period, periods_back(spec.period, current, count), current)


def estimate(
    request: Request,
    spec: MetricSpec,
    start: str | None,
    end: str | None,
    *,
    method: Method | None = None,
    pooling: Pooling = "overlap-safe",
    confidence: float = 0.95,
    compare_to: str | None = None,
) -> dict[str, Any]:
    """The API's estimate document (simultaneous intervals, the API's default method unless
    ``method`` is given; with ``compare_to="previous"`` the period comparison of start..end
    with as many periods just before it); :class:`~..queries.refusal.QueryRefused` as the
    API's."""
    query = EstimateQuery(
        spec.name, start, end, confidence, method, pooling=pooling, compare_to=compare_to
    )
    return estimates.estimate(collector(request), query)


def series(
    request: Request,
    spec: MetricSpec,
    start: str | None,
    end: str | None,
    *,
    method: Method | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The API's series document (simultaneous intervals, the API's default method unless
    ``method`` is given); :class:`~..queries.refusal.QueryRefused` as the API's."""
    query = EstimateQuery(spec.name, start, end, confidence, method)
    return serieses.series(collector(request), query)


PRESETS = (("today", "Today"), ("7d", "7 days"), ("30d", "30 days"), ("month", "This month"))
"""The metric page's time-range presets: (name, label)."""


def preset_ranges(spec: MetricSpec, request: Request) -> list[tuple[str, str, str, str]]:
    """Each preset as (name, label, start, end) in the metric's period labels, ending at the
    current period: today, the last 7 and 30 days, and this calendar month."""
    today = collector(request).today()
    current = period_label(spec.period, today)
    firsts = {
        "today": today,
        "7d": today - dt.timedelta(days=6),
        "30d": today - dt.timedelta(days=29),
        "month": today.replace(day=1),
    }
    return [(key, label, period_label(spec.period, firsts[key]), current) for key, label in PRESETS]


STALE_AFTER = 3600.0
"""Seconds without a new report after which a metric that had traffic is marked stopped."""


def ago_text(seconds: float) -> str:
    """How long ago, in the largest whole unit: "12 s ago", "5 min ago", "3 h ago", "2 days ago"."""
    seconds = max(0.0, seconds)
    for size, unit in ((86400, " days"), (3600, " h"), (60, " min")):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count}{unit.removesuffix('s') if count == 1 else unit} ago"
    return f"{int(seconds)} s ago"


def arrivals(request: Request, names: list[str]) -> dict[str, dict[str, Any]]:
    """When each metric's last report arrived and its reports in the last hour, as the pages
    show them: ``last`` ("12 s ago", or "never"), ``last_hour`` (a count), ``stopped`` (it had
    reports, but none for :data:`STALE_AFTER` seconds) and ``title`` (the same in a sentence)."""
    state = collector(request)
    now = state.clock().timestamp()
    found = read_arrivals(state.database, names, now)
    shown = {}
    for name, arrival in found.items():
        if arrival.last_at is None:
            last, stopped = "never", False
            title = "No report has arrived since the collector began recording arrivals."
        else:
            last, stopped = ago_text(now - arrival.last_at), now - arrival.last_at > STALE_AFTER
            title = f"Last report received {last}; {arrival.last_hour:,} reports in the last hour."
            if stopped:
                title += " Reports stopped arriving: check the SDK, its ingest key and the URL."
        shown[name] = {
            "last": last,
            "last_hour": f"{arrival.last_hour:,}",
            "stopped": stopped,
            "title": title,
        }
    return shown


def leading_category(document: dict[str, Any]) -> str | None:
    """The category with the largest share over a series (reports-weighted), or None."""
    totals: dict[str, float] = {}
    for point in document["series"]:
        for row in point["estimates"]:
            if row["frequency"] is not None:
                totals[row["category"]] = totals.get(row["category"], 0.0) + point["n"] * max(
                    0.0, row["frequency"]
                )
    return max(totals, key=lambda c: totals[c]) if totals else None


def trend_of(document: dict[str, Any], category: str | None) -> list[float | None]:
    """Each period's share of ``category`` (or mean, for a numeric series), None without reports."""
    values: list[float | None] = []
    for point in document["series"]:
        if "mean" in point:
            values.append(point["mean"]["estimate"])
            continue
        row = next((r for r in point["estimates"] if r["category"] == category), None)
        values.append(None if row is None or row["frequency"] is None else row["frequency"])
    return values


def band_of(document: dict[str, Any], category: str | None) -> list[tuple[float, float] | None]:
    """Each period's interval of ``category`` (or of the mean), None without reports: the
    band the sparkline draws around its line."""
    band: list[tuple[float, float] | None] = []
    for point in document["series"]:
        if "mean" in point:
            mean = point["mean"]
            band.append(None if mean["estimate"] is None else (mean["ci_low"], mean["ci_high"]))
            continue
        row = next((r for r in point["estimates"] if r["category"] == category), None)
        if row is None or row["frequency"] is None:
            band.append(None)
        else:
            band.append((row["ci_low"], row["ci_high"]))
    return band


def change_now(
    request: Request, spec: MetricSpec, label: str, category: str | None
) -> dict[str, Any] | None:
    """The change of ``category`` (or the mean) from the period before ``label`` to ``label``:
    the period comparison's row (``compare_to=previous``, the API's own query, so its interval
    holds whatever devices report in both periods), or None when it cannot be made."""
    query = EstimateQuery(spec.name, label, label, compare_to="previous")
    try:
        document = estimates.estimate(collector(request), query)
    except QueryRefused:
        return None
    rows = document["slices"][0]["rows"]
    wanted = category if view_of(spec).shares else "mean"
    return next((row for row in rows if row["category"] == wanted), None)


def margin_now(spec: MetricSpec, n: int) -> float | None:
    """The planner's worst-case margin (95%, simultaneous for shares) at ``n`` reports: a share
    for categories, value units for a numeric metric; None without reports."""
    if n <= 0:
        return None
    try:
        return view_of(spec).planned_margin(spec, n)
    except InvalidInput:
        return None


def data_margin(document: dict[str, Any]) -> float | None:
    """This data's margin in the current period of a series ``document``: half the widest
    interval of its categories (the simultaneous margin) or of its mean, the figure the metric
    page's table and ``deniable estimate`` show for that period; None without reports."""
    points = document["series"]
    if not points or not points[-1]["n"]:
        return None
    last = points[-1]
    if "mean" in last:
        low, high = last["mean"]["ci_low"], last["mean"]["ci_high"]
        return None if low is None or high is None else (high - low) / 2
    widths = [
        (r["ci_high"] - r["ci_low"]) / 2
        for r in last["estimates"]
        if r["ci_low"] is not None and r["ci_high"] is not None
    ]
    return max(widths) if widths else None


PLAN_METRICS_READ = 50
"""Metrics the planner reads today's reports of (the first by name), to name those with most."""
PLAN_METRICS_SHOWN = 6
"""Metrics the planner names, those with the most reports today first."""


def planner_metrics(request: Request) -> list[dict[str, Any]]:
    """The registered metrics with the most reports today, each with the worst-case margin
    (95%) those reports give: "dark_mode at today's 3,021 reports: ±4.4 points" (a text
    metric's detection floor instead), for the planner's first lines."""
    state = collector(request)
    found = []
    for spec in list_specs(state.database, archived=False)[:PLAN_METRICS_READ]:
        label = period_label(spec.period, state.today())
        n = read_period_reports(state.database, spec.name, [label])[0]
        found.append((spec, n))
    found.sort(key=lambda item: (-item[1], item[0].name))
    lines = []
    for spec, n in found[:PLAN_METRICS_SHOWN]:
        view = view_of(spec)
        when = "today's" if spec.period == "day" else f"this {spec.period}'s"
        margin = None
        if n:
            margin = (
                floor(spec.text_randomizer, n).t95
                if view.pages is not None
                else margin_now(spec, n)
            )
        if margin is None:
            said = "no reports yet" if not n else "no margin"
        elif view.pages is not None:
            said = f"detection floor {margin * 100:.1f}%"
        elif view.shares:
            said = f"±{margin * 100:.1f} points"
        else:
            said = f"±{value_text(margin)} (its units)"
        lines.append({"name": spec.name, "n": n, "when": when, "said": said})
    return lines


def periods_within(spec: MetricSpec, request: Request, wanted: int, least: int = 1) -> int:
    """``wanted`` periods, or fewer (not below ``least``) so that a series of ``spec`` stays
    within the collector's cells limit (``max_series_cells``)."""
    fits = collector(request).settings.max_series_cells // categories_of(spec)
    return max(least, min(wanted, fits))


@dataclasses.dataclass(frozen=True)
class OverviewPage:
    """One page of the overview: its metrics' rows, its number, how many pages there are, and
    the position of its first metric among all of them (``total``)."""

    rows: list[MetricRow]
    number: int
    pages: int
    first: int
    total: int


def page_bounds(specs: list[MetricSpec], request: Request) -> list[tuple[int, int]]:
    """The overview's pages as (start, stop) slices of ``specs``: at most
    ``dashboard_page_metrics`` metrics and ``max_series_cells`` cells of trends per page (a
    metric larger than that alone on its page)."""
    settings = collector(request).settings
    bounds: list[tuple[int, int]] = []
    start, used = 0, 0
    for index, spec in enumerate(specs):
        per_period = view_of(spec).overview_cells(spec)
        cost = periods_within(spec, request, OVERVIEW_PERIODS, 2) * per_period
        full = index - start >= settings.dashboard_page_metrics
        if index > start and (full or used + cost > settings.max_series_cells):
            bounds.append((start, index))
            start, used = index, 0
        used += cost
    bounds.append((start, len(specs)))
    return bounds


PAGE_NAME = "page"
"""The overview's query parameter choosing its page."""


def overview(request: Request) -> OverviewPage:
    """One page (the query's ``page``, from 1) of the registered (not archived) metrics with
    their recent reports, trend and margin; :class:`InvalidInput` naming a bad page."""
    specs = list_specs(collector(request).database, archived=False)
    bounds = page_bounds(specs, request)
    text = request.query_params.get(PAGE_NAME)
    rule = NumberRule(PAGE_NAME, 1, len(bounds), whole=True)
    number = int(rule.parse(text)) if text else 1
    start, stop = bounds[number - 1]
    rows = []
    for spec in specs[start:stop]:
        count = periods_within(spec, request, OVERVIEW_PERIODS, 2)
        labels = last_periods(spec, request, count)
        view = view_of(spec)
        if view.pages is not None:
            rows.append(view.pages.overview_row(request, spec, labels))
            continue
        document = series(request, spec, labels[0], labels[-1])
        points = document["series"]
        leading = view.lead  # a boolean's false share is the mirror image of its true
        if leading is None and view.shares:
            leading = leading_category(document)
        current = int(points[-1]["n"]) if points else 0
        previous = int(points[-2]["n"]) if len(points) > 1 else 0
        rows.append(
            MetricRow(
                spec=spec,
                current=current,
                previous=previous,
                trend=trend_of(document, leading),
                leading=leading,
                margin=data_margin(document),
                unit=document.get("unit"),
                margin_source="this data's",
                band=band_of(document, leading),
                change=change_now(request, spec, labels[-1], leading),
            )
        )
    return OverviewPage(rows, number, len(bounds), start + 1, len(specs))


def text_row(request: Request, spec: MetricSpec, labels: list[str]) -> MetricRow:
    """A text metric's overview row: its reports per period (no trend: each period's discovery
    is a list of strings, on the metric's page) and, as its margin, today's detection floor."""
    reports = read_period_reports(collector(request).database, spec.name, labels)
    current = reports[-1] if reports else 0
    previous = reports[-2] if len(reports) > 1 else 0
    floor_now = floor(spec.text_randomizer, current).t95 if current else None
    return MetricRow(
        spec=spec, current=current, previous=previous, trend=[], leading=None, margin=floor_now
    )


def shown_categories(spec: MetricSpec, document: dict[str, Any], top: int) -> list[str]:
    """The categories a metric page draws over time: a boolean's ``true`` share only (its
    ``false`` share is the mirror image), a histogram's buckets in bucket order (its shape is
    the point: every bucket up to :data:`.kindviews.MAX_TOP`, else its ``top`` largest), or a categorical
    metric's ``top`` largest (each kind's :attr:`.kindviews.KindView.shown`)."""
    return view_of(spec).shown(spec, document, top)


def privacy(request: Request, values: dict[str, str]) -> dict[str, Any]:
    """The API's privacy account for the form's SDK settings (``GET /v1/privacy``'s own
    query function, so the page shows its numbers); :class:`InvalidInput` naming a bad value,
    :class:`~..queries.refusal.QueryRefused` as the API's."""
    reports = REPORTS_RULE.parse(values["max_reports_per_period"])
    text = values["lifetime_epsilon"]
    lifetime = LIFETIME_RULE.parse(text) if text else None
    if values["memoize"] not in ("true", "false"):
        raise InvalidInput("memoization is true (every metric) or false")
    if values["instantaneous_ratio"] not in (DEFAULT_RATIO, "none"):
        raise InvalidInput(f"the fresh layer of memoized reports is {DEFAULT_RATIO} or none")
    batch = values.get("shuffle_batch", "")
    query = PrivacyQuery(
        int(reports),
        values["memoize"],
        lifetime,
        values["instantaneous_ratio"],
        shuffle_batch=int(SHUFFLE_BATCH_RULE.parse(batch)) if batch else None,
    )
    document = privacy_account(collector(request), query)
    return dataclasses.asdict(document)
