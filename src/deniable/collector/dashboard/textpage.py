"""A text metric's dashboard page: the strings found in one period, ranked by share, each with its
interval drawn as a bar, and the run's detection floor drawn as a line across them (SVG drawn
here, no script), from the API's own estimate document."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from deniable.client.spec import MetricSpec

from ..context import collector
from ..queries.estimate import estimate
from ..queries.query import EstimateQuery
from .charts import Bar, bar_chart
from .pages import cells, e, layout, pair, pct, table


def text_document(request: Request, spec: MetricSpec, end: str | None) -> dict[str, Any]:
    """The API's estimate document of the period ``end`` (default: the current one)."""
    return estimate(collector(request), EstimateQuery(spec.name, end=end))


def ranked_chart(document: dict[str, Any]) -> str:
    """``svg#text-chart`` (and its phone twin): one bar per string found, largest first, its
    interval as a whisker, and the floor T95 as a dashed line across them."""
    bars = [
        Bar(row["value"] + ("…" if row["truncated"] else ""), *_shares(row))
        for row in document["strings"]
    ]
    floor = ("detection floor", document["floor"]["t95"])
    caption = "strings found: share of reports with its interval; dashed: the detection floor"
    return pair(
        bar_chart(bars, svg_id="text-chart", caption=caption, threshold=floor),
        bar_chart(bars, svg_id="text-chart-narrow", caption=caption, threshold=floor, narrow=True),
    )


def _shares(row: dict[str, Any]) -> tuple[float, float, float]:
    return row["share"], row["ci_low"], row["ci_high"]


def text_page(spec: MetricSpec, document: dict[str, Any], entry: str = "") -> str:
    """The whole page: what the floor means, the ranked chart and its table view; ``entry``
    the breakdown card of a metric with dimensions."""
    floor = document["floor"]
    t95 = "none: no string can be found" if floor["t95"] >= 1 else pct(floor["t95"])
    note = (
        f'<p id="floor-note">n = {document["n"]:,} reports in {e(document["end"])}. Every string'
        f" held by at least {t95} of this period's devices is listed with probability 0.95, and"
        " with probability 0.95 none listed is absent; a rarer string may be missed, and one"
        " held by few devices is never listed.</p>"
    )
    if document["cap_bound"]:
        note += '<p class="error" id="cap-bound">The survivor cap bound: the guarantee does not hold.</p>'
    rows = [
        f"<tr>{cells([r['value'] + ('…' if r['truncated'] else ''), *map(pct, _shares(r))])}</tr>"
        for r in document["strings"]
    ]
    body = (
        f'<section class="card"><h1>{e(spec.name)}</h1>'
        f"<p>{e(spec.type)} · {e(spec.mechanism)} · ε = {spec.epsilon:g} · per {e(spec.period)}"
        f" · {e(spec.domain)}</p>{note}{ranked_chart(document)}"
        + table("text-table", ["string", "share", "low", "high"], rows)
        + "</section>"
        + entry
    )
    return layout(spec.name, body)
