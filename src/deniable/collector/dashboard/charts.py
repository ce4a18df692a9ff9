"""The dashboard's charts, drawn as SVG on the server: no script, no chart library, no request.

Each chart is SVG markup with a ``viewBox`` (the stylesheet makes it as wide as its
container). Every mark carries its numbers in ``data-*`` attributes at full precision, so tests
and readers of the page source see exactly what was drawn. The markup is in the templates'
``charts/`` folder, which the engine escapes; this module computes only where things go.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from markupsafe import Markup

from .templating import render

PALETTE = ("#2563eb", "#d97706", "#0d9488", "#db2777", "#7c3aed", "#65a30d", "#dc2626", "#475569")
"""Series colours, the accent first; chosen to stay distinct for the common colour blindnesses."""

ACCENT = PALETTE[0]
INK = "#0f172a"
MUTED = "#64748b"
GRID = "#e2e8f0"
BAR = "#bfd3fb"
WARN = PALETTE[6]
COLOURS = {"ACCENT": ACCENT, "INK": INK, "MUTED": MUTED, "GRID": GRID, "BAR": BAR, "WARN": WARN}
"""The colours a chart template names."""


def svg(template: str, **context: Any) -> Markup:
    """A chart ``template`` rendered with ``context`` and the colours it names."""
    return render(template, **COLOURS, **context)


@dataclass(frozen=True)
class Canvas:
    """What every chart's outer ``<svg>`` names: its id, its size class (``wide-chart``...),
    its box in SVG units and its caption (the ``aria-label`` and ``<title>``); and the size of
    its text."""

    svg_id: str
    kind: str
    width: int
    height: int | str
    caption: str
    font: int


@dataclass(frozen=True)
class Plot:
    """The box a chart draws its marks in, in SVG units: from ``left`` to ``right``, from
    ``top`` down to ``bottom`` (the x axis's labels go below it)."""

    left: float
    right: float
    top: float
    bottom: float

    @property
    def middle(self) -> str:
        """The box's horizontal middle, where the x axis's title is centred."""
        return f"{(self.left + self.right) / 2:.1f}"


def chart(template: str, canvas: Canvas, **context: Any) -> Markup:
    """A chart ``template`` drawn on ``canvas``, with ``context``."""
    return svg(template, **asdict(canvas), **context)


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
    highest: float | None = None,
) -> Markup:
    """Horizontal bars, one per category, each with its interval as a dark whisker with caps;
    ``threshold`` (its name and share) is drawn as a dashed vertical line across them.
    ``highest`` sets the axis (the same for charts that must compare, such as slices), else
    it covers this chart's own intervals.

    Wide, category labels sit left of the bars; narrow (a phone), each label sits on its own
    line above its bar. A label too long for its room ends in an ellipsis, the full text in its
    ``<title>``; it never runs outside the chart.
    """
    font = NARROW.font if narrow else WIDE.font
    width = NARROW.width if narrow else WIDE.width
    row, top_pad = (46, 6) if narrow else (30, 8)
    label_room = width - 8 if narrow else 196
    x0, x1 = (14, width - 22) if narrow else (label_room + 12, width - 24)
    marked = [threshold] if threshold is not None and threshold[1] < 1 else []
    own = max([b.high for b in bars] + [m[1] for m in marked] + [0.0])
    top, ticks = share_axis(own if highest is None else max(highest, own))
    bottom = top_pad + row * len(bars)
    height = bottom + 26 + font + 10

    def x(value: float) -> float:
        return x0 + (x1 - x0) * min(max(value, 0.0), top) / top

    rows = []
    for i, bar in enumerate(bars):
        y = top_pad + i * row
        if narrow:
            label_y, bar_y, bar_h = y + font, y + font + 6, row - font - 12
        else:
            label_y, bar_y, bar_h = y + row / 2 + font / 3, y + 6, row - 12
        estimate = 0.0 if bar.estimate is None else bar.estimate
        shown = "no reports" if bar.estimate is None else share_text(estimate)
        rows.append(
            {
                "category": bar.category,
                "label": fit_text(bar.category, font, label_room),
                "tip": f"{bar.category}: {shown}, interval {share_text(bar.low)} to"
                f" {share_text(bar.high)}",
                "label_y": f"{label_y:.1f}",
                "estimate": bar.estimate,
                "low": bar.low,
                "high": bar.high,
                "y": bar_y,
                "height": bar_h,
                "mid": bar_y + bar_h / 2,
                "width": f"{max(x(estimate) - x0, 0.0):.2f}",
                "x_low": f"{x(bar.low):.2f}",
                "x_high": f"{x(bar.high):.2f}",
                "x_estimate": f"{x(estimate):.2f}",
            }
        )
    kind = "narrow-chart" if narrow else "wide-chart"
    return chart(
        "charts/bar.svg",
        Canvas(svg_id, kind, width, height, caption, font),
        plot=Plot(x0, x1, top_pad, bottom),
        label_x=2 if narrow else 0,
        ticks=[{"x": f"{x(t):.1f}", "text": share_text(t)} for t in ticks],
        tick_y=bottom + font + 6,
        axis_title=axis_title,
        axis_y=bottom + 2 * font + 16,
        bars=rows,
        thresholds=[
            {"name": name, "x": f"{x(share):.1f}", "text": share_text(share)}
            for name, share in marked
        ],
    )


@dataclass(frozen=True)
class Point:
    """One period's estimate (None without reports) and its interval; ``open_low`` and
    ``open_high`` say the interval has no bound on that side (drawn to the axis's end with an
    arrow, in a bare interval chart)."""

    period: str
    estimate: float | None
    low: float
    high: float
    open_low: bool = False
    open_high: bool = False


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
    bare: bool = False,
) -> Markup:
    """Points over periods with the interval as a translucent band, one colour per line.

    ``shares`` puts the y axis on [0, top] in percent (``top`` to share one axis between
    small multiples), else in value units around the data. Each point is a ``circle.point``
    with ``data-period`` and ``data-<value_name>``, ``data-low``, ``data-high`` (and
    ``data-category`` for a named line). Periods without reports get no point; a band joins
    consecutive periods with reports, and a period with reports on its own (a range of one
    period, or one between two without) gets its interval as a ``line.errorbar`` with caps.
    ``y_title`` is written above the y axis (or ``title``, a small multiple's name, in its
    place), ``x_title`` under the period labels.

    ``bare`` draws each period's interval alone (``line.interval``, no point, band or trace:
    for intervals with no estimate inside them, such as a quantile's bucket edges), the lines
    side by side within a period; a side with no bound runs to the axis's end and ends in an
    arrow (``path.open``, ``data-open`` low or high) instead of a cap.
    """
    width, height, font = frame.width, frame.height, frame.font
    left, right, top_pad = frame.left, width - frame.right, frame.top
    plot_bottom = height - frame.bottom
    drawn = [p for line in lines for p in line.points if bare or p.estimate is not None]
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

    inset = 8 * len(lines) if bare else 0  # side-by-side intervals stay clear of the y axis

    def x(label: str) -> float:
        if count == 1:
            return (left + right) / 2
        return left + inset + (right - left - 2 * inset) * index[label] / (count - 1)

    def y(value: float) -> float:
        clamped = min(max(value, bottom), axis_top)
        return plot_bottom - (plot_bottom - top_pad) * (clamped - bottom) / (axis_top - bottom)

    heading_text = title if title is not None else y_title
    heading = None
    if heading_text:
        heading = {
            "kind": "title" if title is not None else "axis-title",
            "fill": INK if title is not None else MUTED,
            "bold": title is not None,
            "shown": fit_text(heading_text, font, width),
            "text": heading_text,
        }
    every = max(1, math.ceil(count / frame.x_labels))
    x_ticks = []
    for i, label in enumerate(periods):
        if (count - 1 - i) % every:
            continue
        text = _period_tick(label)
        tx, anchor = x(label), "middle"
        if tx + text_width(text, font) / 2 > width:
            tx, anchor = width - 1, "end"
        x_ticks.append({"x": f"{tx:.1f}", "anchor": anchor, "text": text})
    kind = {WIDE: "wide-chart", NARROW: "narrow-chart"}.get(frame, "multiple")
    return chart(
        "charts/time.svg",
        Canvas(svg_id, kind, width, height, caption, font),
        plot=Plot(left, right, top_pad, plot_bottom),
        heading=heading,
        y_ticks=[
            {"y": f"{y(t):.1f}", "text_y": f"{y(t) + font / 3:.1f}", "text": tick_text(t)}
            for t in ticks
        ],
        x_ticks=x_ticks,
        x_tick_y=plot_bottom + font + 6,
        x_title=x_title,
        x_title_y=plot_bottom + 2 * font + 16,
        value_name=value_name,
        lines=[
            _bare_marks(line, color(n), (n - (len(lines) - 1) / 2) * 9, x, y, shares)
            if bare
            else _line_marks(line, color(n), index, x, y, shares)
            for n, line in enumerate(lines)
        ],
    )


def _bare_marks(
    line: Line,
    stroke: str,
    offset: float,
    x: Callable[[str], float],
    y: Callable[[float], float],
    shares: bool,
) -> dict[str, Any]:
    """One line's intervals alone, each ``offset`` units right of its period: a bar with a cap
    on each bounded side and an arrow on each open one."""
    text = share_text if shares else value_text
    intervals = []
    for p in line.points:
        px = x(p.period) + offset
        top_y, bottom_y = y(p.high), y(p.low)
        ends = []
        for side, open_, end_y, sign in (
            ("high", p.open_high, top_y, -1),
            ("low", p.open_low, bottom_y, 1),
        ):
            if open_:
                tip = end_y + sign * 2
                back = tip - sign * 7
                ends.append(
                    {
                        "open": side,
                        "d": f"M{px - 5:.2f},{back:.2f} L{px:.2f},{tip:.2f} L{px + 5:.2f},{back:.2f} Z",
                    }
                )
            else:
                ends.append({"open": None, "y": f"{end_y:.2f}"})
        low = "open" if p.open_low else text(p.low)
        high = "open" if p.open_high else text(p.high)
        who = f"{line.name} " if line.name is not None else ""
        intervals.append(
            {
                "period": p.period,
                "low": p.low,
                "high": p.high,
                "x": f"{px:.2f}",
                "cap_left": f"{px - 5:.2f}",
                "cap_right": f"{px + 5:.2f}",
                "y_high": f"{top_y:.2f}",
                "y_low": f"{bottom_y:.2f}",
                "ends": ends,
                "open": " ".join(e["open"] for e in ends if e["open"]),
                "tip": f"{who}{p.period}: between {low} and {high}",
            }
        )
    return {
        "named": line.name is not None,
        "name": line.name,
        "stroke": stroke,
        "runs": [],
        "points": [],
        "intervals": intervals,
    }


def _line_marks(
    line: Line,
    stroke: str,
    index: dict[str, int],
    x: Callable[[str], float],
    y: Callable[[float], float],
    shares: bool,
) -> dict[str, Any]:
    """One line's bands (or error bars), its trace and its points, placed for the template;
    ``index`` places each period on the axis."""
    drawn_runs: list[dict[str, Any]] = []
    for run in runs(line.points, index):
        if len(run) == 1:
            p = run[0]
            px = x(p.period)
            drawn_runs.append(
                {
                    "single": True,
                    "period": p.period,
                    "low": p.low,
                    "high": p.high,
                    "x": f"{px:.2f}",
                    "y_high": f"{y(p.high):.2f}",
                    "y_low": f"{y(p.low):.2f}",
                    "cap_left": f"{px - 7:.2f}",
                    "cap_right": f"{px + 7:.2f}",
                }
            )
            continue
        upper = " L".join(f"{x(p.period):.2f},{y(p.high):.2f}" for p in run)
        lower = " L".join(f"{x(p.period):.2f},{y(p.low):.2f}" for p in reversed(run))
        trace = " L".join(f"{x(p.period):.2f},{y(p.estimate or 0.0):.2f}" for p in run)
        drawn_runs.append({"single": False, "band": f"M{upper} L{lower} Z", "trace": f"M{trace}"})
    points = []
    for p in line.points:
        if p.estimate is None:
            continue
        text = share_text if shares else value_text
        who = f"{line.name} " if line.name is not None else ""
        points.append(
            {
                "period": p.period,
                "estimate": p.estimate,
                "low": p.low,
                "high": p.high,
                "x": f"{x(p.period):.2f}",
                "y": f"{y(p.estimate):.2f}",
                "tip": f"{who}{p.period}: {text(p.estimate)} ({text(p.low)} to {text(p.high)})",
            }
        )
    return {
        "named": line.name is not None,
        "name": line.name,
        "stroke": stroke,
        "runs": drawn_runs,
        "points": points,
        "intervals": [],
    }


def small_multiples(
    periods: Sequence[str], lines: Sequence[Line], *, container_id: str, caption: str
) -> Markup:
    """One small share-over-time chart per line, in the order given, on one shared y axis
    (so heights compare across charts), in a grid the stylesheet lays out."""
    drawn = [p.high for line in lines for p in line.points if p.estimate is not None]
    top = max([*drawn, 0.0])
    charts = [
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
    ]
    return render("charts/multiples.html", container_id=container_id, charts=charts)


def sparkline(
    values: Sequence[float | None],
    *,
    label: str,
    band: Sequence[tuple[float, float] | None] = (),
) -> Markup:
    """A small line of ``values`` (None: no reports that period), the last one marked, over
    its interval ``band`` (``polygon.band``, one run per stretch of periods with reports).
    The vertical scale spans the band, so a change well inside the intervals draws as the
    small move it is, not as a full-height jump."""
    width, height, pad = 120, 28, 3
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    bounds = [(i, b) for i, b in enumerate(band) if b is not None and values[i] is not None]
    bands: list[str] = []
    line = None
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
                bands.append(" ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in upper + lower))
            stretch = [item] if item is not None else []
        coords = [xy(i, v) for i, v in known]
        last_x, last_y = coords[-1]
        line = {
            "points": " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords),
            "last_x": f"{last_x:.1f}",
            "last_y": f"{last_y:.1f}",
        }
    return svg(
        "charts/sparkline.svg",
        width=width,
        height=height,
        pad=pad,
        label=label,
        bands=bands,
        line=line,
    )


def swatch(index: int) -> Markup:
    """A small square of the ``index``-th series colour, for a legend."""
    return render("charts/swatch.svg", fill=color(index))
