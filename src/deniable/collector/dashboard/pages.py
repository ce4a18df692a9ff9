"""The dashboard's HTML pages, built with the standard library: every string is escaped.

Metric names, categories and bucket labels come from whoever registered the metric, so each
one passes through :func:`html.escape` before it reaches a page. Pages hold no script and no
inline style (the Content-Security-Policy forbids both): one stylesheet, SVG charts drawn on the
server (:mod:`.charts`), and plain GET forms for the pickers and the planner.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from deniable.client.spec import MetricSpec
from deniable.estimators import quantile_bounds
from deniable.estimators.advisor import V_STAR_MEANING
from deniable.estimators.documents import CLIPPED_MARKS, clipped_mark
from deniable.estimators.privacy import PRIVACY_DOC
from deniable.estimators.shufflingaccount import below_note, devices_text

from ..queries.privacy import DEFAULT_RATIO
from .charts import (
    NARROW,
    Bar,
    Line,
    Point,
    bar_chart,
    share_text,
    small_multiples,
    sparkline,
    time_chart,
    value_text,
)
from .data import MAX_TOP, PAGE_NAME, MetricRow, OverviewPage

STYLESHEET = "/dashboard/static/dashboard.css"
METHODS = ("unbiased", "consistent", "mle")
POOLINGS = ("overlap-safe", "independent")


def e(value: object) -> str:
    """``value`` as text escaped for HTML (quotes too: safe in attributes)."""
    return escape(str(value), quote=True)


def breakable(name: str) -> str:
    """``name`` escaped, with a line-break opportunity after each ``_``, ``.`` and ``-``: a
    long metric name wraps between its words, never inside one ("dark_m/ode")."""
    out = escape(name, quote=True)
    for mark in ("_", ".", "-"):
        out = out.replace(mark, mark + "<wbr>")
    return out


def pair(wide: str, narrow: str) -> str:
    """A chart drawn twice, for a wide container and for a phone; the stylesheet shows the
    one that keeps its text at least 10 CSS px at the screen's width."""
    return f'<div class="chart-pair">{wide}{narrow}</div>'


def gaps_note(series: Sequence[dict[str, Any]], period: str, note_id: str) -> str:
    """One line saying which periods of a series had no reports (the chart and the table
    leave them out), or nothing when every period had some."""
    empty = [p["period"] for p in series if not p["n"]]
    if not empty:
        return ""
    total = len(series)
    if len(empty) == total:
        text = f"No reports in this range ({total} {period}{'s' if total != 1 else ''}) yet."
    else:
        named = f" ({', '.join(empty)})" if len(empty) <= 3 else ""
        text = (
            f"No reports on {len(empty)} of {total} {period}s{named}: the chart and the table"
            " leave them out."
        )
    return f'<p class="gaps" id="{e(note_id)}">{e(text)}</p>'


def warning_html(text: str) -> str:
    """A privacy warning for the dashboard's reader: its pointer to the documentation (which
    the dashboard does not serve) becomes a link to the Plan page, where a lower ε is weighed
    against the margin of error it gives."""
    pointer = f" ({PRIVACY_DOC})"
    if not text.endswith(pointer):
        return e(text)
    return (
        f"{e(text.removesuffix(pointer))}. "
        '<a href="/dashboard/plan">Plan a metric at a lower ε</a>'
        " to see the margin of error it would give."
    )


def metric_path(name: str) -> str:
    """The path of a metric's page."""
    return f"/dashboard/metrics/{quote(name, safe='')}"


def layout(title: str, body: str, *, signed_in: bool = True, current: str = "") -> str:
    """A whole page: head, the top bar (navigation, sign-out) and ``body``."""
    nav = ""
    if signed_in:
        links = [
            ("overview", "/dashboard/", "Overview"),
            ("plan", "/dashboard/plan", "Plan"),
            ("privacy", "/dashboard/privacy", "Privacy"),
        ]
        here = ' aria-current="page"'
        items = "".join(
            f'<a href="{href}"{here if key == current else ""}>{label}</a>'
            for key, href, label in links
        )
        nav = (
            f'<nav aria-label="Dashboard">{items}</nav>'
            '<form class="sign-out" method="post" action="/dashboard/sign-out">'
            '<button type="submit" class="quiet">Sign out</button></form>'
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} · deniable</title>"
        '<link rel="icon" href="data:,">'
        f'<link rel="stylesheet" href="{STYLESHEET}"></head><body>'
        f'<header class="top"><a class="brand" href="/dashboard/">deniable</a>{nav}</header>'
        f"<main>{body}</main>"
        "<footer>Local differential privacy: the collector never saw a true value.</footer>"
        "</body></html>"
    )


def table(
    table_id: str, headers: Sequence[str], rows: Iterable[str], *, numeric_from: int = 1
) -> str:
    """A table in a horizontally scrolling wrapper; ``rows`` are ready ``<tr>`` markup."""
    right = ' class="num"'
    head = "".join(
        f'<th scope="col"{right if i >= numeric_from else ""}>{e(h)}</th>'
        for i, h in enumerate(headers)
    )
    return (
        f'<div class="scroll"><table id="{e(table_id)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def cells(values: Sequence[object], *, first_is_header: bool = True, numeric_from: int = 1) -> str:
    """One row's cells: the first a row header, the rest text up to ``numeric_from`` and
    right-aligned numbers from there."""
    out = []
    for i, value in enumerate(values):
        if i == 0 and first_is_header:
            out.append(f'<th scope="row">{e(value)}</th>')
        elif i < numeric_from:
            out.append(f"<td>{e(value)}</td>")
        else:
            out.append(f'<td class="num">{e(value)}</td>')
    return "".join(out)


def pct(value: float | None) -> str:
    """A share as a percentage with two decimals, or an em dash."""
    return "—" if value is None else f"{value * 100:.2f}%"


def sign_in_page(message: str | None = None) -> str:
    """The sign-in form (the token goes in a POST body, never a URL)."""
    note = f'<p class="error" role="alert">{e(message)}</p>' if message else ""
    body = (
        '<section class="card narrow"><h1>Sign in</h1>'
        "<p>Paste the collector's viewer token (<code>DENIABLE_VIEWER_TOKEN</code>). It is checked"
        " once and never stored in the browser: a signed session cookie is kept instead, for 12"
        " hours. The admin token does not sign in here.</p>"
        f"{note}"
        '<form id="sign-in" method="post" action="/dashboard/sign-in">'
        '<label for="token">Token</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password"'
        " required autofocus>"
        '<button type="submit">Sign in</button></form></section>'
    )
    return layout("Sign in", body, signed_in=False)


def error_page(status: int, detail: str) -> str:
    """A page saying what went wrong (a 404 metric, a 422 range)."""
    body = (
        f'<section class="card"><h1>{"Not found" if status == 404 else "Cannot show this"}</h1>'
        f'<p class="error" role="alert">{e(detail)}</p>'
        '<p><a href="/dashboard/">Back to the overview</a></p></section>'
    )
    return layout("Error", body)


def _margin_text(row: MetricRow) -> str:
    """The overview's margin cell: ± points for shares, ± value units for a mean, a text
    metric's detection floor."""
    if row.margin is None:
        return "—"
    if row.spec.type == "text":  # the planned floor: a run's own adds its collision noise
        return f"floor ≥ {row.margin * 100:.1f}%"
    if row.spec.type == "numeric":
        return f"±{value_text(row.margin)}"
    return f"±{row.margin * 100:.1f} pts"


def change_cell(row: MetricRow) -> str:
    """The overview's change cell: ▲/▼ and the difference only when the period comparison
    (current period minus the one before) says ``higher`` or ``lower``; otherwise its verdict,
    in muted text, with no number to read a trend into."""
    change = row.change
    if change is None or change["difference"] is None:
        return '<td class="change">—</td>'
    numeric = row.spec.type == "numeric"

    def amount(value: float) -> str:
        return f"{value:+,.4g}" if numeric else f"{value * 100:+.1f} pts"

    what = "mean" if numeric else f"share of {change['category']}"
    title = (
        f"{what}, current period minus the one before: {amount(change['difference'])},"
        f" interval [{amount(change['ci_low'])}, {amount(change['ci_high'])}]: {change['verdict']}"
    )
    if change["verdict"] in ("higher", "lower"):
        mark = "▲" if change["verdict"] == "higher" else "▼"
        return (
            f'<td class="change {e(change["verdict"])}" title="{e(title)}"'
            f' data-verdict="{e(change["verdict"])}">'
            f"{mark} {e(amount(change['difference']))}</td>"
        )
    return (
        f'<td class="change none" title="{e(title)}" data-verdict="none">no detectable change</td>'
    )


def page_links(page: OverviewPage) -> str:
    """Which metrics the overview page shows, and links to the previous and next pages."""
    if page.pages <= 1:
        return ""
    last = page.first + len(page.rows) - 1
    links = []
    if page.number > 1:
        links.append(f'<a rel="prev" href="/dashboard/?{PAGE_NAME}={page.number - 1}">Previous</a>')
    if page.number < page.pages:
        links.append(f'<a rel="next" href="/dashboard/?{PAGE_NAME}={page.number + 1}">Next</a>')
    return (
        f'<nav class="pages" aria-label="Pages"><p>Metrics {page.first:,}–{last:,} of'
        f" {page.total:,} · page {page.number:,} of {page.pages:,}</p>{' '.join(links)}</nav>"
    )


def overview_page(page: OverviewPage, periods: int) -> str:
    """One page of the metrics with their recent reports, a sparkline of each one's leading
    estimate and its margin."""
    rows = page.rows
    body_rows = []
    for row in rows:
        spec = row.spec
        what = {"numeric": "mean", "text": "strings found: on its page"}.get(
            spec.type, f"share of {row.leading or '—'}"
        )
        label = f"{spec.name}: {what}, last {len(row.trend)} periods"
        body_rows.append(
            f'<tr data-metric="{e(spec.name)}">'
            f'<th scope="row"><a href="{e(metric_path(spec.name))}">{breakable(spec.name)}</a>'
            f'<span class="sub">{e(what)}</span></th>'
            f"<td>{e(spec.type)}</td>"
            f'<td class="num">{spec.epsilon:g}</td>'
            f"<td>{e(spec.mechanism)}</td>"
            f'<td class="num">{row.current:,}</td>'
            f'<td class="num">{row.previous:,}</td>'
            f'<td class="spark">{sparkline(row.trend, label=label, band=row.band)}</td>'
            f"{change_cell(row)}"
            f'<td class="num">{e(_margin_text(row))}</td></tr>'
        )
    if not rows:
        body_rows.append(
            '<tr><td colspan="9" class="empty">No metrics yet: register one with'
            " <code>deniable metrics create</code>.</td></tr>"
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
        "Margin now",
    )
    head = "".join(f'<th scope="col">{e(h)}</th>' for h in headers)
    body = (
        '<div class="heading"><h1>Metrics</h1>'
        f'<p class="lede">{page.total} metric{"s" if page.total != 1 else ""}. Reports in the'
        " current and the last period; the trend of the leading share (or the mean) with its"
        " interval band; its change from the last period to the current one, marked ▲ or ▼"
        " only when detectable at 95% (the interval holds whatever devices report in both);"
        " the worst-case margin of error at today's reports (95%, all categories at once).</p></div>"
        f'<div class="scroll"><table id="metrics"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body_rows)}</tbody></table></div>{page_links(page)}"
    )
    return layout("Overview", body, current="overview")


def _select(name: str, options: Sequence[str], chosen: str) -> str:
    """A labelled ``<select>`` with ``chosen`` selected."""
    items = "".join(
        f'<option value="{e(o)}"{" selected" if o == chosen else ""}>{e(o)}</option>'
        for o in options
    )
    return f'<label>{e(name)}<select name="{e(name)}">{items}</select></label>'


def pickers(spec: MetricSpec, query: dict[str, Any]) -> str:
    """The GET form choosing the range, method, pooling and how many categories to draw."""
    numeric = spec.type == "numeric"
    fields = [
        f'<label>start<input name="start" value="{e(query["start"])}" maxlength="32"'
        ' inputmode="numeric"></label>',
        f'<label>end<input name="end" value="{e(query["end"])}" maxlength="32"'
        ' inputmode="numeric"></label>',
    ]
    if not numeric:
        fields.append(_select("method", METHODS, query["method"]))
    fields.append(_select("pooling", POOLINGS, query["pooling"]))
    if spec.type == "categorical" or (spec.type == "histogram" and spec.k > MAX_TOP):
        fields.append(
            f'<label>top<input name="top" type="number" min="1" max="20"'
            f' value="{query["top"]}"></label>'
        )
    return (
        f'<form id="pickers" method="get" action="{e(metric_path(spec.name))}">'
        f'{"".join(fields)}<button type="submit">Apply</button></form>'
    )


def csv_link(link_id: str, name: str, kind: str, query: dict[str, Any]) -> str:
    """A link to the CSV of the estimate or series document for the page's choices."""
    params = {k: query[k] for k in ("start", "end", "method", "pooling") if k in query}
    href = f"{metric_path(name)}/{kind}.csv?{urlencode(params)}"
    return f'<a id="{e(link_id)}" class="csv" href="{e(href)}" download>Download CSV</a>'


def clipped_note(rows: Iterable[dict[str, Any]], note_id: str) -> str:
    """The legend of the marks on clipped estimates (as the CLI's), when a row has one."""
    clipped = sum(1 for row in rows if row.get("clipped"))
    if not clipped:
        return ""
    return (
        f'<p class="note" id="{e(note_id)}">{CLIPPED_MARKS["below"]}/{CLIPPED_MARKS["above"]}'
        f" {clipped} unbiased estimate{'s' if clipped != 1 else ''} fell below 0 (or above"
        " 100%): shown at the edge of the interval; the raw value is <code>unbiased</code> in"
        " the CSV.</p>"
    )


def _spec_line(spec: MetricSpec) -> str:
    """The metric's kind in a few words."""
    return (
        f"{spec.type} · {spec.mechanism} · ε = {spec.epsilon:g} · per {spec.period} · {spec.domain}"
    )


def _estimate_section(spec: MetricSpec, document: dict[str, Any], query: dict[str, Any]) -> str:
    """Bars with simultaneous whiskers, the margin note, the table view and its CSV."""
    rows = document["estimates"]
    boolean = spec.type == "boolean"
    bars = [
        Bar(
            r["category"],
            None if r["frequency"] is None else min(1.0, max(0.0, r["frequency"])),
            r["ci_low"],
            r["ci_high"],
        )
        for r in rows
        if not boolean or r["category"] == "true"
    ]
    level = f"{document['confidence'] * 100:g}%"
    caption = (
        f"{spec.name}: estimated shares over {document['start']} to {document['end']}"
        f" with simultaneous {level} intervals"
    )
    axis = "share of reports that are true" if boolean else "share of reports"
    if spec.type == "histogram" and document.get("unit"):
        axis += f" · buckets in {document['unit']}"
    chart = pair(
        bar_chart(bars, svg_id="estimate-chart", caption=caption, axis_title=axis),
        bar_chart(
            bars, svg_id="estimate-chart-narrow", caption=caption, axis_title=axis, narrow=True
        ),
    )
    note = ""
    if document.get("margin_exceeds_most_shares"):
        note = (
            '<p class="note" id="margin-note">The margin of error'
            f" (±{pct(document.get('margin'))}) is larger than most of the estimates themselves:"
            " these shares cannot be told from zero yet. Collect more reports, widen the range,"
            " or read the Plan page.</p>"
        )
    table_rows = [
        "<tr>"
        + cells(
            [
                r["category"],
                pct(r["frequency"]) + clipped_mark(r),
                pct(r["ci_low"]),
                pct(r["ci_high"]),
                f"{r['count']:,.0f}" if r["count"] is not None else "—",
            ]
        )
        + "</tr>"
        for r in rows
    ]
    return (
        '<section class="card"><div class="card-head"><h2>Estimate</h2>'
        f'<p class="meta">{e(document["start"])} to {e(document["end"])} ·'
        f" n = {document['n']:,} · {e(document['method'])} · {e(document['pooling'])} ·"
        f" <strong>simultaneous {level} intervals</strong> (they hold for all categories at"
        " once)</p></div>"
        f"{note}"
        f"{chart}"
        '<p class="key"><span class="key-bar"></span>estimate'
        ' <span class="key-whisker"></span>interval</p>'
        + table(
            "estimate-table",
            ("category", "estimate", "low", "high", "estimated count"),
            table_rows,
        )
        + clipped_note(rows, "estimate-clipped")
        + f'<p class="actions">{csv_link("estimate-csv", spec.name, "estimate", query)}</p>'
        "</section>"
    )


def _quantiles_section(document: dict[str, Any]) -> str:
    """The histogram's quantile intervals (value units, bucket edges)."""
    rows = [
        f'<tr data-q="{entry["q"]!r}">'
        + cells([f"p{entry['q'] * 100:g}", *quantile_bounds(entry, document["edges"], value_text)])
        + "</tr>"
        for entry in document["quantiles"]
    ]
    return (
        '<section class="card"><h2>Quantiles</h2>'
        '<p class="meta">Each quantile lies between two bucket edges, jointly at'
        f" {document['confidence'] * 100:g}%. The end buckets hold every value beyond the"
        " outer edges, so a quantile that may lie in one has no bound on that side.</p>"
        + table("quantiles", ("quantile", "at least", "at most"), rows)
        + "</section>"
    )


def _series_section(
    spec: MetricSpec, document: dict[str, Any], shown: Sequence[str], query: dict[str, Any]
) -> str:
    """The shares of ``shown`` per period with their intervals (a boolean's true share as one
    chart, categories and buckets as small multiples), the table view and its CSV."""
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
    if spec.type == "boolean":
        caption = f"{spec.name}: share of true per {spec.period}"
        options: dict[str, Any] = {
            "caption": caption,
            "shares": True,
            "y_title": "share true",
            "x_title": x_title,
        }
        chart = pair(
            time_chart(periods, lines, svg_id="series-chart", **options),
            time_chart(periods, lines, svg_id="series-chart-narrow", frame=NARROW, **options),
        )
        what = "The share of true"
    else:
        kind = "bucket" if spec.type == "histogram" else "category"
        caption = f"{spec.name}: share per {spec.period} of each {kind} shown"
        chart = small_multiples(periods, lines, container_id="series-chart", caption=caption)
        if spec.type == "categorical":
            what = f"The top {len(shown)} categories, largest first,"
        elif len(shown) == spec.k:
            what = f"Every one of the {spec.k} buckets, in bucket order,"
        else:
            what = f"The {len(shown)} largest of {spec.k} buckets, in bucket order,"
    table_rows = []
    for point in series:
        if not point["n"]:
            continue
        for row in point["estimates"]:
            if row["category"] in shown:
                table_rows.append(
                    "<tr>"
                    + cells(
                        [
                            point["period"],
                            row["category"],
                            f"{point['n']:,}",
                            pct(row["frequency"]) + clipped_mark(row),
                            pct(row["ci_low"]),
                            pct(row["ci_high"]),
                        ],
                        numeric_from=2,
                    )
                    + "</tr>"
                )
    return (
        '<section class="card"><div class="card-head"><h2>Over time</h2>'
        f'<p class="meta">{e(what)} each {e(spec.period)} on its own with its simultaneous'
        " interval (a band, or a bar for a lone period), on one axis.</p></div>"
        + chart
        + gaps_note(series, spec.period, "series-gaps")
        + table(
            "series-table",
            ("period", "category", "n", "estimate", "low", "high"),
            table_rows,
            numeric_from=2,
        )
        + clipped_note(
            (row for point in series for row in point["estimates"] if row["category"] in shown),
            "series-clipped",
        )
        + f'<p class="actions">{csv_link("series-csv", spec.name, "series", query)}</p>'
        "</section>"
    )


def _mean_sections(
    spec: MetricSpec,
    estimate_doc: dict[str, Any],
    series_doc: dict[str, Any],
    query: dict[str, Any],
) -> str:
    """A numeric metric's mean over the range, and its mean per period with the band."""
    mean = estimate_doc["mean"]
    level = f"{estimate_doc['confidence'] * 100:g}%"
    unit = estimate_doc.get("unit")
    shown = "no reports" if mean["estimate"] is None else value_text(mean["estimate"])
    if unit and mean["estimate"] is not None:
        shown += f" {unit}"
    headline = (
        '<section class="card"><h2>Mean</h2>'
        f'<p class="big">{e(shown)}</p>'
        f'<p class="meta">{level} interval {value_text(mean["ci_low"])} to'
        f" {value_text(mean['ci_high'])} · n = {estimate_doc['n']:,} ·"
        f" {e(estimate_doc['start'])} to {e(estimate_doc['end'])} ·"
        f" {e(estimate_doc['pooling'])}</p></section>"
    )
    points = [
        Point(p["period"], p["mean"]["estimate"], p["mean"]["ci_low"], p["mean"]["ci_high"])
        for p in series_doc["series"]
    ]
    periods = [p["period"] for p in series_doc["series"]]
    caption = f"{spec.name}: mean per period with its {level} interval"
    rows = [
        "<tr>"
        + cells(
            [
                p["period"],
                f"{p['n']:,}",
                value_text(p["mean"]["estimate"]),
                value_text(p["mean"]["ci_low"]),
                value_text(p["mean"]["ci_high"]),
            ]
        )
        + "</tr>"
        for p in series_doc["series"]
        if p["n"] and p["mean"]["estimate"] is not None
    ]
    options: dict[str, Any] = {
        "caption": caption,
        "shares": False,
        "value_name": "mean",
        "y_title": f"mean {spec.name}" + (f" ({unit})" if unit else ""),
        "x_title": f"{spec.period} (UTC)",
    }
    line = [Line(None, points)]
    chart = pair(
        time_chart(periods, line, svg_id="mean-chart", **options),
        time_chart(periods, line, svg_id="mean-chart-narrow", frame=NARROW, **options),
    )
    return (
        headline + '<section class="card"><div class="card-head"><h2>Mean over time</h2>'
        f'<p class="meta">Each {e(spec.period)} on its own, its {level} interval as a band (a'
        " bar for a lone period), in the metric's units.</p></div>"
        + chart
        + gaps_note(series_doc["series"], spec.period, "mean-gaps")
        + table("mean-table", ("period", "n", "mean", "low", "high"), rows)
        + f'<p class="actions">{csv_link("mean-csv", spec.name, "series", query)}</p>'
        "</section>"
    )


def about_lines(document: dict[str, Any]) -> str:
    """What the registration says of the metric (its document's ``description``, ``unit`` and
    ``owner``), under its name; nothing if it says nothing."""
    lines = ""
    if document.get("description"):
        lines += f'<p id="description">{e(document["description"])}</p>'
    facts = [
        f'{label} <span id="{key}">{e(document[key])}</span>'
        for key, label in (("unit", "Unit"), ("owner", "Owner"))
        if document.get(key)
    ]
    if facts:
        lines += f'<p class="meta">{" · ".join(facts)}</p>'
    return lines


def metric_page(
    spec: MetricSpec,
    estimate_doc: dict[str, Any],
    series_doc: dict[str, Any],
    shown: Sequence[str],
    query: dict[str, Any],
    quantiles_over_time: str = "",
    breakdown: str = "",
) -> str:
    """A metric's page: pickers, then its estimate, quantiles (and ``quantiles_over_time``,
    ready markup) and series (or its mean); ``breakdown`` (ready markup: the breakdown
    selector) after the estimate."""
    head = (
        f'<div class="heading"><p class="crumb"><a href="/dashboard/">Overview</a> /</p>'
        f"<h1>{breakable(spec.name)}</h1>"
        f'<p class="lede">{e(_spec_line(spec))}</p>{about_lines(estimate_doc)}</div>'
        + pickers(spec, query)
    )
    if spec.type == "numeric":
        sections = _mean_sections(spec, estimate_doc, series_doc, query) + breakdown
    else:
        sections = _estimate_section(spec, estimate_doc, query) + breakdown
        if spec.type == "histogram":
            sections += _quantiles_section(estimate_doc) + quantiles_over_time
        sections += _series_section(spec, series_doc, shown, query)
    return layout(spec.name, head + sections)


def plan_tabs(current: str) -> str:
    """Links between the Plan page's two forms: ``shares`` (categories) and ``numeric``."""
    links = (
        ("shares", "/dashboard/plan", "Shares (categories)"),
        ("numeric", "/dashboard/plan?kind=numeric", "A number (mean or histogram)"),
    )
    here = ' aria-current="page"'
    items = " ".join(
        f'<a href="{e(href)}"{here if key == current else ""}>{label}</a>'
        for key, href, label in links
    )
    return f'<nav class="tabs" aria-label="Plan for">{items}</nav>'


def plan_page(values: dict[str, str], plan: dict[str, Any] | None, problem: str | None) -> str:
    """The planner: its form, the reports needed by the recommended mechanism, every mechanism."""
    form = (
        '<form id="plan" method="get" action="/dashboard/plan">'
        f'<label>categories (k)<input name="k" type="number" min="2" step="1" required'
        f' value="{e(values["k"])}"></label>'
        f'<label>ε<input name="epsilon" type="number" min="0" step="any" required'
        f' value="{e(values["epsilon"])}"></label>'
        f'<label>margin (share)<input name="margin" type="number" min="0" max="1" step="any"'
        f' required value="{e(values["margin"])}"></label>'
        f'<label>confidence<input name="confidence" type="number" min="0" max="1" step="any"'
        f' value="{e(values["confidence"])}"></label>'
        + _select("intervals", ("simultaneous", "per-category"), values.get("intervals", ""))
        + '<button type="submit">Plan</button></form>'
    )
    if problem is not None:
        result = f'<p class="error" role="alert">{e(problem)}</p>'
    elif plan is not None:
        advised = plan["advised"]
        best = next(r for r in plan["mechanisms"] if r["mechanism"] == advised)
        rows = []
        for row in plan["mechanisms"]:
            mark = ' class="advised"' if row["mechanism"] == advised else ""
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
            rows.append(f"<tr{mark}>" + cells(values_row) + "</tr>")
        needed = best.get("reports_needed")
        needed_text = "more than 1e15" if needed is None else f"{needed:,}"
        result = (
            '<div class="answer">'
            '<div><span class="label">Reports needed</span>'
            f'<output id="reports-needed" class="big">{e(needed_text)}</output></div>'
            '<div><span class="label">Recommended mechanism</span>'
            f'<output id="recommended" class="big">{e(advised)}</output></div></div>'
            f'<p class="meta">For ±{share_text(plan["margin"])} on'
            + (
                f" every one of {plan['categories']} categories at once"
                if plan["simultaneous"]
                else f" each of {plan['categories']} categories on its own"
            )
            + f", {plan['confidence'] * 100:g}% confidence, worst case over the true shares,"
            " with the interval the estimates compute: the mechanism needing the fewest"
            " reports.</p>"
            + table("mechanisms", ("mechanism", "reports needed", "V* per report", "bytes"), rows)
            + f'<p class="meta" id="v-star">{e(V_STAR_MEANING)}</p>'
        )
        if plan["auto"] != advised:
            result += (
                f'<p class="note">A spec with mechanism auto resolves to {e(plan["auto"])}'
                f" (least variance for small shares); register with {e(advised)} for this"
                " margin.</p>"
            )
    else:
        result = ""
    body = (
        '<div class="heading"><h1>Plan</h1><p class="lede">How many reports a margin of error'
        " costs, before collecting any.</p></div>"
        + plan_tabs("shares")
        + f'<section class="card">{form}{result}</section>'
    )
    return layout("Plan", body, current="plan")


def _epsilon_text(value: float | None) -> str:
    """A privacy-account figure: eps to three significant digits, or "unbounded"."""
    return "unbounded" if value is None else f"{value:.3g}"


def _batches_text(metric: dict[str, Any]) -> str:
    """A metric's released batches as its weakest bound's note: ``1 batch of 7 devices`` or
    ``3 batches, the smallest of 7 devices``, then those below the minimum."""
    count, smallest = metric["batches"], metric["smallest_batch"]
    size = (
        f"1 batch of {smallest:,} devices"
        if count == 1
        else f"{count:,} batches, the smallest of {smallest:,} devices"
    )
    return size + below_note(metric)


def _shuffled_section(shuffled: dict[str, Any]) -> str:
    """The account's shuffled batches: per batch the central ε against an analyst beside the
    local ε against the shuffler (``table#shuffled``), or one line saying there are none."""
    if not shuffled["batches"]:
        return f'<h2>Through a shuffler</h2><p id="shuffled-none" class="meta">{e(shuffled["statement"])}</p>'
    rows = [
        f'<tr data-metric="{e(row["metric"])}">'
        f'<th scope="row">{breakable(row["metric"])}</th>'
        + cells(
            [
                row["mechanism"],
                devices_text(row),
                f"{row['delta']:g}",
                f"{row['central_epsilon']:.4g}",
                f"{row['local_epsilon']:g}",
                row["bound_name"],
            ],
            first_is_header=False,
            numeric_from=1,
        )
        + "</tr>"
        for row in shuffled["batches"]
    ]
    headers = (
        "metric",
        "mechanism",
        "batch (devices)",
        "δ",
        "central ε: against an analyst",
        "local ε: against the shuffler",
        "bound",
    )
    lead = (
        "Assumed batch size: what the account would be" if shuffled["source"] == "assumed" else ""
    )
    weakest = ""
    if shuffled["source"] == "released":
        listed, total = len(shuffled["batches"]), shuffled["batch_count"]
        which = f"The {listed:,} most recent of {total:,}" if listed < total else "All"
        weakest = (
            f'<p id="shuffled-weakest" class="meta">{which} released batches are listed; per'
            " metric, the weakest, which holds for every batch: "
            + "; ".join(
                f"{e(m['metric'])}: central ε ≤ {m['central_epsilon']:.4g} ({_batches_text(m)})"
                for m in shuffled["metrics"]
            )
            + ".</p>"
        )
    holds = (
        "the central ε holds against whoever sees only the released batches; against the"
        " shuffler, or the shuffler and the collector together, only the local ε holds."
    )
    return (
        "<h2>Through a shuffler</h2>"
        f'<p class="meta">{e(f"{lead} — {holds}" if lead else holds[0].upper() + holds[1:])}</p>'
        + weakest
        + table("shuffled", headers, rows)
    )


def _clear_section(metrics: list[dict[str, Any]]) -> str:
    """The dimensions each metric's reports carry in the clear, and how many values each can
    take: no ε covers them, so their cardinality is what bounds what they reveal."""
    if not metrics:
        return ""
    rows = [
        f'<tr data-metric="{e(m["metric"])}"><th scope="row">{breakable(m["metric"])}</th>'
        + cells(
            [
                ", ".join(f"{d['name']} ({d['values']:,})" for d in m["dimensions"]),
                f"{m['cells']:,}",
            ],
            first_is_header=False,
            numeric_from=1,
        )
        + "</tr>"
        for m in metrics
    ]
    return (
        "<h2>In the clear</h2>"
        '<p class="meta">Dimensions are sent as they are, NOT randomized, and no ε covers them:'
        " each one of a published list or “other” (values per dimension, “other”"
        " included, in brackets).</p>"
        + table("in-the-clear", ("metric", "dimensions (values)", "cells"), rows, numeric_from=2)
    )


def privacy_page(
    values: dict[str, str], document: dict[str, Any] | None, problem: str | None
) -> str:
    """The privacy account: what one device spends per period, day, 7 and 30 days and its
    lifetime, under the SDK settings in the form, and the statement an app can publish."""
    memoize_options = "".join(
        f'<option value="{key}"{" selected" if values["memoize"] == key else ""}>{label}</option>'
        for key, label in (("false", "off"), ("true", "every metric"))
    )
    layer_options = "".join(
        f'<option value="{e(key)}"{" selected" if values["instantaneous_ratio"] == key else ""}>'
        f"{label}</option>"
        for key, label in ((DEFAULT_RATIO, f"{DEFAULT_RATIO} × ε (the SDK's)"), ("none", "off"))
    )
    form = (
        '<form id="privacy-settings" method="get" action="/dashboard/privacy">'
        '<label>reports per metric and period<input name="max_reports_per_period"'
        f' type="number" min="1" step="1" required value="{e(values["max_reports_per_period"])}">'
        "</label>"
        f'<label>memoization<select name="memoize">{memoize_options}</select></label>'
        '<label>fresh layer of memoized reports<select name="instantaneous_ratio">'
        f"{layer_options}</select></label>"
        '<label>lifetime ε cap (empty: none)<input name="lifetime_epsilon" type="number"'
        f' min="0" step="any" value="{e(values["lifetime_epsilon"])}"></label>'
        '<label>shuffler batch size (empty: the released batches)<input name="shuffle_batch" type="number"'
        f' min="2" step="1" value="{e(values.get("shuffle_batch", ""))}"></label>'
        '<button type="submit">Account</button></form>'
    )
    if problem is not None or document is None:
        result = f'<p class="error" role="alert">{e(problem or "")}</p>'
    else:
        windows = (
            "per_period",
            "per_day",
            "per_7_days",
            "per_30_days",
            "lifetime",
            "per_value_lifetime",
        )
        rows = []
        for row in document["metrics"]:
            rows.append(
                f'<tr data-metric="{e(row["metric"])}">'
                f'<th scope="row">{breakable(row["metric"])}</th>'
                + cells(
                    [
                        f"{row['epsilon']:g}",
                        row["period"],
                        "yes" if row["memoized"] else "no",
                        *(_epsilon_text(row[w]) for w in windows),
                    ],
                    first_is_header=False,
                    numeric_from=0,
                )
                + "</tr>"
            )
        total = document["total"]
        rows.append(
            '<tr class="total">'
            + cells(
                ["all metrics together", "", "", "", *(_epsilon_text(total[w]) for w in windows)]
            )
            + "</tr>"
        )
        headers = (
            "metric",
            "ε per report",
            "period",
            "memoized",
            "one period",
            "a day",
            "7 days",
            "30 days",
            "lifetime",
            "per value, lifetime",
        )
        warnings = "".join(
            f'<p class="note" role="status"><strong>Warning:</strong> {warning_html(w)}</p>'
            for w in document["warnings"]
        )
        result = (
            f'<p class="meta">The most ε one device can spend, summed over every metric it'
            f" reports (sequential composition), over any two histories of its values;"
            " “per value” is what the reports of unchanging values reveal over the lifetime,"
            f" which memoization bounds. The level above which a 30-day total is flagged is"
            f" {document['warning_level_30_days']:g}.</p>"
            + table("account", headers, rows)
            + warnings
            + _shuffled_section(document["shuffled"])
            + _clear_section(document.get("in_the_clear") or [])
            + "<h2>In plain words</h2>"
            f'<blockquote id="statement">{e(document["statement"])}</blockquote>'
        )
    body = (
        '<div class="heading"><h1>Privacy</h1><p class="lede">What one device\'s reports can'
        " reveal, in ε, over each window, with the SDK settings below (the SDK's defaults"
        " unless you change them).</p></div>"
        f'<section class="card">{form}{result}</section>'
    )
    return layout("Privacy", body, current="privacy")
