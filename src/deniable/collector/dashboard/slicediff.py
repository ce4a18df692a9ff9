"""The breakdown page's comparison of two slices: first minus second per category (or mean),
each difference with its interval drawn as a whisker across a zero line, and the API's plain
verdict ("higher", "lower", "no detectable change at 95%").

The numbers are the estimate route's ``compare`` (``GET /v1/metrics/{name}/estimate?by=platform
&compare=ios,android``): the difference intervals hold at once with every slice interval
shown. The page's two fields ``first`` and ``second`` name the slices (values of the one
``by`` dimension); a suppressed slice cannot be compared (the API's 422, no number).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

from fastapi import Request

from deniable.client.spec import OTHER, MetricSpec

from ..queries.refusal import refuse
from .charts import (
    ACCENT,
    GRID,
    INK,
    MUTED,
    WARN,
    attr,
    fit_text,
    nice_step,
    number,
    text_width,
    value_text,
)
from .pages import cells, e, pair, table

FIELDS = ("first", "second")
"""The page's query fields naming the two slices to compare."""


def chosen_pair(request: Request, by: Sequence[str]) -> str | None:
    """The API's ``compare`` (``ios,android``) from the page's ``first`` and ``second``, or
    None when neither is given; 422 naming the problem otherwise."""
    first, second = (request.query_params.get(name, "") for name in FIELDS)
    if not first and not second:
        return None
    if len(first) > 32 or len(second) > 32 or not first or not second:
        raise refuse("compare: choose two slices, first and second")
    if len(by) != 1:
        raise refuse("compare: break down by one dimension to compare two slices")
    return f"{first},{second}"


def form(spec: MetricSpec, request: Request, document: dict[str, Any]) -> str:
    """The GET form choosing two slices of the one ``by`` dimension (the page's other choices
    kept); nothing unless the breakdown is by one dimension."""
    if len(document["by"]) != 1:
        return ""
    name = document["by"][0]
    values = [*dict(spec.dimensions)[name], OTHER]
    shown = [row["values"][name] for row in document["slices"] if not row["suppressed"]]
    compared = document.get("comparison")
    defaults = (
        [compared["first"][name], compared["second"][name]] if compared else (shown + values)[:2]
    )
    kept = "".join(
        f'<input type="hidden" name="{e(key)}" value="{e(value)}">'
        for key, value in request.query_params.multi_items()
        if key not in FIELDS and value
    )
    selects = "".join(
        f'<label>{label}<select name="{field}">'
        + "".join(
            f'<option value="{e(v)}"{" selected" if v == default else ""}>{e(v)}</option>'
            for v in values
        )
        + "</select></label>"
        for label, field, default in (
            ("compare", "first", defaults[0]),
            ("with", "second", defaults[1]),
        )
    )
    return (
        f'<form id="compare-picker" method="get" action="">{kept}{selects}'
        '<button type="submit">Compare</button></form>'
    )


def _symmetric_axis(rows: Sequence[dict[str, Any]]) -> tuple[float, list[float]]:
    """A half-width m covering every interval, and the ticks of [-m, m]."""
    reach = max([abs(row["ci_low"]) for row in rows] + [abs(row["ci_high"]) for row in rows])
    step = nice_step(max(reach, 1e-9), 3)
    half = math.ceil(max(reach, 1e-9) / step - 1e-9) * step
    count = round(half / step)
    return half, [i * step for i in range(-count, count + 1)]


def points_text(value: float) -> str:
    """A difference of two shares in percentage points: ``+3.2 pts``."""
    return f"{value * 100:+.1f} pts"


def axis_points(value: float) -> str:
    """A tick of the difference axis in percentage points (the axis title says so): ``+20``."""
    return f"{value * 100:+.3g}"


def signed_value(value: float) -> str:
    """A difference of two means in value units, with its sign."""
    return ("+" if value > 0 else "") + value_text(value)


def difference_chart(
    rows: Sequence[dict[str, Any]], *, shares: bool, caption: str, narrow: bool = False
) -> str:
    """``svg#difference-chart`` (``…-narrow``, for a phone): a row per category, its difference
    a dot on a whisker over its interval, a vertical line at zero; a whisker clear of zero is
    drawn in the warning colour (a detectable difference)."""
    width, font, row_h, label_room = (340, 13, 30, 96) if narrow else (640, 12, 28, 180)
    x0, x1, top_pad = label_room + 12, width - 24, 8
    bottom = top_pad + row_h * len(rows)
    height = bottom + 2 * font + 18
    half, ticks = _symmetric_axis(rows)
    text = points_text if shares else signed_value

    def x(value: float) -> float:
        return x0 + (x1 - x0) * (min(max(value, -half), half) + half) / (2 * half)

    svg_id, kind = ("difference-chart-narrow", "narrow") if narrow else ("difference-chart", "wide")
    parts = [
        f'<svg id="{svg_id}" class="chart {kind}-chart" viewBox="0 0 {width} {height}"'
        f' role="img" aria-label="{attr(caption)}"><title>{escape(caption)}</title>'
    ]
    every = max(1, math.ceil(len(ticks) / 5))
    tick_text = axis_points if shares else signed_value
    for i, tick in enumerate(ticks):
        tx = x(tick)
        stroke = INK if tick == 0 else GRID
        parts.append(
            f'<line class="{"zero" if tick == 0 else "grid"}" x1="{tx:.1f}" y1="{top_pad}"'
            f' x2="{tx:.1f}" y2="{bottom}" stroke="{stroke}" stroke-width="1"/>'
        )
        if (i - len(ticks) // 2) % every == 0:
            label = "0" if tick == 0 else tick_text(tick)
            anchor = "end" if tx + text_width(label, font) / 2 > width else "middle"
            parts.append(
                f'<text class="tick" x="{tx:.1f}" y="{bottom + font + 6}"'
                f' text-anchor="{anchor}" fill="{MUTED}" font-size="{font}">{escape(label)}</text>'
            )
    for i, row in enumerate(rows):
        mid = top_pad + i * row_h + row_h / 2
        detectable = row["ci_low"] > 0 or row["ci_high"] < 0
        stroke = WARN if detectable else INK
        low, high = x(row["ci_low"]), x(row["ci_high"])
        tip = (
            f"{row['category']}: {text(row['difference'])}, interval {text(row['ci_low'])} to"
            f" {text(row['ci_high'])}, {row['verdict']}"
        )
        parts.append(
            f'<g class="row"><title>{escape(tip)}</title>'
            f'<text class="label" x="0" y="{mid + font / 3:.1f}" fill="{INK}" font-size="{font}">'
            f"{escape(fit_text(row['category'], font, label_room))}</text>"
            f'<line class="whisker" data-category="{attr(row["category"])}"'
            f' data-low="{number(row["ci_low"])}" data-high="{number(row["ci_high"])}"'
            f' x1="{low:.2f}" y1="{mid}" x2="{high:.2f}" y2="{mid}" stroke="{stroke}"'
            ' stroke-width="2"/>'
            f'<line class="cap" x1="{low:.2f}" y1="{mid - 6}" x2="{low:.2f}" y2="{mid + 6}"'
            f' stroke="{stroke}" stroke-width="2"/>'
            f'<line class="cap" x1="{high:.2f}" y1="{mid - 6}" x2="{high:.2f}" y2="{mid + 6}"'
            f' stroke="{stroke}" stroke-width="2"/>'
            f'<circle class="dot" data-difference="{number(row["difference"])}"'
            f' cx="{x(row["difference"]):.2f}" cy="{mid}" r="3.5" fill="{ACCENT}"/></g>'
        )
    axis = "difference in percentage points" if shares else "difference of the means"
    parts.append(
        f'<text class="axis-title" x="{(x0 + x1) / 2:.1f}" y="{bottom + 2 * font + 14}"'
        f' text-anchor="middle" fill="{MUTED}" font-size="{font}">{axis}</text></svg>'
    )
    return "".join(parts)


def verdict_text(row: dict[str, Any], first: str, second: str) -> str:
    """The API's verdict in a sentence's words: "ios higher than android"."""
    if row["verdict"] in ("higher", "lower"):
        return f"{first} {row['verdict']} than {second}"
    return row["verdict"]


def card(
    spec: MetricSpec, request: Request, document: dict[str, Any], problem: str | None = None
) -> str:
    """The "Compare two slices" card: its form and, once two slices are chosen, the chart and
    table of their differences, or ``problem`` (why the API refused to compare them)."""
    chooser = form(spec, request, document)
    if not chooser:
        return ""
    compared = document.get("comparison")
    result = f'<p class="error" role="alert">{e(problem)}</p>' if problem else ""
    if compared:
        name = document["by"][0]
        first, second = compared["first"][name], compared["second"][name]
        shares = spec.type != "numeric"
        text = points_text if shares else signed_value
        rows = compared["rows"]
        if spec.type == "boolean":
            rows = [row for row in rows if row["category"] == "true"]
        level = f"{compared['confidence'] * 100:g}%"
        caption = f"{spec.name}: {first} minus {second} with {level} intervals"
        table_rows = [
            f'<tr data-category="{attr(row["category"])}">'
            + cells(
                [
                    row["category"],
                    text(row["difference"]),
                    text(row["ci_low"]),
                    text(row["ci_high"]),
                    verdict_text(row, first, second),
                ],
                numeric_from=1,
            )
            + "</tr>"
            for row in rows
        ]
        result = (
            f'<p class="meta" id="comparison-meta">{e(first)} minus {e(second)}: each interval'
            f" holds at once with every slice interval above ({level}); one clear of zero is a"
            " detectable difference.</p>"
            + pair(
                difference_chart(rows, shares=shares, caption=caption),
                difference_chart(rows, shares=shares, caption=caption, narrow=True),
            )
            + table(
                "comparison-table",
                ("category", "difference", "low", "high", "verdict"),
                table_rows,
            )
        )
    return (
        '<section class="card" id="comparison"><div class="card-head"><h2>Compare two slices'
        "</h2></div>" + chooser + result + "</section>"
    )
