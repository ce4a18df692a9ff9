"""A metric's breakdown page (``/dashboard/metrics/{name}/breakdown?by=platform``): its
estimate per slice of its public dimensions in one chart on one shared axis, each interval as
a whisker, a table and the CSV.

The numbers are the estimate route's own (``GET /v1/metrics/{name}/estimate?by=...``, read
through its query function as every page does): every interval shown holds at once over every slice
and category, and a suppressed slice says "suppressed, fewer than N reports" with no number,
not even its count, in the chart, the table and the CSV alike. Work is the API's, bounded the
same way (422 naming ``DENIABLE_MAX_ESTIMATE_CELLS``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from markupsafe import Markup

from deniable.client.spec import OTHER, MetricSpec
from deniable.estimators.documents import counted_n

from ..context import collector
from ..queries import estimate as estimates
from ..queries.query import EstimateQuery
from ..queries.refusal import QueryRefused, refuse
from . import data, emptystate, slicediff, slicetrend
from .charts import (
    Canvas,
    chart,
    fit_text,
    share_axis,
    share_text,
    text_width,
    value_axis,
    value_text,
)
from .data import shown_categories
from .kindviews import view_of
from .pages import metric_path, pct, pooled_note
from .templating import render

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
) -> dict[str, Any]:
    """The GET form choosing the dimension(s) to split by and a filter per dimension, as the
    template's ``selector`` takes it; it keeps the metric page's range, method and pooling."""
    names = [name for name, _ in spec.dimensions]
    first = by[0] if by else ""
    second = by[1] if len(by) > 1 else ""
    fields = [
        ("break down by", "by", [("", "(none)")] + [(n, n) for n in names], first),
        ("then by", "by", [("", "(none)")] + [(n, n) for n in names], second),
    ]
    filters = dict(item.partition(":")[::2] for item in where)
    for name, values in spec.dimensions:
        options = [("", "any")] + [(f"{name}:{v}", v) for v in (*values, OTHER)]
        current = f"{name}:{filters[name]}" if name in filters else ""
        fields.append((f"where {name}", "where", options, current))
    return {
        "action": breakdown_path(spec.name),
        "kept": [(key, query[key]) for key in KEPT if query.get(key)],
        "fields": fields,
    }


def entry_card(spec: MetricSpec, query: dict[str, Any]) -> Markup:
    """The metric page's "Breakdown" card: the selector, leading to the breakdown page."""
    if not spec.dimensions:
        return Markup()
    return render(
        "breakdown_entry.html",
        names=", ".join(name for name, _ in spec.dimensions),
        picker=selector(spec, query, [spec.dimensions[0][0]], []),
    )


@dataclass(frozen=True)
class SliceFrame:
    """The per-slice chart's box: width, font, room for a category's label, row heights."""

    width: int
    font: int
    label_room: int
    row: int
    head: int


SLICES_WIDE = SliceFrame(640, 12, 150, 24, 20)
"""The per-slice chart for a container wider than the phone breakpoint."""
SLICES_NARROW = SliceFrame(340, 13, 96, 26, 22)
"""The per-slice chart for a phone."""
TICK_GAP = 8
"""The least room between two tick labels of the shared axis (SVG units)."""


def axis_labels(
    ticks: Sequence[float], x: Any, text: Any, font: int, width: int
) -> list[dict[str, Any]]:
    """The shared axis's ticks, each labelled only where its label clears the one before it
    by :data:`TICK_GAP` (no "40%50%"), the first and the last kept inside the chart."""
    out: list[dict[str, Any]] = []
    right_of_last = -math.inf
    for value in ticks:
        tx = x(value)
        label = text(value)
        half = text_width(label, font) / 2
        anchor = "middle"
        left, right = tx - half, tx + half
        if left < 0:
            anchor, left, right = "start", tx, tx + 2 * half
        elif right > width:
            anchor, left, right = "end", tx - 2 * half, tx
        shown = left >= right_of_last + TICK_GAP
        if shown:
            right_of_last = right
        out.append({"x": f"{tx:.1f}", "text": label if shown else None, "anchor": anchor})
    return out


def slices_chart(
    groups: Sequence[dict[str, Any]],
    *,
    svg_id: str,
    caption: str,
    shares: bool,
    axis: tuple[float, float, list[float]],
    frame: SliceFrame,
) -> Markup:
    """Every shown slice in one chart on one shared axis: per slice (``g.slice``) a line with
    its name and n, then a row per category (label, bar to the estimate, whisker with caps
    over the interval) or, for a mean, a dot and whisker; the tick labels once, at the bottom,
    thinned so that none collide. A slice of one row draws no category label (the slice's line
    names it), so its bar gets the width."""
    bottom, top, ticks = axis
    font = frame.font
    single = all(len(group["rows"]) <= 1 for group in groups)
    x0 = 8 if single else frame.label_room + 8
    x1 = frame.width - 18
    text = share_text if shares else value_text

    def x(value: float) -> float:
        return x0 + (x1 - x0) * (min(max(value, bottom), top) - bottom) / (top - bottom)

    y = 4.0
    drawn = []
    for group in groups:
        head_y = y + font
        rows = []
        y += frame.head
        for category, estimate, low, high in group["rows"]:
            mid = y + frame.row / 2
            shown = "no reports" if estimate is None else text(estimate)
            rows.append(
                {
                    "category": category,
                    "label": None if single else fit_text(category, font, frame.label_room),
                    "tip": f"{group['name']}, {category}: {shown}, interval {text(low)} to"
                    f" {text(high)}",
                    "label_y": f"{mid + font / 3:.1f}",
                    "y": f"{mid - (frame.row - 10) / 2:.1f}",
                    "mid": mid,
                    "estimate": estimate,
                    "low": low,
                    "high": high,
                    "bar_width": (
                        f"{max(x(estimate) - x0, 0.0):.2f}"
                        if shares and estimate is not None
                        else None
                    ),
                    "x_low": f"{x(low):.2f}",
                    "x_high": f"{x(high):.2f}",
                    "x_estimate": "" if estimate is None else f"{x(estimate):.2f}",
                }
            )
            y += frame.row
        heading = f"{group['name']} · n = {group['n']}"
        drawn.append(
            {
                "name": group["name"],
                "heading": fit_text(heading, font, frame.width),
                "full": heading,
                "head_y": f"{head_y:.1f}",
                "rows": rows,
                "rule_y": f"{y + 3:.1f}",
            }
        )
        y += 6
    plot_bottom = y
    height = plot_bottom + 2 * font + 16
    kind = "wide-chart" if frame is SLICES_WIDE else "narrow-chart"
    return chart(
        "charts/slices.svg",
        Canvas(svg_id, kind, frame.width, f"{height:.0f}", caption, font),
        top_pad=4,
        plot_bottom=f"{plot_bottom:.1f}",
        tick_y=f"{plot_bottom + font + 4:.1f}",
        axis_title="share of reports" if shares else "mean",
        axis_x=f"{(x0 + x1) / 2:.1f}",
        axis_y=f"{plot_bottom + 2 * font + 12:.1f}",
        x0=x0,
        bar_height=frame.row - 10,
        ticks=axis_labels(ticks, x, text, font, frame.width),
        groups=drawn,
    )


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
    if not view_of(spec).shares:
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


def multiples(
    spec: MetricSpec, document: dict[str, Any], shown: Sequence[str]
) -> tuple[dict[str, Markup] | None, list[tuple[str, str]]]:
    """The per-slice chart (wide and for a phone: every shown slice on one shared axis), None
    when no slice is shown, and the suppressed slices with their notes (no number of theirs)."""
    where = document["where"]
    drawn = [_rows(spec, row["estimate"], shown) for row in document["slices"] if row["estimate"]]
    points = [point for rows in drawn for point in rows]
    shares = view_of(spec).shares
    if shares:
        high, ticks = share_axis(max([p[3] for p in points] + [0.0]))
        axis: tuple[float, float, list[float]] = (0.0, high, ticks)
    else:
        axis = value_axis(
            min([p[2] for p in points] or [0.0]), max([p[3] for p in points] or [1.0])
        )
    groups, hidden = [], []
    for row in document["slices"]:
        name = slice_name(row["values"], where)
        if row["estimate"] is None:
            hidden.append((name, row["note"] or "suppressed"))
            continue
        estimate = row["estimate"]
        n = counted_n(estimate)
        groups.append({"name": name, "n": n, "rows": _rows(spec, estimate, shown)})
    if not groups:
        return None, hidden
    caption = f"{spec.name} per slice: estimates with their simultaneous intervals, one axis"
    options: dict[str, Any] = {"caption": caption, "shares": shares, "axis": axis}
    chart = {
        "wide": slices_chart(groups, svg_id="slices-chart", frame=SLICES_WIDE, **options),
        "narrow": slices_chart(
            groups, svg_id="slices-chart-narrow", frame=SLICES_NARROW, **options
        ),
    }
    return chart, hidden


def suppressed_note(hidden: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """The suppressed slices grouped under their notes, each note capitalized ("Suppressed,
    fewer than 100 reports": web, other), for the template's ``suppressed_note``."""
    notes = dict.fromkeys(note for _, note in hidden)
    return [
        (note[:1].upper() + note[1:], [name for name, said in hidden if said == note])
        for note in notes
    ]


def breakdown_table(
    spec: MetricSpec, document: dict[str, Any], shown: Sequence[str]
) -> list[dict[str, Any]]:
    """The table view's rows: one per slice and category drawn (a mean: per slice); a
    suppressed slice is one row, its note under its name."""
    show = pct if view_of(spec).shares else value_text
    rows: list[dict[str, Any]] = []
    for row in document["slices"]:
        name = slice_name(row["values"], document["where"])
        if row["estimate"] is None:
            rows.append({"suppressed": True, "name": name, "note": row["note"]})
            continue
        n = counted_n(row["estimate"])
        for category, estimate, low, high in _rows(spec, row["estimate"], shown):
            values = [name, category, n, "—" if estimate is None else show(estimate)]
            rows.append(
                {"suppressed": False, "name": name, "cells": [*values, show(low), show(high)]}
            )
    return rows


def csv_href(spec: MetricSpec, request: Request) -> str:
    """The breakdown CSV's link for the page's own query."""
    params = [(key, value) for key, value in request.query_params.multi_items() if value]
    return f"{breakdown_path(spec.name)}.csv?{urlencode(params)}"


def page(spec: MetricSpec, request: Request, query: dict[str, Any]) -> Markup:
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
    view = view_of(spec)
    kind = view.breakdown_what(spec, shown)
    chart, hidden = multiples(spec, found, shown)
    empty = None
    if chart is None:  # every slice suppressed: no reports at all gets the empty state
        whole = data.estimate(request, spec, found["start"], found["end"])
        if not whole["n"]:
            empty = emptystate.card(spec, found["start"], found["end"])
    return render(
        "breakdown.html",
        spec=spec,
        path=metric_path(spec.name),
        what=what,
        found=found,
        query=query,
        picker=selector(spec, query, found["by"], [f"{k}:{v}" for k, v in found["where"].items()]),
        kind=kind,
        level=level,
        each=each,
        min_reports=f"{found['min_slice_reports']:,}",
        chart=chart,
        hidden=suppressed_note(hidden),
        shares=view.shares,
        headers=(
            "slice",
            "category" if view.shares else "mean",
            "n",
            "estimate",
            "low",
            "high",
        ),
        rows=breakdown_table(spec, found, shown),
        csv=csv_href(spec, request),
        pooled=pooled_note(
            spec.period,
            found["start"],
            found["end"],
            found.get("pooling", query["pooling"]),
            breakdown_path(spec.name),
            request.query_params.multi_items(),
        ),
        empty=empty,
        compared="" if empty else slicediff.card(spec, request, found, problem),
        trend="" if empty else slicetrend.section(request, spec, query, found, shown, slice_name),
    )
