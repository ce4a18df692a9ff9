"""A text metric's breakdown page (``/dashboard/metrics/{name}/breakdown?by=platform``): each
slice's strings found in one period (``end``, default the current one), ranked by share with
their intervals and the slice's own floor; a suppressed slice is named under its note with no
number, not even its count.

The numbers are the estimate route's with ``by``/``where`` (``GET /v1/metrics/{name}/estimate``,
read through its query function as every page does), so the work is the API's, bounded the same way.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from markupsafe import Markup

from deniable.client.spec import MetricSpec

from ..context import collector
from ..queries.estimate import estimate
from ..queries.query import EstimateQuery
from .breakdownpage import chosen, csv_href, selector, slice_name, suppressed_note
from .charts import Bar, bar_chart
from .pages import metric_path, pct
from .templating import render


def document(request: Request, spec: MetricSpec, by: list[str], where: list[str]) -> dict[str, Any]:
    """The API's breakdown document of the period ``end`` of the page's query."""
    end = request.query_params.get("end") or None
    query = EstimateQuery(spec.name, end=end, by=tuple(by) or None, where=tuple(where))
    return estimate(collector(request), query)


def _figure(i: int, name: str, estimate: dict[str, Any], highest: float) -> dict[str, Any]:
    """One shown slice: its ranked strings with their whiskers and its floor line, its n, on
    the axis every slice shares (up to ``highest``)."""
    bars = [
        Bar(row["value"] + ("…" if row["truncated"] else ""), row["share"], *_interval(row))
        for row in estimate["strings"]
    ]
    floor = ("detection floor", estimate["floor"]["t95"])
    caption = f"{name}: strings found, each share with its interval; dashed: the slice's floor"
    return {
        "name": name,
        "wide": bar_chart(
            bars, svg_id=f"text-slice-{i}", caption=caption, threshold=floor, highest=highest
        ),
        "narrow": bar_chart(
            bars,
            svg_id=f"text-slice-{i}-narrow",
            caption=caption,
            threshold=floor,
            narrow=True,
            highest=highest,
        ),
        "empty": not bars,
        "n": f"{estimate['n']:,}",
        "t95": "none" if estimate["floor"]["t95"] >= 1 else pct(estimate["floor"]["t95"]),
    }


def _highest(slices: list[dict[str, Any]]) -> float:
    """The top of the axis every shown slice shares: its highest interval end or floor line
    (a floor of 1, no string findable, is not drawn)."""
    ends = [0.0]
    for row in slices:
        estimate = row["estimate"]
        if estimate is None:
            continue
        ends += [hit["ci_high"] for hit in estimate["strings"]]
        if estimate["floor"]["t95"] < 1:
            ends.append(estimate["floor"]["t95"])
    return max(ends)


def _interval(row: dict[str, Any]) -> tuple[float, float]:
    return row["ci_low"], row["ci_high"]


def page(spec: MetricSpec, request: Request, query: dict[str, Any]) -> Markup:
    """The whole page; :class:`~..queries.refusal.QueryRefused` as the API's (422 naming the
    problem)."""
    by, where = chosen(request, spec)
    found = document(request, spec, by, where)
    figures: list[dict[str, Any]] = []
    hidden: list[tuple[str, str]] = []
    rows: list[dict[str, Any]] = []
    highest = _highest(found["slices"])
    for i, row in enumerate(found["slices"]):
        name = slice_name(row["values"], found["where"])
        if row["estimate"] is None:
            hidden.append((name, row["note"] or "suppressed"))
            rows.append({"suppressed": True, "name": name, "note": row["note"]})
            continue
        figures.append(_figure(i + 1, name, row["estimate"], highest))
        n = f"{row['estimate']['n']:,}"
        for hit in row["estimate"]["strings"]:
            values = [name, hit["value"], n, *map(pct, (hit["share"], *_interval(hit)))]
            rows.append({"suppressed": False, "name": name, "cells": values})
    split = ", ".join(found["by"]) or "one slice"
    filtered = ", ".join(f"{k} = {v}" for k, v in found["where"].items())
    return render(
        "text_breakdown.html",
        spec=spec,
        path=metric_path(spec.name),
        what=f"by {split}" + (f" where {filtered}" if filtered else ""),
        end=found["end"],
        picker=selector(spec, query, found["by"], [f"{k}:{v}" for k, v in found["where"].items()]),
        level=f"{found['confidence'] * 100:g}%",
        min_reports=f"{found['min_slice_reports']:,}",
        figures=figures,
        hidden=suppressed_note(hidden),
        rows=rows,
        csv=csv_href(spec, request),
    )
