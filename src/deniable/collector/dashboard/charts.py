"""The dashboard's charts, drawn as SVG on the server: no script, no chart library, no request.

Each chart is a string of SVG markup with a ``viewBox`` (the stylesheet makes it as wide as its
container). Every mark carries its numbers in ``data-*`` attributes at full precision, so tests
and readers of the page source see exactly what was drawn; every text is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2563eb", "#d97706", "#0d9488", "#db2777", "#7c3aed", "#65a30d", "#dc2626", "#475569")
"""Series colours, the accent first; chosen to stay distinct for the common colour blindnesses."""

ACCENT = PALETTE[0]
INK = "#0f172a"
MUTED = "#64748b"
GRID = "#e2e8f0"
BAR = "#bfd3fb"
WARN = PALETTE[6]


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


NARROW_GLYPHS = frozenset("fijlrtI.,:;!|'()[]{} ")
WIDE_GLYPHS = frozenset("mwMW@%")


def text_width(text: str, size: float) -> float:
    """A generous estimate of ``text``'s width at font ``size`` in the system sans-serif: the
    server cannot measure text, so labels are fitted to this upper bound."""
    em = 0.0
    for char in text:
        if char in NARROW_GLYPHS:
            em += 0.36
        elif char in WIDE_GLYPHS:
            em += 0.95
        elif ord(char) > 0x2E7F:
            em += 1.0
        elif char.isupper() or char.isdigit():
            em += 0.7
        else:
            em += 0.6
    return em * size


def fit_text(text: str, size: float, room: float) -> str:
    """``text``, or its longest start that fits ``room`` with an ellipsis at the end."""
    if text_width(text, size) <= room:
        return text
    for stop in range(len(text) - 1, 0, -1):
        short = text[:stop].rstrip() + "…"
        if text_width(short, size) <= room:
            return short
    return "…"


@dataclass(frozen=True)
class Frame:
    """A chart's box in SVG units, its text size, its margins and the most period labels its
    x axis holds. The stylesheet scales the box to its container, so each frame is made for
    one range of container widths: text stays at least 10 CSS px where it is shown."""

    width: int
    height: int
    font: int
    left: int
    right: int
    top: int
    bottom: int
    x_labels: int


WIDE = Frame(640, 290, 12, 58, 18, 30, 56, 8)
"""Charts for a container wider than the phone breakpoint (the stylesheet's 720 px)."""
NARROW = Frame(340, 260, 13, 50, 14, 30, 56, 4)
"""Charts for a phone: about as many units as CSS pixels at 375 px."""
MULTIPLE = Frame(300, 196, 13, 48, 14, 30, 30, 3)
"""One of a grid of small multiples (the grid's cells are at least 17rem wide)."""


@dataclass(frozen=True)
class Bar:
    """One category's estimate (clipped to [0, 1]; None without reports) and its interval."""

    category: str
    estimate: float | None
    low: float
    high: float


def bar_chart(
    bars: Sequence[Bar],
    *,
    svg_id: str,
    caption: str,
    narrow: bool = False,
    axis_title: str = "share of reports",
    threshold: tuple[str, float] | None = None,
) -> str:
    """Horizontal bars, one per category, each with its interval as a dark whisker with caps;
    ``threshold`` (its name and share) is drawn as a dashed vertical line across them.

    Wide, category labels sit left of the bars; narrow (a phone), each label sits on its own
    line above its bar. A label too long for its room ends in an ellipsis, the full text in its
    ``<title>``; it never runs outside the chart.
    """
    font = NARROW.font if narrow else WIDE.font
    width = NARROW.width if narrow else WIDE.width
    row, top_pad = (46, 6) if narrow else (30, 8)
    label_room = width - 8 if narrow else 196
    x0, x1 = (14, width - 22) if narrow else (label_room + 12, width - 24)
    marked = [threshold[1]] if threshold is not None and threshold[1] < 1 else []
    top, ticks = share_axis(max([b.high for b in bars] + marked + [0.0]))
    bottom = top_pad + row * len(bars)
    height = bottom + 26 + font + 10

    def x(value: float) -> float:
        return x0 + (x1 - x0) * min(max(value, 0.0), top) / top

    kind = "narrow-chart" if narrow else "wide-chart"
    parts = [
        f'<svg id="{attr(svg_id)}" class="chart {kind}" viewBox="0 0 {width} {height}"'
        f' role="img" aria-label="{attr(caption)}">',
        f"<title>{escape(caption)}</title>",
    ]
    for tick in ticks:
        tx = x(tick)
        parts.append(
            f'<line class="grid" x1="{tx:.1f}" y1="{top_pad}" x2="{tx:.1f}" y2="{bottom}"'
            f' stroke="{GRID}" stroke-width="1"/>'
            f'<text class="tick" x="{tx:.1f}" y="{bottom + font + 6}" text-anchor="middle"'
            f' fill="{MUTED}" font-size="{font}">{share_text(tick)}</text>'
        )
    parts.append(
        f'<text class="axis-title" x="{(x0 + x1) / 2:.1f}" y="{bottom + 2 * font + 16}"'
        f' text-anchor="middle" fill="{MUTED}" font-size="{font}">{escape(axis_title)}</text>'
    )
    for i, bar in enumerate(bars):
        y = top_pad + i * row
        if narrow:
            label_y, bar_y, bar_h = y + font, y + font + 6, row - font - 12
        else:
            label_y, bar_y, bar_h = y + row / 2 + font / 3, y + 6, row - 12
        mid = bar_y + bar_h / 2
        label = fit_text(bar.category, font, label_room)
        estimate = 0.0 if bar.estimate is None else bar.estimate
        shown = "no reports" if bar.estimate is None else share_text(estimate)
        tip = f"{bar.category}: {shown}, interval {share_text(bar.low)} to {share_text(bar.high)}"
        parts.append(
            f'<g class="row"><title>{escape(tip)}</title>'
            f'<text class="label" x="{0 if not narrow else 2}" y="{label_y:.1f}"'
            f' fill="{INK}" font-size="{font}">{escape(label)}'
            f"<title>{escape(bar.category)}</title></text>"
            f'<rect class="bar" data-category="{attr(bar.category)}"'
            f' data-estimate="{number(bar.estimate)}" x="{x0}" y="{bar_y}"'
            f' width="{max(x(estimate) - x0, 0.0):.2f}" height="{bar_h}" rx="2" fill="{BAR}"/>'
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
    for share in marked:
        name = threshold[0]  # type: ignore[index]
        tx = x(share)
        parts.append(
            f'<line class="threshold" x1="{tx:.1f}" y1="{top_pad - 4}" x2="{tx:.1f}"'
            f' y2="{bottom}" stroke="{WARN}" stroke-width="2" stroke-dasharray="5 4">'
            f"<title>{escape(name)} {share_text(share)}</title></line>"
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


def runs(points: Sequence[Point], index: dict[str, int]) -> list[list[Point]]:
    """The points with reports, split where a period without reports (or a gap) lies between
    two: a band or a line never bridges a period that has no estimate."""
    out: list[list[Point]] = []
    last = -2
    for point in points:
        if point.estimate is None:
            continue
        at = index[point.period]
        if at != last + 1 or not out:
            out.append([])
        out[-1].append(point)
        last = at
    return out


def time_chart(
    periods: Sequence[str],
    lines: Sequence[Line],
    *,
    svg_id: str,
    caption: str,
    shares: bool,
    value_name: str = "estimate",
    frame: Frame = WIDE,
    y_title: str = "",
    x_title: str = "",
    title: str | None = None,
    top: float | None = None,
) -> str:
    """Points over periods with the interval as a translucent band, one colour per line.

    ``shares`` puts the y axis on [0, top] in percent (``top`` to share one axis between
    small multiples), else in value units around the data. Each point is a ``circle.point``
    with ``data-period`` and ``data-<value_name>``, ``data-low``, ``data-high`` (and
    ``data-category`` for a named line). Periods without reports get no point; a band joins
    consecutive periods with reports, and a period with reports on its own (a range of one
    period, or one between two without) gets its interval as a ``line.errorbar`` with caps.
    ``y_title`` is written above the y axis (or ``title``, a small multiple's name, in its
    place), ``x_title`` under the period labels.
    """
    width, height, font = frame.width, frame.height, frame.font
    left, right, top_pad = frame.left, width - frame.right, frame.top
    plot_bottom = height - frame.bottom
    drawn = [p for line in lines for p in line.points if p.estimate is not None]
    if shares:
        highest = top if top is not None else max([p.high for p in drawn] + [0.0])
        axis_top, ticks = share_axis(highest)
        bottom = 0.0
        tick_text = share_text
    else:
        lows = [p.low for p in drawn] or [0.0]
        highs = [p.high for p in drawn] or [1.0]
        bottom, axis_top, ticks = value_axis(min(lows), max(highs))
        tick_text = value_text
    count = max(len(periods), 1)
    index = {label: i for i, label in enumerate(periods)}

    def x(label: str) -> float:
        if count == 1:
            return (left + right) / 2
        return left + (right - left) * index[label] / (count - 1)

    def y(value: float) -> float:
        clamped = min(max(value, bottom), axis_top)
        return plot_bottom - (plot_bottom - top_pad) * (clamped - bottom) / (axis_top - bottom)

    kind = {WIDE: "wide-chart", NARROW: "narrow-chart"}.get(frame, "multiple")
    parts = [
        f'<svg id="{attr(svg_id)}" class="chart {kind}" viewBox="0 0 {width} {height}"'
        f' role="img" aria-label="{attr(caption)}">',
        f"<title>{escape(caption)}</title>",
    ]
    heading = title if title is not None else y_title
    if heading:
        weight = ' font-weight="600"' if title is not None else ""
        parts.append(
            f'<text class="{"title" if title is not None else "axis-title"}" x="0"'
            f' y="{font + 2}" fill="{INK if title is not None else MUTED}" font-size="{font}"'
            f"{weight}>{escape(fit_text(heading, font, width))}"
            f"<title>{escape(heading)}</title></text>"
        )
    for tick in ticks:
        ty = y(tick)
        parts.append(
            f'<line class="grid" x1="{left}" y1="{ty:.1f}" x2="{right}" y2="{ty:.1f}"'
            f' stroke="{GRID}" stroke-width="1"/>'
            f'<text class="tick" x="{left - 6}" y="{ty + font / 3:.1f}" text-anchor="end"'
            f' fill="{MUTED}" font-size="{font}">{tick_text(tick)}</text>'
        )
    every = max(1, math.ceil(count / frame.x_labels))
    for i, label in enumerate(periods):
        if (count - 1 - i) % every:
            continue
        text = _period_tick(label)
        tx, anchor = x(label), "middle"
        if tx + text_width(text, font) / 2 > width:
            tx, anchor = width - 1, "end"
        parts.append(
            f'<text class="tick" x="{tx:.1f}" y="{plot_bottom + font + 6}"'
            f' text-anchor="{anchor}" fill="{MUTED}" font-size="{font}">{escape(text)}</text>'
        )
    if x_title:
        parts.append(
            f'<text class="axis-title" x="{(left + right) / 2:.1f}"'
            f' y="{plot_bottom + 2 * font + 16}" text-anchor="middle" fill="{MUTED}"'
            f' font-size="{font}">{escape(x_title)}</text>'
        )
    for n, line in enumerate(lines):
        parts.extend(_line_marks(line, color(n), index, x, y, shares, value_name))
    parts.append("</svg>")
    return "".join(parts)


def _line_marks(
    line: Line,
    stroke: str,
    index: dict[str, int],
    x: Callable[[str], float],
    y: Callable[[float], float],
    shares: bool,
    value_name: str,
) -> list[str]:
    """One line's bands (or error bars), its trace and its points; ``index`` places each
    period on the axis."""
    named = f' data-category="{attr(line.name)}"' if line.name is not None else ""
    parts = []
    for run in runs(line.points, index):
        if len(run) == 1:
            p = run[0]
            px, high, low = x(p.period), y(p.high), y(p.low)
            parts.append(
                f'<line class="errorbar"{named} data-period="{attr(p.period)}"'
                f' data-low="{number(p.low)}" data-high="{number(p.high)}" x1="{px:.2f}"'
                f' y1="{high:.2f}" x2="{px:.2f}" y2="{low:.2f}" stroke="{stroke}"'
                ' stroke-width="2"/>'
                f'<line class="cap" x1="{px - 7:.2f}" y1="{high:.2f}" x2="{px + 7:.2f}"'
                f' y2="{high:.2f}" stroke="{stroke}" stroke-width="2"/>'
                f'<line class="cap" x1="{px - 7:.2f}" y1="{low:.2f}" x2="{px + 7:.2f}"'
                f' y2="{low:.2f}" stroke="{stroke}" stroke-width="2"/>'
            )
            continue
        upper = " L".join(f"{x(p.period):.2f},{y(p.high):.2f}" for p in run)
        lower = " L".join(f"{x(p.period):.2f},{y(p.low):.2f}" for p in reversed(run))
        trace = " L".join(f"{x(p.period):.2f},{y(p.estimate or 0.0):.2f}" for p in run)
        parts.append(
            f'<path class="band"{named} d="M{upper} L{lower} Z" fill="{stroke}"'
            ' fill-opacity="0.16" stroke="none"/>'
            f'<path class="line" d="M{trace}" fill="none" stroke="{stroke}"'
            ' stroke-width="2" stroke-linejoin="round"/>'
        )
    for p in line.points:
        if p.estimate is None:
            continue
        value = p.estimate
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
    return parts


def small_multiples(
    periods: Sequence[str], lines: Sequence[Line], *, container_id: str, caption: str
) -> str:
    """One small share-over-time chart per line, in the order given, on one shared y axis
    (so heights compare across charts), in a grid the stylesheet lays out."""
    drawn = [p.high for line in lines for p in line.points if p.estimate is not None]
    top = max([*drawn, 0.0])
    charts = "".join(
        time_chart(
            periods,
            [line],
            svg_id=f"{container_id}-{i + 1}",
            caption=f"{caption}: {line.name}",
            shares=True,
            frame=MULTIPLE,
            title=line.name or "",
            top=top,
        )
        for i, line in enumerate(lines)
    )
    return f'<div id="{attr(container_id)}" class="multiples">{charts}</div>'


def sparkline(
    values: Sequence[float | None],
    *,
    label: str,
    band: Sequence[tuple[float, float] | None] = (),
) -> str:
    """A small line of ``values`` (None: no reports that period), the last one marked, over
    its interval ``band`` (``polygon.band``, one run per stretch of periods with reports).
    The vertical scale spans the band, so a change well inside the intervals draws as the
    small move it is, not as a full-height jump."""
    width, height, pad = 120, 28, 3
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    bounds = [(i, b) for i, b in enumerate(band) if b is not None and values[i] is not None]
    parts = [
        f'<svg class="sparkline" viewBox="0 0 {width} {height}" role="img"'
        f' aria-label="{attr(label)}">'
        f"<title>{escape(label)}</title>"
    ]
    if known:
        ends = [v for _, v in known] + [x for _, b in bounds for x in b]
        low, high = min(ends), max(ends)
        span = high - low or 1.0
        count = max(len(values) - 1, 1)

        def xy(i: int, v: float) -> tuple[float, float]:
            return (
                pad + (width - 2 * pad) * i / count,
                height - pad - (height - 2 * pad) * (v - low) / span,
            )

        stretch: list[tuple[int, tuple[float, float]]] = []
        for item in [*bounds, None]:
            if item is not None and (not stretch or item[0] == stretch[-1][0] + 1):
                stretch.append(item)
                continue
            if stretch:
                upper = [xy(i, b[1]) for i, b in stretch]
                lower = [xy(i, b[0]) for i, b in reversed(stretch)]
                if len(stretch) == 1:  # a lone period: a narrow bar
                    (ux, uy), (_, ly) = upper[0], lower[0]
                    upper, lower = (
                        [(ux - 1.5, uy), (ux + 1.5, uy)],
                        [(ux + 1.5, ly), (ux - 1.5, ly)],
                    )
                points = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in upper + lower)
                parts.append(
                    f'<polygon class="band" points="{points}" fill="{BAR}" stroke="none"/>'
                )
            stretch = [item] if item is not None else []
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
