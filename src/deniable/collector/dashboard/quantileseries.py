"""A histogram metric page's quantiles over time: each period's quantile intervals.

The numbers are the series route's own (``GET /v1/metrics/{name}/series?q=...``, read through
its query function as every page does): each period's intervals from that period's reports alone,
jointly at 95% within the period. The page's ``quantiles`` field chooses them (default p50
and p90); the series route bounds periods × (buckets + quantiles) by
``DENIABLE_MAX_SERIES_CELLS``, a 422 naming it past that.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from markupsafe import Markup

from deniable.client.errors import InvalidInput
from deniable.client.spec import MetricSpec
from deniable.estimators import quantile_bounds
from deniable.estimators.choices import MAX_QUANTILES
from deniable.estimators.documents import window_n

from ..context import collector
from ..queries.query import QUANTILE_RULE, EstimateQuery
from ..queries.refusal import refuse
from ..queries.series import series
from .charts import NARROW, Line, Point, swatch, time_chart, value_text
from .pages import metric_path
from .templating import render

DEFAULT_QUANTILES = "0.5, 0.9"
"""The quantiles the page shows unless its form asks for others."""
FIELD = "quantiles"
"""The metric page's query parameter: quantiles separated by commas or spaces."""
MAX_FIELD_CHARS = 200
"""The longest ``quantiles`` text read (20 quantiles fit with room to spare)."""
KEPT = ("start", "end", "method", "pooling", "top")
"""The page's other choices, kept by the quantile form."""


def chosen_quantiles(text: str) -> list[float]:
    """The quantiles ``text`` lists (commas or spaces between them), each strictly between 0
    and 1, at most :data:`MAX_QUANTILES`; InvalidInput naming the problem."""
    parts = [part for part in text.replace(",", " ").split() if part]
    if not parts:
        raise InvalidInput("quantiles: give at least one, e.g. 0.5, 0.9")
    if len(parts) > MAX_QUANTILES:
        raise InvalidInput(f"quantiles: at most {MAX_QUANTILES} at once")
    return [float(QUANTILE_RULE.parse(part)) for part in parts]


def quantile_series(request: Request, spec: MetricSpec, query: dict[str, Any]) -> dict[str, Any]:
    """The API's series document with each period's quantiles for the page's range and the
    form's quantiles; :class:`~..queries.refusal.QueryRefused` (422) for a bad field or past
    the cells limit."""
    text = request.query_params.get(FIELD) or DEFAULT_QUANTILES
    try:
        if len(text) > MAX_FIELD_CHARS:
            raise InvalidInput(f"quantiles: at most {MAX_FIELD_CHARS} characters")
        qs = chosen_quantiles(text)
    except InvalidInput as exc:
        raise refuse(str(exc)) from None
    start, end = query["start"] or None, query["end"] or None
    chosen = EstimateQuery(spec.name, start, end, method=query["method"], quantiles=tuple(qs))
    return series(collector(request), chosen)


def _label(q: float) -> str:
    """p50 for 0.5."""
    return f"p{q * 100:g}"


def section(request: Request, spec: MetricSpec, query: dict[str, Any]) -> Markup:
    """The "Quantiles over time" card: its form, a band per quantile and the table."""
    document = quantile_series(request, spec, query)
    edges = document["edges"]
    points = document["series"]
    qs = [entry["q"] for entry in points[0]["quantiles"]] if points else []
    lines = []
    for i, q in enumerate(qs):
        drawn = []
        for point in points:
            if not point["n"]:
                continue
            entry = point["quantiles"][i]
            low, high = entry["low"], entry["high"]
            drawn.append(
                Point(
                    point["period"],
                    None,
                    edges[0] if low is None else low,
                    edges[-1] if high is None else high,
                    open_low=low is None,
                    open_high=high is None,
                )
            )
        lines.append(Line(_label(q), drawn))
    opened = sum(1 for line in lines for p in line.points if p.open_low or p.open_high)
    rows = [
        (
            point["period"],
            repr(entry["q"]),
            [
                point["period"],
                _label(entry["q"]),
                window_n(spec, point["n"]),
                *quantile_bounds(entry, edges, value_text),
            ],
        )
        for point in points
        for entry in point["quantiles"]
    ]
    level = f"{document['confidence'] * 100:g}%"
    unit = document.get("unit")
    axis = f"{spec.name} ({unit})" if unit else f"{spec.name} (no unit registered)"
    options: dict[str, Any] = {
        "caption": f"{spec.name}: quantile intervals per period ({level})",
        "shares": False,
        "bare": True,
        "y_title": axis,
        "x_title": f"{spec.period} (UTC)",
    }
    periods = [point["period"] for point in points]
    return render(
        "quantile_series.html",
        level=level,
        action=metric_path(spec.name),
        kept=[(key, query[key]) for key in KEPT if key in query],
        field=FIELD,
        chosen=", ".join(f"{q:g}" for q in qs) or DEFAULT_QUANTILES,
        max_chars=MAX_FIELD_CHARS,
        legend=[(swatch(i), _label(q)) for i, q in enumerate(qs)],
        wide=time_chart(periods, lines, svg_id="quantile-series-chart", **options),
        narrow=time_chart(
            periods, lines, svg_id="quantile-series-chart-narrow", frame=NARROW, **options
        ),
        rows=rows,
        opened=opened,
        unit=unit,
    )
