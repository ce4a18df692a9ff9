"""The breakdown page's "Over time": one share per slice per period, as small multiples on one
axis, each period's interval as a band (or a bar for a lone period).

The numbers are the series route's by slice (``GET /v1/metrics/{name}/series?by=platform``,
read through its query function): each period on its own, its intervals holding at once over its
categories and the slices shown in that period. A period where a slice is suppressed draws no
point for it (and no number); a slice suppressed in every period is named in one line. A
boolean draws its share of true, a categorical metric or a histogram its largest category (the
first the page draws); a numeric metric's slices are left to the series route. Past the series
cells limit the section says so and the rest of the page stands.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from markupsafe import Markup

from deniable.client.spec import MetricSpec

from ..context import collector
from ..queries.query import EstimateQuery
from ..queries.refusal import QueryRefused
from ..queries.series import series
from .charts import Line, Point, small_multiples
from .kindviews import view_of
from .templating import render


def _slice_series(
    request: Request, spec: MetricSpec, query: dict[str, Any], found: dict[str, Any]
) -> dict[str, Any]:
    """The series route's document for the page's range, slices and method."""
    where = tuple(f"{name}:{value}" for name, value in found["where"].items())
    chosen = EstimateQuery(
        spec.name,
        found["start"],
        found["end"],
        method=query["method"],
        by=tuple(found["by"]) or None,
        where=where,
    )
    return series(collector(request), chosen)


def section(
    request: Request,
    spec: MetricSpec,
    query: dict[str, Any],
    found: dict[str, Any],
    shown: list[str],
    name_of: Any,
) -> Markup:
    """The "Over time" card for the breakdown ``found``; ``name_of(values, where)`` names a
    slice as the page does."""
    view = view_of(spec)
    if not view.shares or not shown:
        return Markup()
    category = view.lead or shown[0]
    try:
        document = _slice_series(request, spec, query, found)
    except QueryRefused as exc:
        return render("slice_trend.html", problem=exc.detail)
    points = document["series"]
    periods = [point["period"] for point in points]
    names: list[str] = []
    drawn: dict[str, list[Point]] = {}
    for point in points:
        for row in point["slices"]:
            name = name_of(row["values"], document["where"])
            if name not in drawn:
                names.append(name)
                drawn[name] = []
            estimate = row["estimate"]
            entry = (
                None
                if estimate is None
                else next(r for r in estimate["estimates"] if r["category"] == category)
            )
            if entry is None or entry["frequency"] is None:
                drawn[name].append(Point(point["period"], None, 0.0, 0.0))
                continue
            value = min(1.0, max(0.0, entry["frequency"]))
            drawn[name].append(Point(point["period"], value, entry["ci_low"], entry["ci_high"]))
    lines = [
        Line(name, drawn[name])
        for name in names
        if any(p.estimate is not None for p in drawn[name])
    ]
    never = [name for name in names if all(p.estimate is None for p in drawn[name])]
    what = f"share of {category}"
    chart = (
        small_multiples(
            periods, lines, container_id="slice-trend-chart", caption=f"{spec.name}: {what}"
        )
        if lines
        else Markup()
    )
    return render(
        "slice_trend.html",
        problem=None,
        what=what,
        period=spec.period,
        chart=chart,
        never=never,
        min_reports=f"{document['min_slice_reports']:,}",
    )
