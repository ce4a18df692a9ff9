"""The dashboard's HTML pages, rendered from autoescaping templates (:mod:`.templating`).

Metric names, categories and bucket labels come from whoever registered the metric, so no page
writes markup around them by hand: this module gathers each page's values and the templates in
``templates/`` lay them out, the engine escaping every one. Pages hold no script and no inline
style (the Content-Security-Policy forbids both): one stylesheet, SVG charts drawn on the
server (:mod:`.charts`), and plain GET forms for the pickers and the planner.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup

from deniable.client.spec import MetricSpec
from deniable.estimators import quantile_bounds
from deniable.estimators.advisor import V_STAR_MEANING
from deniable.estimators.documents import (
    clipped_mark,
    counted_n,
    counted_unit,
    events_text,
    window_n,
)
from deniable.estimators.privacy import PRIVACY_DOC
from deniable.estimators.shufflingaccount import batches_text, devices_text

from ..queries.privacy import DEFAULT_RATIO
from . import glossary
from .charts import (
    NARROW,
    Bar,
    Line,
    Point,
    bar_chart,
    small_multiples,
    sparkline,
    time_chart,
    value_text,
)
from .data import PAGE_NAME, MetricRow, OverviewPage
from .kindviews import view_of
from .templating import render

METHODS = ("unbiased", "consistent", "mle")
POOLINGS = ("overlap-safe", "independent")


def gaps_note(series: Sequence[dict[str, Any]], period: str, note_id: str) -> dict[str, str] | None:
    """The line saying which periods of a series had no reports (the chart and the table
    leave them out), as the template's ``gaps_note`` takes it; None when every period had
    some."""
    empty = [p["period"] for p in series if not p["n"]]
    if not empty:
        return None
    total = len(series)
    if len(empty) == total:
        text = f"No reports in this range ({total} {period}{'s' if total != 1 else ''}) yet."
    else:
        named = f" ({', '.join(empty)})" if len(empty) <= 3 else ""
        text = (
            f"No reports on {len(empty)} of {total} {period}s{named}: the chart and the table"
            " leave them out."
        )
    return {"id": note_id, "text": text}


def warning_parts(text: str) -> dict[str, Any]:
    """A privacy warning for the dashboard's reader: its pointer to the documentation (which
    the dashboard does not serve) is dropped for a link to the Plan page (``plan_link``),
    where a lower ε is weighed against the margin of error it gives."""
    pointer = f" ({PRIVACY_DOC})"
    if not text.endswith(pointer):
        return {"text": text, "plan_link": False}
    return {"text": text.removesuffix(pointer), "plan_link": True}


def metric_path(name: str) -> str:
    """The path of a metric's page (the name percent-encoded as one path segment)."""
    return f"/dashboard/metrics/{quote(name, safe='')}"


def your_metrics(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Both planners' first lines (:func:`.data.planner_metrics`), each with its metric's path."""
    return [{**line, "path": metric_path(line["name"])} for line in lines]


def pct(value: float | None) -> str:
    """A share as a percentage with two decimals, or an em dash."""
    return "—" if value is None else f"{value * 100:.2f}%"


POINT = 0.01
"""One percentage point: an interval at least this wide on each side shows one decimal."""


def interval_pcts(value: float | None, low: float, high: float) -> list[str]:
    """A share and its interval as percentages with as many decimals as the interval warrants:
    one where it is ±1 point or wider (a second decimal would be noise), two where narrower."""
    places = 1 if (high - low) / 2 >= POINT else 2
    return ["—" if v is None else f"{v * 100:.{places}f}%" for v in (value, low, high)]


def _marked(shown: list[str], row: dict[str, Any]) -> list[str]:
    """The estimate's cell with its clipped mark (if any), then the interval's two."""
    return [shown[0] + clipped_mark(row), *shown[1:]]


def sign_in_page(message: str | None = None) -> Markup:
    """The sign-in form (the token goes in a POST body, never a URL)."""
    return render("sign_in.html", message=message, signed_in=False)


def error_page(status: int, detail: str) -> Markup:
    """A page saying what went wrong (a 404 metric, a 422 range)."""
    return render("error.html", status=status, detail=detail)


def _margin_text(row: MetricRow) -> dict[str, str]:
    """The overview's margin cell: ± points for shares, ± value units (and the unit) for a
    mean, a text metric's detection floor; and which figure it is, said in the cell."""
    if row.margin is None:
        return {"text": "—", "source": "", "title": "no reports in the current period"}
    text = view_of(row.spec).margin_text(row.margin)
    if row.unit and not view_of(row.spec).shares:
        text += f" {row.unit}"
    if row.margin_source == "this data's":
        title = (
            "this data's margin: half the widest 95% interval of the current period, as on"
            " the metric page's Over time table and in deniable estimate for that period"
        )
    else:
        title = (
            "planned at the current period's reports, before the data: the metric's page"
            " gives this run's own floor, a little higher"
        )
    return {"text": text, "source": row.margin_source, "title": title}


CHANGE_MARKS = ("↓", "↑")
"""The overview's marks of a detectable drop and rise: arrows, never the ▼/▲ that mark an
estimate clipped at 0 or 100% in a metric's tables (``clipped_marks``)."""


def change_cell(row: MetricRow) -> dict[str, Any] | None:
    """The overview's change cell: ↑/↓ and the difference only when the period comparison
    (current period minus the one before) says ``higher`` or ``lower`` (``detectable``);
    otherwise its verdict, in muted text, with no number to read a trend into. None: no
    comparison (an em dash)."""
    change = row.change
    if change is None or change["difference"] is None:
        return None
    numeric = not view_of(row.spec).shares

    def amount(value: float) -> str:
        return f"{value:+,.4g}" if numeric else f"{value * 100:+.1f} pts"

    what = "mean" if numeric else f"share of {change['category']}"
    verdict = change["verdict"]
    return {
        "detectable": verdict in ("higher", "lower"),
        "verdict": verdict,
        "mark": CHANGE_MARKS[verdict == "higher"],
        "amount": amount(change["difference"]),
        "title": (
            f"{what}, current period minus the one before: {amount(change['difference'])},"
            f" interval [{amount(change['ci_low'])}, {amount(change['ci_high'])}]: {verdict}"
        ),
    }


def overview_page(
    page: OverviewPage, periods: int, arrivals: dict[str, dict[str, Any]] | None = None
) -> Markup:
    """One page of the metrics with their recent reports, a sparkline of each one's leading
    estimate and its margin, and (``arrivals``, :func:`.data.arrivals`) when each one's last
    report arrived."""
    arrivals = arrivals or {}
    rows = []
    for row in page.rows:
        spec = row.spec
        what = {"numeric": "mean", "text": "strings found: on its page"}.get(
            spec.type, f"share of {row.leading or '—'}"
        )
        label = f"{spec.name}: {what}, last {len(row.trend)} periods"
        rows.append(
            {
                "name": spec.name,
                "path": metric_path(spec.name),
                "what": what,
                "type": spec.type,
                "epsilon": f"{spec.epsilon:g}",
                "mechanism": spec.mechanism,
                "current": window_n(spec, row.current),
                "previous": window_n(spec, row.previous),
                "sparkline": sparkline(row.trend, label=label, band=row.band),
                "change": change_cell(row),
                "margin": _margin_text(row),
                "arrival": arrivals.get(spec.name),
            }
        )
    headers = (
        "Metric",
        "Type",
        "ε",
        "Mechanism",
        "Reports now",
        "Last period",
        f"Trend ({periods} periods)",
        "Change",
        "Margin now (95%)",
    )
    return render(
        "overview.html",
        page=page,
        rows=rows,
        headers=headers,
        last=page.first + len(page.rows) - 1,
        page_name=PAGE_NAME,
        current="overview",
    )


def clipped_count(rows: Iterable[dict[str, Any]]) -> int:
    """How many rows carry a clipped mark (the template's ``clipped_note`` explains them)."""
    return sum(1 for row in rows if row.get("clipped"))


POOLING_HELP = "/dashboard/help/pooling"
"""The dashboard's page on why a pooled interval is no narrower than its best period's."""


def pooled_note(
    period: str, start: str, end: str, pooling: str, path: str, params: Iterable[tuple[str, str]]
) -> dict[str, str] | None:
    """The sentence beside an interval pooled over ``start``..``end`` (None for one period):
    why it is no narrower than its best period's, the link to :data:`POOLING_HELP`, and the
    same page for ``end`` alone (``path`` with ``params``, start and end replaced)."""
    if not start or not end or start == end:
        return None
    kept = [(k, v) for k, v in params if k not in ("start", "end") and v]
    if pooling == "independent":
        text = (
            f"Pooled over {start} to {end} as independent: right only if different devices"
            f" report each {period}; if the same devices report every {period}, this interval"
            " is too narrow."
        )
    else:
        text = (
            f"Pooled over {start} to {end} (overlap-safe): when the same devices report every"
            f" {period}, the whole range is no more precise than its best {period}, so this"
            f" interval is about as wide as one {period}'s."
        )
    return {
        "text": text,
        "help": POOLING_HELP,
        "one": f"{path}?{urlencode([*kept, ('start', end), ('end', end)])}",
        "one_text": f"{end} alone",
    }


def csv_href(name: str, kind: str, query: dict[str, Any]) -> str:
    """The CSV of the estimate or series document for the page's choices."""
    params = {k: query[k] for k in ("start", "end", "method", "pooling") if k in query}
    return f"{metric_path(name)}/{kind}.csv?{urlencode(params)}"


def _spec_line(spec: MetricSpec) -> str:
    """The metric's kind in a few words (an event metric's rule too)."""
    line = (
        f"{spec.type} · {spec.mechanism} · ε = {spec.epsilon:g} · per {spec.period} · {spec.domain}"
    )
    events = events_text(spec)
    return line if events is None else f"{line} · events: {events}"


def _devices_note(document: dict[str, Any]) -> str | None:
    """An ``any`` metric's devices over one window, in words: how many of the active devices
    saw the event, with the interval; None for any other document."""
    found = document.get("devices_with_event")
    if found is None:
        return None
    level = f"{document['confidence'] * 100:g}%"
    estimate = "—" if found["estimate"] is None else f"{found['estimate']:,.0f}"
    return (
        f"Devices where the event occurred: {estimate} ({level} interval {found['low']:,.0f}"
        f" to {found['high']:,.0f}) of {document['active_devices']:,} active devices."
    )


def _estimate_section(spec: MetricSpec, document: dict[str, Any]) -> dict[str, Any]:
    """Bars with simultaneous whiskers, the margin note and the table view."""
    rows = document["estimates"]
    view = view_of(spec)
    lead = view.lead
    bars = [
        Bar(
            r["category"],
            None if r["frequency"] is None else min(1.0, max(0.0, r["frequency"])),
            r["ci_low"],
            r["ci_high"],
        )
        for r in rows
        if lead is None or r["category"] == lead
    ]
    level = f"{document['confidence'] * 100:g}%"
    caption = (
        f"{spec.name}: estimated shares over {document['start']} to {document['end']}"
        f" with simultaneous {level} intervals"
    )
    axis = f"share of reports that are {lead}" if lead is not None else "share of reports"
    if view.axis is not None:
        axis = view.axis
    if view.quantiles and document.get("unit"):
        axis += f" · buckets in {document['unit']}"
    return {
        "start": document["start"],
        "end": document["end"],
        "n": counted_n(document),
        "counted": counted_unit(document),
        "method": document["method"],
        "pooling": document["pooling"],
        "level": level,
        "margin_note": (
            pct(document.get("margin")) if document.get("margin_exceeds_most_shares") else None
        ),
        "wide": bar_chart(bars, svg_id="estimate-chart", caption=caption, axis_title=axis),
        "narrow": bar_chart(
            bars, svg_id="estimate-chart-narrow", caption=caption, axis_title=axis, narrow=True
        ),
        "rows": [
            [
                r["category"],
                *_marked(interval_pcts(r["frequency"], r["ci_low"], r["ci_high"]), r),
                f"{r['count']:,.0f}" if r["count"] is not None else "—",
            ]
            for r in rows
        ],
        "clipped": clipped_count(rows),
        "kind_note": None if view.note is None else view.note(document),
        "devices": _devices_note(document),
    }


def _quantiles_section(document: dict[str, Any]) -> dict[str, Any]:
    """The histogram's quantile intervals (value units, bucket edges)."""
    return {
        "level": f"{document['confidence'] * 100:g}%",
        "rows": [
            (
                repr(entry["q"]),
                [
                    f"p{entry['q'] * 100:g}",
                    *quantile_bounds(entry, document["edges"], value_text),
                ],
            )
            for entry in document["quantiles"]
        ],
    }


def _series_section(
    spec: MetricSpec, document: dict[str, Any], shown: Sequence[str]
) -> dict[str, Any]:
    """The shares of ``shown`` per period with their intervals (a boolean's true share as one
    chart, categories and buckets as small multiples) and the table view."""
    series = document["series"]
    periods = [p["period"] for p in series]
    lines = []
    for category in shown:
        points = []
        for point in series:
            row = next(r for r in point["estimates"] if r["category"] == category)
            value = row["frequency"]
            points.append(
                Point(
                    point["period"],
                    None if value is None else min(1.0, max(0.0, value)),
                    row["ci_low"],
                    row["ci_high"],
                )
            )
        lines.append(Line(category, points))
    x_title = f"{spec.period} (UTC)"
    narrow = None
    view = view_of(spec)
    if view.lead is not None:
        caption = f"{spec.name}: share of {view.lead} per {spec.period}"
        options: dict[str, Any] = {
            "caption": caption,
            "shares": True,
            "y_title": f"share {view.lead}",
            "x_title": x_title,
        }
        wide = time_chart(periods, lines, svg_id="series-chart", **options)
        narrow = time_chart(periods, lines, svg_id="series-chart-narrow", frame=NARROW, **options)
        what = f"The share of {view.lead}"
    else:
        caption = f"{spec.name}: share per {spec.period} of each {view.item} shown"
        wide = small_multiples(periods, lines, container_id="series-chart", caption=caption)
        what = view.series_what(spec, shown)
    table_rows = [
        [
            point["period"],
            row["category"],
            window_n(spec, point["n"]),
            *_marked(interval_pcts(row["frequency"], row["ci_low"], row["ci_high"]), row),
        ]
        for point in series
        if point["n"]
        for row in point["estimates"]
        if row["category"] in shown
    ]
    return {
        "what": what,
        "wide": wide,
        "narrow": narrow,
        "gaps": gaps_note(series, spec.period, "series-gaps"),
        "rows": table_rows,
        "clipped": clipped_count(
            row for point in series for row in point["estimates"] if row["category"] in shown
        ),
    }


def _mean_sections(
    spec: MetricSpec, estimate_doc: dict[str, Any], series_doc: dict[str, Any]
) -> dict[str, Any]:
    """A numeric metric's mean over the range, and its mean per period with the band."""
    mean = estimate_doc["mean"]
    level = f"{estimate_doc['confidence'] * 100:g}%"
    unit = estimate_doc.get("unit")
    shown = "no reports" if mean["estimate"] is None else value_text(mean["estimate"])
    if unit and mean["estimate"] is not None:
        shown += f" {unit}"
    points = [
        Point(p["period"], p["mean"]["estimate"], p["mean"]["ci_low"], p["mean"]["ci_high"])
        for p in series_doc["series"]
    ]
    periods = [p["period"] for p in series_doc["series"]]
    options: dict[str, Any] = {
        "caption": f"{spec.name}: mean per period with its {level} interval",
        "shares": False,
        "value_name": "mean",
        "y_title": f"mean {spec.name}" + (f" ({unit})" if unit else ""),
        "x_title": f"{spec.period} (UTC)",
    }
    line = [Line(None, points)]
    return {
        "shown": shown,
        "level": level,
        "low": value_text(mean["ci_low"]),
        "high": value_text(mean["ci_high"]),
        "n": counted_n(estimate_doc),
        "start": estimate_doc["start"],
        "end": estimate_doc["end"],
        "pooling": estimate_doc["pooling"],
        "wide": time_chart(periods, line, svg_id="mean-chart", **options),
        "narrow": time_chart(periods, line, svg_id="mean-chart-narrow", frame=NARROW, **options),
        "gaps": gaps_note(series_doc["series"], spec.period, "mean-gaps"),
        "rows": [
            [
                p["period"],
                window_n(spec, p["n"]),
                value_text(p["mean"]["estimate"]),
                value_text(p["mean"]["ci_low"]),
                value_text(p["mean"]["ci_high"]),
            ]
            for p in series_doc["series"]
            if p["n"] and p["mean"]["estimate"] is not None
        ],
    }


def comparison_section(spec: MetricSpec, document: dict[str, Any] | str) -> dict[str, Any]:
    """The card comparing the range with as many periods just before it (the API's
    ``compare_to=previous``): per category (or the mean) both windows, the change with its
    interval and the API's verdict; ``document`` a string is why the comparison was refused."""
    if isinstance(document, str):
        return {"problem": document}
    numeric = not view_of(spec).shares

    def amount(value: float | None, signed: bool = False) -> str:
        if value is None:
            return "—"
        if numeric:
            return f"{value:+,.4g}" if signed else value_text(value)
        return f"{value * 100:+.1f} pts" if signed else f"{value * 100:.1f}%"

    part = document["slices"][0]
    if not part["baseline_n"] or not part["n"]:
        empty = "the previous period" if not part["baseline_n"] else "this range"
        return {
            "problem": (
                f"{empty} ({document['baseline_start']} to {document['baseline_end']}"
                if not part["baseline_n"]
                else f"{empty} ({document['start']} to {document['end']}"
            )
            + ") has no reports, so there is nothing to compare yet."
        }
    return {
        "problem": None,
        "start": document["start"],
        "end": document["end"],
        "baseline_start": document["baseline_start"],
        "baseline_end": document["baseline_end"],
        "n": f"{part['n']:,}",
        "baseline_n": f"{part['baseline_n']:,}",
        "level": f"{document['confidence'] * 100:g}%",
        "rows": [
            (
                row["verdict"],
                [
                    row["category"],
                    amount(row["current"]),
                    amount(row["baseline"]),
                    amount(row["difference"], signed=True),
                    f"{amount(row['ci_low'], signed=True)} to {amount(row['ci_high'], signed=True)}",
                    row["verdict"],
                ],
            )
            for row in part["rows"]
        ],
    }


def about_lines(document: dict[str, Any]) -> dict[str, Any]:
    """What the registration says of the metric (its document's ``description``, ``unit`` and
    ``owner``), for under its name; empty if it says nothing."""
    return {
        "description": document.get("description") or "",
        "facts": [
            (key, label, document[key])
            for key, label in (("unit", "Unit"), ("owner", "Owner"))
            if document.get(key)
        ],
    }


def metric_page(
    spec: MetricSpec,
    estimate_doc: dict[str, Any],
    series_doc: dict[str, Any],
    shown: Sequence[str],
    query: dict[str, Any],
    quantiles_over_time: Markup | str = "",
    breakdown: Markup | str = "",
    *,
    empty: Markup | None = None,
    comparison: dict[str, Any] | str | None = None,
    presets: Sequence[tuple[str, str, str, str]] = (),
    arrival: dict[str, Any] | None = None,
) -> Markup:
    """A metric's page: pickers, then its estimate, quantiles (and ``quantiles_over_time``,
    markup a template built) and series (or its mean); ``breakdown`` (markup a template
    built: the breakdown selector) after the estimate. A plain string for either is text,
    escaped like any other. ``empty`` (the range holds no report: :mod:`.emptystate`'s card)
    is shown instead of the estimates, the quantiles and the series."""
    view = view_of(spec)
    numeric = not view.shares
    common = {
        "spec": spec,
        "spec_line": _spec_line(spec),
        "about": about_lines(estimate_doc),
        "path": metric_path(spec.name),
        "query": query,
        "methods": METHODS,
        "poolings": POOLINGS,
        "pickers": {"method": not numeric and view.methods, "top": view.top_picker(spec)},
        "breakdown": breakdown,
        "help": {"methods": glossary.METHODS, "poolings": glossary.POOLINGS},
        "presets": preset_links(spec.name, query, presets),
        "arrival": arrival,
    }
    if empty is not None:
        return render("metric.html", **common, empty=empty, comparison=None)
    return render(
        "metric.html",
        **common,
        pooled=pooled_note(
            spec.period,
            estimate_doc["start"],
            estimate_doc["end"],
            estimate_doc.get("pooling", query.get("pooling", "")),
            metric_path(spec.name),
            [(key, str(value)) for key, value in query.items()],
        ),
        mean=_mean_sections(spec, estimate_doc, series_doc) if numeric else None,
        estimate=None if numeric else _estimate_section(spec, estimate_doc),
        quantiles=_quantiles_section(estimate_doc) if view.quantiles else None,
        series=None if numeric else _series_section(spec, series_doc, shown),
        quantiles_over_time=quantiles_over_time,
        empty=None,
        estimate_csv=csv_href(spec.name, "estimate", query),
        series_csv=csv_href(spec.name, "series", query),
        comparison=None if comparison is None else comparison_section(spec, comparison),
    )


def pooling_help_page() -> Markup:
    """Why an interval pooled over several periods is about as wide as one period's."""
    return render("help_pooling.html")


def preset_links(
    name: str, query: dict[str, Any], presets: Sequence[tuple[str, str, str, str]]
) -> list[dict[str, Any]]:
    """The time-range presets as links keeping the page's other choices, the one whose range
    the page shows marked current."""
    kept = {k: query[k] for k in ("method", "pooling", "compare") if query.get(k)}
    return [
        {
            "key": key,
            "label": label,
            "href": f"{metric_path(name)}?{urlencode({'start': start, 'end': end, **kept})}",
            "current": query.get("start") == start and query.get("end") == end,
        }
        for key, label, start, end in presets
    ]


def plan_page(
    values: dict[str, str],
    plan: dict[str, Any] | None,
    problem: str | None,
    yours: Sequence[dict[str, Any]] = (),
) -> Markup:
    """The planner: first what your metrics' reports give now (``yours``,
    :func:`.data.planner_metrics`), then its form, the reports needed by the recommended
    mechanism, every mechanism."""
    shown = None
    if problem is None and plan is not None:
        advised = plan["advised"]
        best = next(r for r in plan["mechanisms"] if r["mechanism"] == advised)
        rows = []
        for row in plan["mechanisms"]:
            if not row["supported"]:
                values_row = [row["mechanism"], "—", "—", "—"]
            else:
                needed = row.get("reports_needed")
                values_row = [
                    row["mechanism"],
                    "more than 1e15" if needed is None else f"{needed:,}",
                    f"{row['v_star']:.4g}",
                    f"{row['report_bytes']}",
                ]
            rows.append((row["mechanism"] == advised, values_row))
        needed = best.get("reports_needed")
        shown = {
            "needed": "more than 1e15" if needed is None else f"{needed:,}",
            "advised": advised,
            "auto": plan["auto"],
            "margin": f"{plan['margin'] * 100:g} points",
            "names": [row["mechanism"] for row in plan["mechanisms"]],
            "over": (
                f"every one of {plan['categories']} categories at once"
                if plan["simultaneous"]
                else f"each of {plan['categories']} categories on its own"
            ),
            "confidence": f"{plan['confidence'] * 100:g}%",
            "rows": rows,
        }
    return render(
        "plan.html",
        values=values,
        plan=shown,
        problem=problem,
        v_star=V_STAR_MEANING,
        margin_hint=glossary.MARGIN_HINT,
        yours=your_metrics(yours),
        mechanism_names=glossary.MECHANISMS,
        current="plan",
    )


def _epsilon_text(value: float | None) -> str:
    """A privacy-account figure: eps to three significant digits, or "unbounded"."""
    return "unbounded" if value is None else f"{value:.3g}"


def _shuffled_section(shuffled: dict[str, Any]) -> dict[str, Any]:
    """The account's shuffled batches: per batch the central ε against an analyst beside the
    local ε against the shuffler (``table#shuffled``), or one line saying there are none."""
    if not shuffled["batches"]:
        return {"none": shuffled["statement"]}
    rows = [
        (
            row["metric"],
            [
                row["mechanism"],
                devices_text(row),
                f"{row['delta']:g}",
                f"{row['central_epsilon']:.4g}",
                f"{row['local_epsilon']:g}",
                row["bound_name"],
            ],
        )
        for row in shuffled["batches"]
    ]
    lead = (
        "Assumed batch size: what the account would be" if shuffled["source"] == "assumed" else ""
    )
    weakest = None
    if shuffled["source"] == "released":
        listed, total = len(shuffled["batches"]), shuffled["batch_count"]
        weakest = {
            "which": f"The {listed:,} most recent of {total:,}" if listed < total else "All",
            "metrics": [
                f"{m['metric']}: central ε ≤ {m['central_epsilon']:.4g} ({batches_text(m)})"
                for m in shuffled["metrics"]
            ],
        }
    holds = (
        "the central ε holds against whoever sees only the released batches; against the"
        " shuffler, or the shuffler and the collector together, only the local ε holds."
    )
    return {
        "none": "",
        "holds": f"{lead} — {holds}" if lead else holds[0].upper() + holds[1:],
        "weakest": weakest,
        "rows": rows,
    }


def _clear_rows(metrics: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The dimensions each metric's reports carry in the clear, and how many values each can
    take: no ε covers them, so their cardinality is what bounds what they reveal."""
    return [
        (
            m["metric"],
            [
                ", ".join(f"{d['name']} ({d['values']:,})" for d in m["dimensions"]),
                f"{m['cells']:,}",
            ],
        )
        for m in metrics
    ]


def _event_rows(metrics: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The event metrics' windows (``table#event-windows``): per metric its aggregation and
    window, one window's ε, what the reports that see one day's events spend together and,
    memoized, what an unchanged aggregate reveals (empty without event metrics)."""
    rows = []
    for m in metrics:
        if "per_window" not in m:
            continue
        days = m["window_days"]
        window = (
            f"rolling {days:,} day{'s' if days > 1 else ''}"
            if m["rolling"]
            else f"calendar {m['period']}"
        )
        unchanged = m["permanent_epsilon"]
        rows.append(
            (
                m["metric"],
                [
                    m["aggregate"],
                    window,
                    _epsilon_text(m["per_window"]),
                    _epsilon_text(m["per_day_of_events"]),
                    "–" if unchanged is None else _epsilon_text(unchanged),
                ],
            )
        )
    return rows


def privacy_page(
    values: dict[str, str], document: dict[str, Any] | None, problem: str | None
) -> Markup:
    """The privacy account: what one device spends per period, day, 7 and 30 days and its
    lifetime, under the SDK settings in the form, and the statement an app can publish."""
    account = None
    if problem is None and document is not None:
        windows = (
            "per_period",
            "per_day",
            "per_7_days",
            "per_30_days",
            "lifetime",
            "per_value_lifetime",
        )
        total = document["total"]
        account = {
            "warning_level": f"{document['warning_level_30_days']:g}",
            "rows": [
                (
                    row["metric"],
                    [
                        f"{row['epsilon']:g}",
                        row["period"],
                        "yes" if row["memoized"] else "no",
                        *(_epsilon_text(row[w]) for w in windows),
                    ],
                )
                for row in document["metrics"]
            ],
            "total": [
                "all metrics together",
                "",
                "",
                "",
                *(_epsilon_text(total[w]) for w in windows),
            ],
            "events": _event_rows(document["metrics"]),
            "warnings": [warning_parts(w) for w in document["warnings"]],
            "shuffled": _shuffled_section(document["shuffled"]),
            "in_clear": _clear_rows(document.get("in_the_clear") or []),
            "statement": document["statement"],
        }
    ratios = ((DEFAULT_RATIO, f"{DEFAULT_RATIO} × ε (the SDK's)"), ("none", "off"))
    return render(
        "privacy.html",
        values=values,
        ratios=ratios,
        account=account,
        problem=problem,
        current="privacy",
    )
