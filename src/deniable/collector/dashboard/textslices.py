"""A text metric's breakdown page (``/dashboard/metrics/{name}/breakdown?by=platform``): each
slice's strings found in one period (``end``, default the current one), ranked by share with
their intervals and the slice's own floor; a suppressed slice is named under its note with no
number, not even its count.

The numbers are the estimate route's with ``by``/``where`` (``GET /v1/metrics/{name}/estimate``,
read through its query function as every page does), so the work is the API's, bounded the same way.
"""

from __future__ import annotations

from html import escape
from typing import Any

from fastapi import Request

from deniable.client.spec import MetricSpec

from ..context import collector
from ..queries.estimate import estimate
from ..queries.query import EstimateQuery
from .breakdownpage import (
    chosen,
    csv_href,
    selector,
    slice_name,
    suppressed_note,
    suppressed_row,
)
from .charts import Bar, attr, bar_chart
from .pages import breakable, cells, e, layout, metric_path, pair, pct, table


def document(request: Request, spec: MetricSpec, by: list[str], where: list[str]) -> dict[str, Any]:
    """The API's breakdown document of the period ``end`` of the page's query."""
    end = request.query_params.get("end") or None
    query = EstimateQuery(spec.name, end=end, by=tuple(by) or None, where=tuple(where))
    return estimate(collector(request), query)


def _figure(i: int, name: str, estimate: dict[str, Any]) -> str:
    """One shown slice: its ranked strings with their whiskers and its floor line, its n."""
    bars = [
        Bar(row["value"] + ("…" if row["truncated"] else ""), row["share"], *_interval(row))
        for row in estimate["strings"]
    ]
    floor = ("detection floor", estimate["floor"]["t95"])
    caption = f"{name}: strings found, each share with its interval; dashed: the slice's floor"
    chart = pair(
        bar_chart(bars, svg_id=f"text-slice-{i}", caption=caption, threshold=floor),
        bar_chart(
            bars, svg_id=f"text-slice-{i}-narrow", caption=caption, threshold=floor, narrow=True
        ),
    )
    t95 = "none" if estimate["floor"]["t95"] >= 1 else pct(estimate["floor"]["t95"])
    found = "" if bars else "<p>No string found above the floor.</p>"
    return (
        f'<figure class="slice text-slice" data-slice="{attr(name)}"><h3>{escape(name)}</h3>{chart}{found}'
        f'<figcaption class="meta">n = {estimate["n"]:,} reports · floor T95 {t95}'
        "</figcaption></figure>"
    )


def _interval(row: dict[str, Any]) -> tuple[float, float]:
    return row["ci_low"], row["ci_high"]


def page(spec: MetricSpec, request: Request, query: dict[str, Any]) -> str:
    """The whole page; :class:`~..queries.refusal.QueryRefused` as the API's (422 naming the
    problem)."""
    by, where = chosen(request, spec)
    found = document(request, spec, by, where)
    figures, hidden, rows = [], [], []
    for i, row in enumerate(found["slices"]):
        name = slice_name(row["values"], found["where"])
        if row["estimate"] is None:
            hidden.append((name, row["note"] or "suppressed"))
            rows.append(suppressed_row(name, row["note"], 5))
            continue
        figures.append(_figure(i + 1, name, row["estimate"]))
        n = f"{row['estimate']['n']:,}"
        for hit in row["estimate"]["strings"]:
            values = [name, hit["value"], n, *map(pct, (hit["share"], *_interval(hit)))]
            rows.append(f'<tr data-slice="{attr(name)}">{cells(values, numeric_from=2)}</tr>')
    split = ", ".join(found["by"]) or "one slice"
    filtered = ", ".join(f"{k} = {v}" for k, v in found["where"].items())
    what = f"by {split}" + (f" where {filtered}" if filtered else "")
    head = (
        '<div class="heading"><p class="crumb"><a href="/dashboard/">Overview</a> /'
        f' <a href="{e(metric_path(spec.name))}">{breakable(spec.name)}</a> /</p>'
        f"<h1>{breakable(spec.name)} {e(what)}</h1>"
        f'<p class="lede">{e(found["end"])} · heavy hitters per slice</p></div>'
        + selector(spec, query, found["by"], [f"{k}:{v}" for k, v in found["where"].items()])
    )
    level = f"{found['confidence'] * 100:g}%"
    grid = f'<div id="breakdown-multiples">{"".join(figures)}</div>'
    section = (
        '<section class="card"><div class="card-head"><h2>Per slice</h2>'
        f'<p class="meta">The strings found in each slice in {e(found["end"])}, with'
        f" <strong>simultaneous {level} intervals</strong> over every slice and string shown;"
        " every string held by at least a slice's floor of its reports is listed with"
        " probability 0.95, and with probability 0.95 no slice lists a string it does not hold."
        f" A slice with fewer than {found['min_slice_reports']:,} reports is suppressed and"
        " shows no number.</p></div>"
        + (grid if figures else "")
        + suppressed_note(hidden)
        + table(
            "breakdown-table",
            ("slice", "string", "n", "share", "low", "high"),
            rows,
            numeric_from=2,
        )
        + f'<p class="actions"><a id="breakdown-csv" class="csv" href="{e(csv_href(spec, request))}"'
        " download>Download CSV</a> (every string of every slice)</p></section>"
    )
    return layout(f"{spec.name} {what}", head + section)
