"""The dashboard's charts, drawn as SVG on the server: no script, no chart library, no request.

Each chart is a string of SVG markup with a ``viewBox`` (the stylesheet makes it as wide as its
container). Every mark carries its numbers in ``data-*`` attributes at full precision, so tests
and readers of the page source see exactly what was drawn; every text is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2563eb", "#d97706", "#0d9488", "#db2777", "#7c3aed", "#65a30d", "#dc2626", "#475569")
"""Series colours, the accent first; chosen to stay distinct for the common colour blindnesses
when told apart by the legend's order as well."""

ACCENT = PALETTE[0]
INK = "#0f172a"
MUTED = "#64748b"
GRID = "#e2e8f0"
BAR = "#bfd3fb"


def number(value: float | None) -> str:
    """A ``data-*`` value: the float's shortest exact text, empty for None."""
    return "" if value is None else repr(float(value))


def attr(value: object) -> str:
    """``value`` escaped for a double-quoted attribute."""
    return escape(str(value), quote=True)


def color(index: int) -> str:
    """The colour of the ``index``-th series."""
    return PALETTE[index % len(PALETTE)]


def share_text(value: float) -> str:
    """A share as a percentage for a tick or a label."""
    points = value * 100
    return f"{points:.0f}%" if abs(points - round(points)) < 1e-9 else f"{points:.1f}%"


def value_text(value: float) -> str:
    """A number in value units for a tick or a label."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


def nice_step(span: float, ticks: int = 5) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) giving about ``ticks`` intervals."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def share_axis(highest: float) -> tuple[float, list[float]]:
    """The top of a share axis covering ``highest`` (at most 1) and its ticks from 0."""
    top = min(1.0, max(highest, 0.01))
    step = nice_step(top)
    top = min(1.0, math.ceil(top / step - 1e-9) * step)
    count = round(top / step)
    return top, [min(1.0, i * step) for i in range(count + 1)]


def value_axis(low: float, high: float) -> tuple[float, float, list[float]]:
    """A value axis [bottom, top] covering low..high with round ticks."""
    if not high > low:
        high = low + 1.0
    step = nice_step(high - low)
    bottom = math.floor(low / step) * step
    top = math.ceil(high / step) * step
    count = round((top - bottom) / step)
    return bottom, top, [bottom + i * step for i in range(count + 1)]


@dataclass(frozen=True)
class Bar:
    """One category's estimate (clipped to [0, 1]; None without reports) and its interval."""

    category: str
    estimate: float | None
    low: float
    high: float


def bar_chart(bars: Sequence[Bar], *, svg_id: str, caption: str) -> str:
    """Horizontal bars, one per category, each with its interval as a dark whisker with caps.

    Category labels sit left of the bars, truncated (their full text in a ``<title>``).
    """
    width, label_width, right = 640, 150, 24
    row, top_pad, axis_height = 30, 8, 28
    x0, x1 = label_width + 8, width - right
    top, ticks = share_axis(max([b.high for b in bars] + [0.0]))
    height = top_pad + row * len(bars) + axis_height

    def x(value: float) -> float:
        return x0 + (x1 - x0) * min(max(value, 0.0), top) / top

    parts = [
        f'<svg id="{attr(svg_id)}" class="chart" viewBox="0 0 {width} {height}" role="img"'
        f' aria-label="{attr(caption)}">',
        f"<title>{escape(caption)}</title>",
    ]
    bottom = top_pad + row * len(bars)
    for tick in ticks:
        tx = x(tick)
        parts.append(
            f'<line class="grid" x1="{tx:.1f}" y1="{top_pad}" x2="{tx:.1f}" y2="{bottom}"'
            f' stroke="{GRID}" stroke-width="1"/>'
            f'<text class="tick" x="{tx:.1f}" y="{bottom + 18}" text-anchor="middle"'
            f' fill="{MUTED}" font-size="11">{share_text(tick)}</text>'
        )
    for i, bar in enumerate(bars):
        y = top_pad + i * row
        mid = y + row / 2
        label = bar.category if len(bar.category) <= 22 else bar.category[:21] + "…"
        estimate = 0.0 if bar.estimate is None else bar.estimate
        shown = "no reports" if bar.estimate is None else share_text(estimate)
        tip = f"{bar.category}: {shown}, interval {share_text(bar.low)} to {share_text(bar.high)}"
        parts.append(
            f'<g class="row"><title>{escape(tip)}</title>'
            f'<text class="label" x="{label_width}" y="{mid + 4:.1f}" text-anchor="end"'
            f' fill="{INK}" font-size="12">{escape(label)}</text>'
            f'<rect class="bar" data-category="{attr(bar.category)}"'
            f' data-estimate="{number(bar.estimate)}" x="{x0}" y="{y + 6}"'
            f' width="{max(x(estimate) - x0, 0.0):.2f}" height="{row - 12}" rx="2" fill="{BAR}"/>'
            f'<line class="whisker" data-category="{attr(bar.category)}"'
            f' data-low="{number(bar.low)}" data-high="{number(bar.high)}"'
            f' x1="{x(bar.low):.2f}" y1="{mid}" x2="{x(bar.high):.2f}" y2="{mid}"'
            f' stroke="{INK}" stroke-width="2"/>'
            f'<line class="cap" x1="{x(bar.low):.2f}" y1="{mid - 6}" x2="{x(bar.low):.2f}"'
            f' y2="{mid + 6}" stroke="{INK}" stroke-width="2"/>'
            f'<line class="cap" x1="{x(bar.high):.2f}" y1="{mid - 6}" x2="{x(bar.high):.2f}"'
            f' y2="{mid + 6}" stroke="{INK}" stroke-width="2"/>'
            f'<circle class="dot" cx="{x(estimate):.2f}" cy="{mid}" r="3.5" fill="{ACCENT}"/>'
            "</g>"
        )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Point:
    """One period's estimate (None without reports) and its interval."""

    period: str
    estimate: float | None
    low: float
    high: float


@dataclass(frozen=True)
class Line:
    """A series to draw: its name (None for a single unnamed series) and its points."""

    name: str | None
    points: Sequence[Point]


def _period_tick(label: str) -> str:
    """A period label short enough for an axis: a day without its year."""
    return label[5:] if len(label) == 10 else label


def time_chart(
    periods: Sequence[str],
    lines: Sequence[Line],
    *,
    svg_id: str,
    caption: str,
    shares: bool,
    value_name: str = "estimate",
) -> str:
    """Points over periods with the interval as a translucent band, one colour per line.

    ``shares`` puts the y axis on [0, top] in percent, else in value units around the data.
    Each point is a ``circle.point`` with ``data-period`` and ``data-<value_name>``,
    ``data-low``, ``data-high`` (and ``data-category`` for a named line); periods without
    reports get no point and break nothing (the band joins the periods that have one).
    """
    width, height = 640, 260
    left, right, top_pad, bottom_pad = 52, 16, 12, 36
    drawn = [p for line in lines for p in line.points if p.estimate is not None]
    if shares:
        top, ticks = share_axis(max([p.high for p in drawn] + [0.0]))
        bottom = 0.0
        tick_text = share_text
    else:
        lows = [p.low for p in drawn] or [0.0]
        highs = [p.high for p in drawn] or [1.0]
        bottom, top, ticks = value_axis(min(lows), max(highs))
        tick_text = value_text
    plot_bottom = height - bottom_pad
    count = max(len(periods), 1)
    index = {label: i for i, label in enumerate(periods)}

    def x(label: str) -> float:
        if count == 1:
            return (left + width - right) / 2
        return left + (width - right - left) * index[label] / (count - 1)

    def y(value: float) -> float:
        clamped = min(max(value, bottom), top)
        return plot_bottom - (plot_bottom - top_pad) * (clamped - bottom) / (top - bottom)

    parts = [
        f'<svg id="{attr(svg_id)}" class="chart" viewBox="0 0 {width} {height}" role="img"'
        f' aria-label="{attr(caption)}">',
        f"<title>{escape(caption)}</title>",
    ]
    for tick in ticks:
        ty = y(tick)
        parts.append(
            f'<line class="grid" x1="{left}" y1="{ty:.1f}" x2="{width - right}" y2="{ty:.1f}"'
            f' stroke="{GRID}" stroke-width="1"/>'
            f'<text class="tick" x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end"'
            f' fill="{MUTED}" font-size="11">{tick_text(tick)}</text>'
        )
    every = max(1, math.ceil(count / 7))
    for i, label in enumerate(periods):
        if i % every and i != count - 1:
            continue
        parts.append(
            f'<text class="tick" x="{x(label):.1f}" y="{plot_bottom + 18}" text-anchor="middle"'
            f' fill="{MUTED}" font-size="11">{escape(_period_tick(label))}</text>'
        )
    for n, line in enumerate(lines):
        stroke = color(n)
        points = [p for p in line.points if p.estimate is not None]
        named = f' data-category="{attr(line.name)}"' if line.name is not None else ""
        if points:
            upper = " L".join(f"{x(p.period):.2f},{y(p.high):.2f}" for p in points)
            lower = " L".join(f"{x(p.period):.2f},{y(p.low):.2f}" for p in reversed(points))
            parts.append(
                f'<path class="band"{named} d="M{upper} L{lower} Z" fill="{stroke}"'
                ' fill-opacity="0.14" stroke="none"/>'
            )
            trace = " L".join(f"{x(p.period):.2f},{y(p.estimate or 0.0):.2f}" for p in points)
            parts.append(
                f'<path class="line" d="M{trace}" fill="none" stroke="{stroke}"'
                ' stroke-width="2" stroke-linejoin="round"/>'
            )
        for p in points:
            value = p.estimate or 0.0
            shown = share_text(value) if shares else value_text(value)
            low = share_text(p.low) if shares else value_text(p.low)
            high = share_text(p.high) if shares else value_text(p.high)
            who = f"{line.name} " if line.name is not None else ""
            parts.append(
                f'<circle class="point"{named} data-period="{attr(p.period)}"'
                f' data-{value_name}="{number(p.estimate)}" data-low="{number(p.low)}"'
                f' data-high="{number(p.high)}" cx="{x(p.period):.2f}" cy="{y(value):.2f}"'
                f' r="3.5" fill="{stroke}" stroke="#ffffff" stroke-width="1.5">'
                f"<title>{escape(f'{who}{p.period}: {shown} ({low} to {high})')}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def sparkline(values: Sequence[float | None], *, label: str) -> str:
    """A small line of ``values`` (None: no reports that period), the last one marked."""
    width, height, pad = 120, 28, 3
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    parts = [
        f'<svg class="sparkline" viewBox="0 0 {width} {height}" role="img"'
        f' aria-label="{attr(label)}">'
        f"<title>{escape(label)}</title>"
    ]
    if known:
        low = min(v for _, v in known)
        high = max(v for _, v in known)
        span = high - low or 1.0
        count = max(len(values) - 1, 1)

        def xy(i: int, v: float) -> tuple[float, float]:
            return (
                pad + (width - 2 * pad) * i / count,
                height - pad - (height - 2 * pad) * (v - low) / span,
            )

        coords = [xy(i, v) for i, v in known]
        text = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
        last_x, last_y = coords[-1]
        parts.append(
            f'<polyline points="{text}" fill="none" stroke="{ACCENT}" stroke-width="1.5"'
            ' stroke-linejoin="round"/>'
            f'<circle cx="{last_x:.1f}" cy="{last_y:.1f}" r="2.5" fill="{ACCENT}"/>'
        )
    else:
        parts.append(
            f'<line x1="{pad}" y1="{height / 2}" x2="{width - pad}" y2="{height / 2}"'
            f' stroke="{GRID}" stroke-width="1.5" stroke-dasharray="3 3"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def swatch(index: int) -> str:
    """A small square of the ``index``-th series colour, for a legend."""
    return (
        '<svg class="swatch" viewBox="0 0 10 10" aria-hidden="true"'
        f'><rect width="10" height="10" rx="2"'
        f' fill="{color(index)}"/></svg>'
    )
