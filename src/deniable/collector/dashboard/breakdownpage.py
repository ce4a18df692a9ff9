"""A metric's breakdown page (``/dashboard/metrics/{name}/breakdown?by=platform``): its
estimate per slice of its public dimensions as small multiples, one small chart per slice
with each interval as a whisker, a table and the CSV.

The numbers are the estimate route's own (``GET /v1/metrics/{name}/estimate?by=...``, read
through its query function as every page does): every interval shown holds at once over every slice
and category, and a suppressed slice says "suppressed, fewer than N reports" with no number,
not even its count, in the chart, the table and the CSV alike. Work is the API's, bounded the
same way (422 naming ``DENIABLE_MAX_ESTIMATE_CELLS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any
from urllib.parse import urlencode

from fastapi import Request

from deniable.client.spec import OTHER, MetricSpec

from ..context import collector
from ..queries import estimate as estimates
from ..queries.query import EstimateQuery
from ..queries.refusal import QueryRefused, refuse
from . import slicediff, slicetrend
from .charts import (
    ACCENT,
    BAR,
    GRID,
    INK,
    MUTED,
    attr,
    fit_text,
    number,
    share_axis,
    share_text,
    value_axis,
    value_text,
)
from .data import shown_categories
from .pages import breakable, cells, e, layout, metric_path, pct, table

MAX_FIELDS = 16
"""The most ``by`` plus ``where`` values one page request may carry (the API allows 2 ``by``
and one ``where`` per dimension; anything past this is refused before any work)."""
KEPT = ("start", "end", "method", "pooling", "top")
"""The metric page's choices the breakdown keeps."""


def breakdown_path(name: str) -> str:
    """The path of a metric's breakdown page."""
    return f"{metric_path(name)}/breakdown"


def chosen(request: Request, spec: MetricSpec) -> tuple[list[str], list[str]]:
    """The ``by`` dimensions and ``where`` filters the query asks for (empty fields dropped; no
    choice at all: by the first dimension); 422 past :data:`MAX_FIELDS` values."""
    params = request.query_params
    by = [value for value in params.getlist("by") if value]
    where = [value for value in params.getlist("where") if value]
    if len(params.getlist("by")) + len(params.getlist("where")) > MAX_FIELDS:
        raise refuse(f"at most {MAX_FIELDS} by and where fields at once")
    if not spec.dimensions:
        raise refuse(f"metric {spec.name} has no dimensions to break it down by")
    if not by and not where:
        by = [spec.dimensions[0][0]]
    return by, where


def document(
    request: Request,
    spec: MetricSpec,
    query: dict[str, Any],
    by: list[str],
    where: list[str],
    compare: str | None = None,
) -> dict[str, Any]:
    """The API's breakdown document for the page's range, method and pooling (with the two
    ``compare`` slices' differences, if given)."""
    chosen = EstimateQuery(
        spec.name,
        query["start"] or None,
        query["end"] or None,
        method=query["method"],
        pooling=query["pooling"],
        by=tuple(by) or None,
        where=tuple(where),
        compare=compare,
    )
    return estimates.estimate(collector(request), chosen)


def slice_name(values: dict[str, str], where: dict[str, str]) -> str:
    """A slice's title: its values (``ios``, ``ios · fr``), or its filter when it is the one
    filtered slice."""
    if values:
        return " · ".join(values.values())
    return ", ".join(f"{name} = {value}" for name, value in where.items()) or "all"


def selector(
    spec: MetricSpec, query: dict[str, Any], by: Sequence[str], where: Sequence[str]
) -> str:
    """The GET form choosing the dimension(s) to split by and a filter per dimension; it keeps
    the metric page's range, method and pooling."""
    names = [name for name, _ in spec.dimensions]

    def choice(label: str, field: str, options: Sequence[tuple[str, str]], current: str) -> str:
        items = "".join(
            f'<option value="{e(value)}"{" selected" if value == current else ""}>{e(text)}'
            "</option>"
            for value, text in options
        )
        return f'<label>{e(label)}<select name="{field}">{items}</select></label>'

    first = by[0] if by else ""
    second = by[1] if len(by) > 1 else ""
    fields = [
        choice("break down by", "by", [("", "(none)")] + [(n, n) for n in names], first),
        choice("then by", "by", [("", "(none)")] + [(n, n) for n in names], second),
    ]
    filters = dict(item.partition(":")[::2] for item in where)
    for name, values in spec.dimensions:
        options = [("", "any")] + [(f"{name}:{v}", v) for v in (*values, OTHER)]
        current = f"{name}:{filters[name]}" if name in filters else ""
        fields.append(choice(f"where {name}", "where", options, current))
    kept = "".join(
        f'<input type="hidden" name="{key}" value="{e(query[key])}">'
        for key in KEPT
        if query.get(key)
    )
    return (
        f'<form id="breakdown-picker" method="get" action="{e(breakdown_path(spec.name))}">'
        f'{kept}{"".join(fields)}<button type="submit">Break down</button></form>'
    )


def entry_card(spec: MetricSpec, query: dict[str, Any]) -> str:
    """The metric page's "Breakdown" card: the selector, leading to the breakdown page."""
    if not spec.dimensions:
        return ""
    names = ", ".join(name for name, _ in spec.dimensions)
    return (
        '<section class="card" id="breakdown-entry"><div class="card-head"><h2>Breakdown</h2>'
        f'<p class="meta">The estimate per slice of its public dimensions ({e(names)}), every'
        " interval holding at once.</p></div>"
        + selector(spec, query, [spec.dimensions[0][0]], [])
        + "</section>"
    )


ROW = 26
"""A slice chart's row height (SVG units)."""
WIDTH = 300
"""A slice chart's width: one cell of the small-multiples grid (at least 17rem wide)."""
FONT = 13
LABEL_ROOM = 96
"""Room for a category's label, left of its bar."""


def slice_chart(
    rows: Sequence[tuple[str, float | None, float, float]],
    *,
    svg_id: str,
    caption: str,
    title: str,
    shares: bool,
    axis: tuple[float, float, list[float]],
) -> str:
    """One slice's small chart: a row per category (label, bar to the estimate, whisker with
    caps over the interval) or, for a mean, a dot and whisker on the value axis; ``axis``
    (bottom, top, ticks) is shared by every slice so that they compare at a glance."""
    bottom, top, ticks = axis
    x0, x1 = LABEL_ROOM + 8, WIDTH - 16
    top_pad = FONT + 10
    plot_bottom = top_pad + ROW * len(rows)
    height = plot_bottom + FONT + 12

    def x(value: float) -> float:
        return x0 + (x1 - x0) * (min(max(value, bottom), top) - bottom) / (top - bottom)

    tick = share_text if shares else value_text
    parts = [
        f'<svg id="{attr(svg_id)}" class="chart slice-chart" viewBox="0 0 {WIDTH} {height}"'
        f' role="img" aria-label="{attr(caption)}"><title>{escape(caption)}</title>',
        f'<text class="title" x="0" y="{FONT}" fill="{INK}" font-size="{FONT}"'
        f' font-weight="600">{escape(fit_text(title, FONT, WIDTH))}<title>{escape(title)}</title>'
        "</text>",
    ]
    every = max(1, (len(ticks) + 3) // 4)
    for i, value in enumerate(ticks):
        tx = x(value)
        parts.append(
            f'<line class="grid" x1="{tx:.1f}" y1="{top_pad}" x2="{tx:.1f}" y2="{plot_bottom}"'
            f' stroke="{GRID}" stroke-width="1"/>'
        )
        if i % every == 0 or i == len(ticks) - 1:
            anchor = "end" if i == len(ticks) - 1 else "middle"
            parts.append(
                f'<text class="tick" x="{tx:.1f}" y="{plot_bottom + FONT + 4}"'
                f' text-anchor="{anchor}" fill="{MUTED}" font-size="{FONT}">{tick(value)}</text>'
            )
    for i, (category, estimate, low, high) in enumerate(rows):
        y = top_pad + i * ROW
        mid = y + ROW / 2
        label = fit_text(category, FONT, LABEL_ROOM)
        shown = "no reports" if estimate is None else tick(estimate)
        tip = f"{title}, {category}: {shown}, interval {tick(low)} to {tick(high)}"
        parts.append(
            f'<g class="row"><title>{escape(tip)}</title>'
            f'<text class="label" x="0" y="{mid + FONT / 3:.1f}" fill="{INK}"'
            f' font-size="{FONT}">{escape(label)}<title>{escape(category)}</title></text>'
        )
        if shares and estimate is not None:
            parts.append(
                f'<rect class="bar" data-category="{attr(category)}"'
                f' data-estimate="{number(estimate)}" x="{x0}" y="{y + 5}"'
                f' width="{max(x(estimate) - x0, 0.0):.2f}" height="{ROW - 10}" rx="2"'
                f' fill="{BAR}"/>'
            )
        parts.append(
            f'<line class="whisker" data-category="{attr(category)}"'
            f' data-low="{number(low)}" data-high="{number(high)}" x1="{x(low):.2f}"'
            f' y1="{mid}" x2="{x(high):.2f}" y2="{mid}" stroke="{INK}" stroke-width="2"/>'
            f'<line class="cap" x1="{x(low):.2f}" y1="{mid - 5}" x2="{x(low):.2f}"'
            f' y2="{mid + 5}" stroke="{INK}" stroke-width="2"/>'
            f'<line class="cap" x1="{x(high):.2f}" y1="{mid - 5}" x2="{x(high):.2f}"'
            f' y2="{mid + 5}" stroke="{INK}" stroke-width="2"/>'
        )
        if estimate is not None:
            parts.append(
                f'<circle class="dot" data-estimate="{number(estimate)}" cx="{x(estimate):.2f}"'
                f' cy="{mid}" r="3.5" fill="{ACCENT}"/>'
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _rows(
    spec: MetricSpec, estimate: dict[str, Any], shown: Sequence[str]
) -> list[tuple[str, float | None, float, float]]:
    """A shown slice's rows to draw: its mean, or its ``shown`` categories' shares (clipped
    to [0, 1] as the metric page draws them)."""
    if "mean" in estimate:
        mean = estimate["mean"]
        return [("mean", mean["estimate"], mean["ci_low"], mean["ci_high"])]
    out = []
    for row in estimate["estimates"]:
        if row["category"] in shown:
            value = row["frequency"]
            clipped = None if value is None else min(1.0, max(0.0, value))
            out.append((row["category"], clipped, row["ci_low"], row["ci_high"]))
    return out


def _categories(spec: MetricSpec, document: dict[str, Any], top: int) -> list[str]:
    """The categories each slice draws: as the metric page chooses them, from the average of
    the shown slices' shares."""
    if spec.type == "numeric":
        return ["mean"]
    totals: dict[str, float] = {}
    for row in document["slices"]:
        for entry in (row["estimate"] or {}).get("estimates", []):
            totals[entry["category"]] = totals.get(entry["category"], 0.0) + (
                entry["frequency"] or 0.0
            )
    combined = {
        "estimates": [{"category": c, "frequency": totals.get(c, 0.0)} for c in spec.categories]
    }
    return shown_categories(spec, combined, top)


def multiples(spec: MetricSpec, document: dict[str, Any], shown: Sequence[str]) -> str:
    """The grid: one figure per shown slice, its chart and its n; then the suppressed slices,
    named in one line under their note (no number of theirs)."""
    where = document["where"]
    drawn = [_rows(spec, row["estimate"], shown) for row in document["slices"] if row["estimate"]]
    points = [point for rows in drawn for point in rows]
    shares = spec.type != "numeric"
    if shares:
        high, ticks = share_axis(max([p[3] for p in points] + [0.0]))
        axis: tuple[float, float, list[float]] = (0.0, high, ticks)
    else:
        axis = value_axis(
            min([p[2] for p in points] or [0.0]), max([p[3] for p in points] or [1.0])
        )
    figures, hidden = [], []
    for i, row in enumerate(document["slices"]):
        name = slice_name(row["values"], where)
        if row["estimate"] is None:
            hidden.append((name, row["note"] or "suppressed"))
            continue
        estimate = row["estimate"]
        caption = f"{spec.name}, {name}: estimate with its simultaneous interval"
        chart = slice_chart(
            _rows(spec, estimate, shown),
            svg_id=f"slice-chart-{i + 1}",
            caption=caption,
            title=name,
            shares=shares,
            axis=axis,
        )
        figures.append(
            f'<figure class="slice" data-slice="{attr(name)}">{chart}'
            f'<figcaption class="meta">n = {estimate["n"]:,} reports</figcaption></figure>'
        )
    grid = f'<div id="breakdown-multiples" class="multiples">{"".join(figures)}</div>'
    return (grid if figures else "") + suppressed_note(hidden)


def suppressed_note(hidden: Sequence[tuple[str, str]]) -> str:
    """One line naming the suppressed slices under their note ("suppressed, fewer than 100
    reports: web, other"), with no number of theirs; nothing if none is."""
    if not hidden:
        return ""
    notes = dict.fromkeys(note for _, note in hidden)
    lines = []
    for note in notes:
        names = ", ".join(
            f'<span class="slice-name" data-slice="{attr(name)}">{escape(name)}</span>'
            for name, said in hidden
            if said == note
        )
        lines.append(f"{escape(note[:1].upper() + note[1:])}: {names}.")
    return f'<p class="suppressed-note" id="suppressed-slices">{" ".join(lines)}</p>'


def suppressed_row(name: str, note: str | None, columns: int) -> str:
    """A suppressed slice's table row: its name with its note under it, in the first column
    (on a narrow screen the other ``columns`` scroll sideways; the note must stay in view),
    and no number."""
    return (
        f'<tr class="suppressed" data-slice="{attr(name)}"><th scope="row">{escape(name)}'
        f'<span class="sub">{escape(note or "suppressed")}</span></th>'
        f'<td colspan="{columns}"></td></tr>'
    )


def breakdown_table(spec: MetricSpec, document: dict[str, Any], shown: Sequence[str]) -> str:
    """The table view: a row per slice and category drawn (a mean: per slice); a suppressed
    slice is one row, its note under its name (:func:`suppressed_row`)."""
    numeric = spec.type == "numeric"
    show = value_text if numeric else pct
    rows = []
    for row in document["slices"]:
        name = slice_name(row["values"], document["where"])
        if row["estimate"] is None:
            rows.append(suppressed_row(name, row["note"], 5))
            continue
        n = f"{row['estimate']['n']:,}"
        for category, estimate, low, high in _rows(spec, row["estimate"], shown):
            values = [name, category, n, "—" if estimate is None else show(estimate)]
            rows.append(
                f'<tr data-slice="{attr(name)}">'
                + cells([*values, show(low), show(high)], numeric_from=2)
                + "</tr>"
            )
    headers = ("slice", "mean" if numeric else "category", "n", "estimate", "low", "high")
    return table("breakdown-table", headers, rows, numeric_from=2)


def csv_href(spec: MetricSpec, request: Request) -> str:
    """The breakdown CSV's link for the page's own query."""
    params = [(key, value) for key, value in request.query_params.multi_items() if value]
    return f"{breakdown_path(spec.name)}.csv?{urlencode(params)}"


def page(spec: MetricSpec, request: Request, query: dict[str, Any]) -> str:
    """The whole breakdown page; :class:`~..queries.refusal.QueryRefused` as the API's (422
    naming the problem)."""
    by, where = chosen(request, spec)
    pair = slicediff.chosen_pair(request, by)
    problem = None
    try:
        found = document(request, spec, query, by, where, pair)
    except QueryRefused as exc:
        if pair is None:
            raise
        problem = exc.detail
        found = document(request, spec, query, by, where)
    shown = _categories(spec, found, query["top"])
    level = f"{found['confidence'] * 100:g}%"
    each = f"{found['slice_confidence'] * 100:.4g}%"
    split = ", ".join(found["by"]) or "one slice"
    filtered = ", ".join(f"{k} = {v}" for k, v in found["where"].items())
    what = f"by {split}" + (f" where {filtered}" if filtered else "")
    every = len(shown) == spec.k
    kind = {
        "boolean": "The share of true",
        "numeric": "The mean",
        "histogram": "Each bucket's share" if every else "The largest buckets",
    }.get(spec.type, "Each category's share" if every else f"The top {len(shown)} categories")
    head = (
        '<div class="heading"><p class="crumb"><a href="/dashboard/">Overview</a> /'
        f' <a href="{e(metric_path(spec.name))}">{breakable(spec.name)}</a> /</p>'
        f"<h1>{breakable(spec.name)} {e(what)}</h1>"
        f'<p class="lede">{e(found["start"])} to {e(found["end"])} ·'
        f" {e(query['method'])} · {e(query['pooling'])}</p></div>"
        + selector(spec, query, found["by"], [f"{k}:{v}" for k, v in found["where"].items()])
    )
    section = (
        '<section class="card"><div class="card-head"><h2>Per slice</h2>'
        f'<p class="meta">{e(kind)} in each slice, on one axis, with <strong>simultaneous'
        f" {level} intervals</strong>: every interval shown holds at once (each slice's at"
        f" {each}). A slice with fewer than {found['min_slice_reports']:,} reports is"
        " suppressed and shows no number.</p></div>"
        + multiples(spec, found, shown)
        + (
            '<p class="key"><span class="key-bar"></span>estimate'
            ' <span class="key-whisker"></span>interval</p>'
            if spec.type != "numeric"
            else ""
        )
        + breakdown_table(spec, found, shown)
        + f'<p class="actions"><a id="breakdown-csv" class="csv" href="{e(csv_href(spec, request))}"'
        " download>Download CSV</a> (every category of every slice)</p></section>"
    )
    compared = slicediff.card(spec, request, found, problem)
    trend = slicetrend.section(request, spec, query, found, shown, slice_name)
    return layout(f"{spec.name} {what}", head + section + compared + trend)
