"""A text metric's dashboard page: the strings found in one period, ranked by share, each with its
interval drawn as a bar, and the run's detection floor drawn as a line across them (SVG drawn
here, no script), from the API's own estimate document; a picker for the period, its CSV, and
the periods before it (reports, floor and strings found per period, from the series document)."""

from __future__ import annotations

import csv
import io
from typing import Any

from fastapi import Request
from markupsafe import Markup

from deniable.client.spec import MetricSpec
from deniable.estimators.choices import periods_back

from ..context import collector
from ..queries.estimate import estimate
from ..queries.limits import categories_of
from ..queries.query import EstimateQuery
from ..queries.series import series
from .charts import Bar, bar_chart
from .pages import interval_pcts, metric_path, pct
from .templating import render

HISTORY_PERIODS = 7
"""Periods the page's view over time lists, ending at the period shown."""
HISTORY_STRINGS = 5
"""Strings each period of the view over time names (the largest shares first)."""


def text_document(request: Request, spec: MetricSpec, end: str | None) -> dict[str, Any]:
    """The API's estimate document of the period ``end`` (default: the current one)."""
    return estimate(collector(request), EstimateQuery(spec.name, end=end))


def history_document(request: Request, spec: MetricSpec, end: str) -> dict[str, Any]:
    """The API's series document of the :data:`HISTORY_PERIODS` periods up to ``end`` (fewer
    where the estimate cells limit allows fewer of this metric's sketches)."""
    fits = collector(request).settings.max_estimate_cells // categories_of(spec)
    start = periods_back(spec.period, end, max(1, min(HISTORY_PERIODS, fits)))
    return series(collector(request), EstimateQuery(spec.name, start=start, end=end))


def shown_text(row: dict[str, Any]) -> str:
    """A found string as shown (an ellipsis when the sketch cut it at its maximum length)."""
    return row["value"] + ("…" if row["truncated"] else "")


def above_floor(document: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The strings found whose estimated share reaches the floor (the chart's), and those
    found below it (listed apart: a bar left of the floor line would read as a contradiction)."""
    t95 = document["floor"]["t95"]
    above = [r for r in document["strings"] if r["share"] >= t95]
    below = [r for r in document["strings"] if r["share"] < t95]
    return above, below


def ranked_chart(document: dict[str, Any]) -> tuple[Markup, Markup]:
    """``svg#text-chart`` and its phone twin: one bar per string found at or above the floor,
    largest first, its interval as a whisker, and the floor T95 as a dashed line across them."""
    above, _ = above_floor(document)
    bars = [Bar(shown_text(row), *_shares(row)) for row in above]
    floor = ("detection floor", document["floor"]["t95"])
    caption = "strings found: share of reports with its interval; dashed: the detection floor"
    return (
        bar_chart(bars, svg_id="text-chart", caption=caption, threshold=floor),
        bar_chart(bars, svg_id="text-chart-narrow", caption=caption, threshold=floor, narrow=True),
    )


def _shares(row: dict[str, Any]) -> tuple[float, float, float]:
    """A string's share and its interval."""
    return row["share"], row["ci_low"], row["ci_high"]


def _floor_text(t95: float) -> str:
    """The floor as the page says it."""
    return "none: no string can be found" if t95 >= 1 else pct(t95)


def history_rows(spec: MetricSpec, history: dict[str, Any]) -> list[dict[str, Any]]:
    """The view over time, newest first: per period its reports, floor and strings found
    (the :data:`HISTORY_STRINGS` largest), linked to that period's page."""
    rows = []
    for point in reversed(history["series"]):
        found = sorted(point["strings"], key=lambda r: -r["share"])
        names = [shown_text(r) for r in found[:HISTORY_STRINGS]]
        more = len(found) - len(names)
        rows.append(
            {
                "period": point["end"],
                "href": f"{metric_path(spec.name)}?end={point['end']}",
                "n": f"{point['n']:,}",
                "floor": _floor_text(point["floor"]["t95"]) if point["n"] else "—",
                "found": len(found),
                "names": ", ".join(names) + (f" and {more:,} more" if more > 0 else ""),
            }
        )
    return rows


def text_csv(document: dict[str, Any]) -> str:
    """The strings found in the page's period as CSV: string, share, its interval, whether
    the sketch cut it, and whether its share reaches the floor."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["period", "string", "truncated", "share", "ci_low", "ci_high", "floor_t95"])
    t95 = document["floor"]["t95"]
    for row in document["strings"]:
        writer.writerow(
            [
                document["end"],
                row["value"],
                "true" if row["truncated"] else "false",
                repr(row["share"]),
                repr(row["ci_low"]),
                repr(row["ci_high"]),
                repr(t95),
            ]
        )
    return out.getvalue()


def text_page(
    spec: MetricSpec,
    document: dict[str, Any],
    entry: Markup | str = "",
    history: dict[str, Any] | None = None,
    arrival: dict[str, Any] | None = None,
) -> Markup:
    """The whole page: the period picker, what the floor means, the ranked chart with its
    legend and its table view, the strings found below the floor, the CSV, the periods before;
    ``entry`` the breakdown card of a metric with dimensions (markup a template built)."""
    floor = document["floor"]
    wide, narrow = ranked_chart(document)
    above, below = above_floor(document)
    path = metric_path(spec.name)
    return render(
        "text.html",
        spec=spec,
        path=path,
        epsilon=f"{spec.epsilon:g}",
        n=f"{document['n']:,}",
        end=document["end"],
        date_input=spec.period == "day",
        t95=_floor_text(floor["t95"]),
        cap_bound=document["cap_bound"],
        wide=wide,
        narrow=narrow,
        rows=[[shown_text(r), *interval_pcts(*_shares(r))] for r in above],
        below=[[shown_text(r), *interval_pcts(*_shares(r))] for r in below],
        csv_href=f"{path}/strings.csv?end={document['end']}",
        history=history_rows(spec, history) if history is not None else [],
        entry=entry,
        arrival=arrival,
    )
