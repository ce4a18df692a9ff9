"""A text metric's dashboard page: the strings found in one period, ranked by share, each with its
interval drawn as a bar, and the run's detection floor drawn as a line across them (SVG drawn
here, no script), from the API's own estimate document."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from markupsafe import Markup

from deniable.client.spec import MetricSpec

from ..context import collector
from ..queries.estimate import estimate
from ..queries.query import EstimateQuery
from .charts import Bar, bar_chart
from .pages import pct
from .templating import render


def text_document(request: Request, spec: MetricSpec, end: str | None) -> dict[str, Any]:
    """The API's estimate document of the period ``end`` (default: the current one)."""
    return estimate(collector(request), EstimateQuery(spec.name, end=end))


def ranked_chart(document: dict[str, Any]) -> tuple[Markup, Markup]:
    """``svg#text-chart`` and its phone twin: one bar per string found, largest first, its
    interval as a whisker, and the floor T95 as a dashed line across them."""
    bars = [
        Bar(row["value"] + ("…" if row["truncated"] else ""), *_shares(row))
        for row in document["strings"]
    ]
    floor = ("detection floor", document["floor"]["t95"])
    caption = "strings found: share of reports with its interval; dashed: the detection floor"
    return (
        bar_chart(bars, svg_id="text-chart", caption=caption, threshold=floor),
        bar_chart(bars, svg_id="text-chart-narrow", caption=caption, threshold=floor, narrow=True),
    )


def _shares(row: dict[str, Any]) -> tuple[float, float, float]:
    """A string's share and its interval."""
    return row["share"], row["ci_low"], row["ci_high"]


def text_page(spec: MetricSpec, document: dict[str, Any], entry: Markup | str = "") -> Markup:
    """The whole page: what the floor means, the ranked chart and its table view; ``entry``
    the breakdown card of a metric with dimensions (markup a template built)."""
    floor = document["floor"]
    wide, narrow = ranked_chart(document)
    return render(
        "text.html",
        spec=spec,
        epsilon=f"{spec.epsilon:g}",
        n=f"{document['n']:,}",
        end=document["end"],
        t95="none: no string can be found" if floor["t95"] >= 1 else pct(floor["t95"]),
        cap_bound=document["cap_bound"],
        wide=wide,
        narrow=narrow,
        rows=[
            [r["value"] + ("…" if r["truncated"] else ""), *map(pct, _shares(r))]
            for r in document["strings"]
        ],
        entry=entry,
    )
