"""The breakdown page's comparison of two slices: first minus second per category (or mean),
each difference with its interval drawn as a whisker across a zero line, and the API's plain
verdict across slices ("ios higher than android", "lower", "no detectable difference at 95%":
the API's "change" is between periods, so across slices the word is "difference").

The numbers are the estimate route's ``compare`` (``GET /v1/metrics/{name}/estimate?by=platform
&compare=ios,android``): the difference intervals hold at once with every slice interval
shown. The page's two fields ``first`` and ``second`` name the slices (values of the one
``by`` dimension); a suppressed slice cannot be compared (the API's 422, no number).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fastapi import Request
from markupsafe import Markup

from deniable.client.spec import OTHER, MetricSpec

from ..queries.refusal import refuse
from .charts import (
    GRID,
    INK,
    WARN,
    Canvas,
    Plot,
    chart,
    fit_text,
    nice_step,
    text_width,
    value_text,
)
from .kindviews import view_of
from .pages import POOLING_HELP
from .templating import render

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


def form(spec: MetricSpec, request: Request, document: dict[str, Any]) -> dict[str, Any] | None:
    """The GET form choosing two slices of the one ``by`` dimension (the page's other choices
    kept), as the card's template takes it; None unless the breakdown is by one dimension."""
    if len(document["by"]) != 1:
        return None
    name = document["by"][0]
    values = [*dict(spec.dimensions)[name], OTHER]
    shown = [row["values"][name] for row in document["slices"] if not row["suppressed"]]
    compared = document.get("comparison")
    defaults = (
        [compared["first"][name], compared["second"][name]] if compared else (shown + values)[:2]
    )
    return {
        "kept": [
            (key, value)
            for key, value in request.query_params.multi_items()
            if key not in FIELDS and value
        ],
        "values": values,
        "selects": [("compare", "first", defaults[0]), ("with", "second", defaults[1])],
    }


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
) -> Markup:
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
    every = max(1, math.ceil(len(ticks) / 5))
    tick_text = axis_points if shares else signed_value
    drawn_ticks = []
    for i, tick in enumerate(ticks):
        tx = x(tick)
        label = None
        anchor = "middle"
        if (i - len(ticks) // 2) % every == 0:
            label = "0" if tick == 0 else tick_text(tick)
            anchor = "end" if tx + text_width(label, font) / 2 > width else "middle"
        drawn_ticks.append(
            {
                "x": f"{tx:.1f}",
                "kind": "zero" if tick == 0 else "grid",
                "stroke": INK if tick == 0 else GRID,
                "text": label,
                "anchor": anchor,
            }
        )
    drawn_rows = []
    for i, row in enumerate(rows):
        mid = top_pad + i * row_h + row_h / 2
        detectable = row["ci_low"] > 0 or row["ci_high"] < 0
        drawn_rows.append(
            {
                "category": row["category"],
                "label": fit_text(row["category"], font, label_room),
                "label_y": f"{mid + font / 3:.1f}",
                "tip": (
                    f"{row['category']}: {text(row['difference'])}, interval"
                    f" {text(row['ci_low'])} to {text(row['ci_high'])}, {across_slices(row['verdict'])}"
                ),
                "mid": mid,
                "stroke": WARN if detectable else INK,
                "low": row["ci_low"],
                "high": row["ci_high"],
                "difference": row["difference"],
                "x_low": f"{x(row['ci_low']):.2f}",
                "x_high": f"{x(row['ci_high']):.2f}",
                "x_difference": f"{x(row['difference']):.2f}",
            }
        )
    return chart(
        "charts/difference.svg",
        Canvas(svg_id, kind, width, height, caption, font),
        plot=Plot(x0, x1, top_pad, bottom),
        ticks=drawn_ticks,
        rows=drawn_rows,
        axis_title="difference in percentage points" if shares else "difference of the means",
    )


def verdict_text(row: dict[str, Any], first: str, second: str) -> str:
    """The API's verdict in a sentence's words across slices: "ios higher than android", or
    "no detectable difference at 95%" (two slices differ; they do not change)."""
    if row["verdict"] in ("higher", "lower"):
        return f"{first} {row['verdict']} than {second}"
    return across_slices(row["verdict"])


def across_slices(verdict: str) -> str:
    """The API's verdict with the word across slices: "no detectable difference at 95%"."""
    return verdict.replace("no detectable change", "no detectable difference")


def card(
    spec: MetricSpec, request: Request, document: dict[str, Any], problem: str | None = None
) -> Markup:
    """The "Compare two slices" card: its form and, once two slices are chosen, the chart and
    table of their differences, or ``problem`` (why the API refused to compare them)."""
    chooser = form(spec, request, document)
    if chooser is None:
        return Markup()
    compared = document.get("comparison")
    shown = None
    if compared:
        name = document["by"][0]
        first, second = compared["first"][name], compared["second"][name]
        view = view_of(spec)
        shares = view.shares
        text = points_text if shares else signed_value
        rows = compared["rows"]
        if view.lead is not None:
            rows = [row for row in rows if row["category"] == view.lead]
        level = f"{compared['confidence'] * 100:g}%"
        caption = f"{spec.name}: {first} minus {second} with {level} intervals"
        shown = {
            "pooled": document["start"] != document["end"],
            "help": POOLING_HELP,
            "first": first,
            "second": second,
            "level": level,
            "wide": difference_chart(rows, shares=shares, caption=caption),
            "narrow": difference_chart(rows, shares=shares, caption=caption, narrow=True),
            "rows": [
                (
                    row["category"],
                    [
                        row["category"],
                        text(row["difference"]),
                        text(row["ci_low"]),
                        text(row["ci_high"]),
                        verdict_text(row, first, second),
                    ],
                )
                for row in rows
            ],
        }
    return render("slice_compare.html", **chooser, compared=shown, problem=problem)
