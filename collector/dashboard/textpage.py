"""A text metric's dashboard page: the strings found in one period, ranked by share, each with its
interval drawn as a bar, and the run's detection floor drawn as a line across them (SVG drawn
here, no script), from the API's own estimate document."""

from __future__ import annotations

from typing import Any

from deniable.client.spec import MetricSpec
from fastapi import Request

from ..routes.common import MetricPeriods
from ..routes.estimates import EstimateOptions, get_estimate
from .pages import cells, e, layout, pct, table

_WIDTH, _ROW, _LEFT = 640, 22, 180


def text_document(request: Request, spec: MetricSpec, end: str | None) -> dict[str, Any]:
    """The API's estimate document of the period ``end`` (default: the current one)."""
    read = MetricPeriods(name=spec.name, start=None, end=end)
    options = EstimateOptions(confidence=0.95, method=None, simultaneous=True)
    return get_estimate(request, read, options, pooling="overlap-safe", q=None)  # type: ignore[arg-type]


def ranked_chart(document: dict[str, Any]) -> str:
    """``svg#text-chart``: one row per string, its interval as a bar with a dot at the share,
    and the floor T95 as a dashed vertical line."""
    rows = document["strings"]
    floor = document["floor"]["t95"]
    top = max([floor if floor < 1 else 0.0, *(r["ci_high"] for r in rows), 0.01])
    span = _WIDTH - _LEFT - 20
    height = _ROW * max(1, len(rows)) + 30

    def x(share: float) -> float:
        return _LEFT + span * min(share, top) / top

    parts = [
        f'<svg id="text-chart" role="img" width="{_WIDTH}" height="{height}"'
        f' viewBox="0 0 {_WIDTH} {height}" aria-label="strings found, share with interval">'
    ]
    for i, row in enumerate(rows):
        y = 10 + i * _ROW
        parts.append(
            f'<text x="{_LEFT - 8}" y="{y + 12}" text-anchor="end">{e(row["value"])}</text>'
            f'<rect x="{x(row["ci_low"]):.1f}" y="{y + 4}" height="10"'
            f' width="{max(1.0, x(row["ci_high"]) - x(row["ci_low"])):.1f}" fill="#9ab"/>'
            f'<circle cx="{x(row["share"]):.1f}" cy="{y + 9}" r="4" fill="#246"/>'
        )
    if floor < 1:
        parts.append(
            f'<line id="floor-line" x1="{x(floor):.1f}" x2="{x(floor):.1f}" y1="4"'
            f' y2="{height - 20}" stroke-dasharray="4 3" stroke="#c33"/>'
            f'<text x="{x(floor):.1f}" y="{height - 6}" text-anchor="middle">floor {pct(floor)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _shares(row: dict[str, Any]) -> tuple[float, float, float]:
    return row["share"], row["ci_low"], row["ci_high"]


def text_page(spec: MetricSpec, document: dict[str, Any]) -> str:
    """The whole page: what the floor means, the ranked chart and its table view."""
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
    )
    return layout(spec.name, body)
