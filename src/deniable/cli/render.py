"""How estimates look: rich tables with a whisker bar per category, a per-period chart, JSON and CSV.

``--format json`` prints the collector's document unchanged; ``csv`` flattens it to one row per
(period,) category, each row saying which metric, range, n, method and intervals it is from;
``table`` is for people: sorted by estimate, with the interval drawn, a marker on an estimate
the data pushed outside [0, 1], and a note when the margin exceeds most of the shares.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from deniable.client.errors import InvalidInput
from deniable.estimators import quantile_bounds
from deniable.estimators.csvtext import estimate_csv_text, half_width, series_csv_text
from deniable.estimators.documents import CLIPPED_MARKS, clipped_mark

BAR_WIDTH = 28
"""Characters given to a bar or a whisker when nothing else decides."""

MIN_BAR, MAX_BAR = 12, 40
"""Bounds of a chart column's width when it is fitted to the terminal."""

SERIES_TOP = 10
"""Categories charted by default when a series has more (the largest, by estimate)."""

MARKERS = CLIPPED_MARKS
"""Marks an estimate the data pushed below 0 or above 1 (clipped into its interval)."""


PIPED_WIDTH = 120
"""Columns a table gets on stdout that is not a terminal and no COLUMNS says otherwise."""


def console() -> Console:
    """A console on stdout: the terminal's width, else COLUMNS, else :data:`PIPED_WIDTH`
    (wide enough for a table with a bar)."""
    out = Console(soft_wrap=False)
    if not out.is_terminal:
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
        out = Console(width=width, soft_wrap=False)
    return out


FACT_SEPARATOR = " · "
"""What separates the facts of a heading line (metric · mechanism · range)."""


def print_facts(out: Console, line: str, style: str) -> None:
    """A heading line of facts joined by :data:`FACT_SEPARATOR`, broken between facts (never
    inside one) where it would pass the console's width."""
    rows: list[str] = []
    for fact in line.split(FACT_SEPARATOR):
        if rows and len(rows[-1]) + len(FACT_SEPARATOR) + len(fact) <= out.width:
            rows[-1] += FACT_SEPARATOR + fact
        else:
            rows.append(fact)
    for row in rows:
        out.print(Text(row, style=style), overflow="fold")


def print_notes(out: Console, notes: Iterable[str]) -> None:
    """Print each note as its own paragraph, wrapped at the console's width between words (a
    table's caption would wrap at the table's width, mid-phrase)."""
    for note in notes:
        out.print(Text(note, style="dim"), soft_wrap=False, overflow="fold")


def print_json(document: Any, stream: TextIO | None = None) -> None:
    """Print a JSON document exactly as received (indented for reading)."""
    (stream or sys.stdout).write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def write_csv(
    header: Sequence[str], rows: Iterable[Sequence[Any]], stream: TextIO | None = None
) -> None:
    """Write rows as CSV on stdout: ``None`` an empty cell, formula-leading labels neutralized
    (:func:`deniable.estimators.csvtext.write_csv`, shared with the dashboard)."""
    from deniable.estimators.csvtext import write_csv as write_safe_csv

    write_safe_csv(stream or sys.stdout, header, rows)


def percent(value: float | None) -> str:
    """A share as a percentage with one decimal; an em dash when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value * 100:.1f}%"


def interval(low: float | None, high: float | None) -> str:
    """An interval as ``[a%, b%]``, with more decimals where one would print a real width as 0."""
    text = f"[{percent(low)}, {percent(high)}]"
    if low is None or high is None or low == high or percent(low) != percent(high):
        return text
    return f"[{low * 100:.3g}%, {high * 100:.3g}%]"


def marker(row: dict[str, Any]) -> str:
    """The mark of an estimate whose unbiased value the data pushed outside [0, 1], or ""
    (the estimators' :func:`~deniable.estimators.documents.clipped_mark`, as the dashboard)."""
    return clipped_mark(row)


def percentage_points(share: float, spec: str = ".2f") -> str:
    """A margin on a share as ``±2.00 percentage points`` (``±1 percentage point``): the
    difference of two shares, in percentage points, not a percent of a share."""
    text = f"{share * 100:{spec}}"
    return f"±{text} percentage point{'' if text == '1' else 's'}"


def count(value: float | None) -> str:
    """An estimated count with thousands separators."""
    return "—" if value is None else f"{value:,.0f}"


def fit_bar(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None) -> int:
    """The chart column's width so that the table (these text columns plus the chart) fits."""
    total = width if width is not None else console().width
    used = 1 + 3 * (len(headers) + 1)
    for i, header in enumerate(headers):
        used += max([len(header), *(len(row[i]) for row in rows)])
    return max(MIN_BAR, min(MAX_BAR, total - used))


def _cell(value: float, scale: float, width: int) -> int:
    """The cell index holding ``value`` on an axis from 0 to ``scale``."""
    return min(width - 1, max(0, int(value / scale * width))) if scale > 0 else 0


def bar_with_whisker(
    estimate: float | None, low: float, high: float, scale: float, width: int = BAR_WIDTH
) -> Text:
    """A bar from 0 to the estimate with the interval drawn over it as a whisker ├──┤."""
    cells = [" "] * width
    styles = [""] * width
    if estimate is not None:
        end = max(0.0, estimate) / scale * width if scale > 0 else 0.0
        for i in range(width):
            if i + 0.5 <= end:
                cells[i], styles[i] = "█", "cyan"
    lo, hi = _cell(max(0.0, low), scale, width), _cell(min(high, scale), scale, width)
    for i in range(lo + 1, hi):
        if cells[i] == " ":
            cells[i], styles[i] = "─", "yellow"
    cells[lo], styles[lo] = ("┼" if lo == hi else "├"), "bold yellow"
    if hi != lo:
        cells[hi], styles[hi] = "┤", "bold yellow"
    return _text(cells, styles)


def dot_with_whisker(
    estimate: float | None, low: float, high: float, scale: float, width: int = BAR_WIDTH
) -> Text:
    """The interval as a whisker ├──●──┤ with a dot at the estimate, on an axis 0..scale."""
    cells = ["·" if i % 7 == 0 else " " for i in range(width)]
    styles = ["dim"] * width
    lo, hi = _cell(max(0.0, low), scale, width), _cell(min(high, scale), scale, width)
    for i in range(lo, hi + 1):
        cells[i], styles[i] = "─", "yellow"
    cells[lo], styles[lo] = "├", "yellow"
    cells[hi], styles[hi] = ("┤" if hi != lo else "┼"), "yellow"
    if estimate is not None:
        at = _cell(min(max(estimate, 0.0), scale), scale, width)
        cells[at], styles[at] = "●", "bold cyan"
    return _text(cells, styles)


def _text(cells: list[str], styles: list[str]) -> Text:
    """Cells of characters with their styles, as one rich Text."""
    text = Text()
    for char, style in zip(cells, styles, strict=True):
        text.append(char, style=style or None)
    return text


def _scale(rows: Iterable[dict[str, Any]]) -> float:
    """The axis maximum: the largest upper bound or estimate, at least 1%, at most 1."""
    top = 0.0
    for row in rows:
        for key in ("ci_high", "frequency"):
            value = row.get(key)
            if value is not None:
                top = max(top, float(value))
    return min(1.0, max(top, 0.01))


def sorted_rows(estimates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Estimate rows by estimate, largest first; rows without an estimate last."""
    return sorted(
        estimates,
        key=lambda r: (r.get("frequency") is None, -(r.get("frequency") or 0.0)),
    )


def level_text(confidence: float) -> str:
    """A confidence level as every CLI line prints one: a percentage to at most two decimals
    ("95%", "98.33%"), never a fraction or six digits."""
    return f"{round(confidence * 100, 2):g}%"


def _pct_level(document: dict[str, Any]) -> str:
    """The document's confidence level as a percentage (:func:`level_text`), or CI if it has
    none."""
    confidence = document.get("confidence")
    return level_text(confidence) if isinstance(confidence, int | float) else "CI"


def reports_text(document: dict[str, Any]) -> str:
    """The document's n with what it counts: "1,234 devices" for an event metric that says so
    (one report per device and window), else "1,234 reports" (never users)."""
    counted = document.get("counted") or "reports"
    return f"{document.get('n', 0):,} {counted}"


def number_column(table: Table, header: str, justify: JustifyMethod = "right") -> None:
    """A column of numbers: never wrapped nor cut (a header of several words may be given on
    lines of its own with "\\n")."""
    table.add_column(header, justify=justify, no_wrap=True)


def words_column(table: Table, header: str, justify: JustifyMethod = "left") -> None:
    """A column of words (names, verdicts): wrapped between words, and a word longer than the
    column folded onto the next line rather than cut, so a narrow terminal loses nothing."""
    table.add_column(header, justify=justify, overflow="fold")


def metric_label(document: dict[str, Any]) -> str:
    """The document's metric, with its unit if it has one: "load_ms (ms)"."""
    unit = document.get("unit")
    return f"{document.get('metric', '')}" + (f" ({unit})" if unit else "")


def estimate_heading(document: dict[str, Any]) -> tuple[str, str]:
    """Two lines saying what was estimated and over what, then how."""
    head = [metric_label(document)]
    if document.get("mechanism"):
        head.append(f"{document['mechanism']} ε={document.get('epsilon')}")
    if document.get("start") or document.get("end"):
        start, end = document.get("start"), document.get("end")
        head.append(str(start) if start == end else f"{start} … {end}")
    how = [reports_text(document)]
    if document.get("periods") is not None:
        how.append(f"{document['periods']} period(s) with data")
    if document.get("pooling"):
        how.append(f"pooling {document['pooling']}")
    if document.get("method"):
        how.append(f"method {document['method']}")
    how.append(intervals_kind(document))
    return " · ".join(head), " · ".join(how)


def intervals_kind(document: dict[str, Any]) -> str:
    """Which intervals the document's are: the level, and simultaneous or per category."""
    if document.get("simultaneous"):
        return f"{_pct_level(document)} simultaneous intervals (all at once)"
    return f"{_pct_level(document)} per-category intervals (each alone)"


def estimate_notes(document: dict[str, Any]) -> list[str]:
    """The lines under an estimate table: the markers' legend and the margin's warning."""
    rows = document.get("estimates", [])
    notes = []
    clipped = sum(1 for row in rows if row.get("clipped"))
    if clipped:
        notes.append(
            f"{MARKERS['below']}/{MARKERS['above']} {clipped} unbiased estimate(s) fell below 0"
            " (or above 100%): shown at the edge of the interval; the raw value is `unbiased`"
            " in --format json or csv"
        )
    if document.get("margin_exceeds_most_shares"):
        notes.append(
            f"note: the margin (±{percent(document.get('margin'))}, typical) exceeds"
            f" {document.get('below_margin')} of {len(rows)} estimates, which cannot be told"
            " from 0: more reports, a larger ε or fewer categories would narrow it"
        )
    if document.get("n", 0) == 0:
        notes.append("no reports in this range: every interval is [0%, 100%]")
    found = document.get("devices_with_event")
    if found is not None:
        notes.append(
            f"devices where the event occurred: {count(found['estimate'])}"
            f" ({_pct_level(document)} interval {count(found['low'])} … {count(found['high'])})"
            f" of {document['active_devices']:,} active devices"
        )
    return notes


def estimate_table(document: dict[str, Any]) -> Table:
    """Per category: estimate, interval, estimated count and a whisker bar; sorted by estimate."""
    rows = document.get("estimates", [])
    if "quantiles" not in document:
        rows = sorted_rows(rows)
    scale = _scale(rows)
    counted = document.get("counted") or "reports"
    headers = ["category", "estimate", f"{_pct_level(document)} interval", f"est. {counted}"]
    texts = [
        [
            str(row.get("category")),
            percent(row.get("frequency")) + marker(row),
            interval(row.get("ci_low"), row.get("ci_high")),
            count(row.get("count")),
        ]
        for row in rows
    ]
    width = fit_bar(headers, texts)
    table = Table(expand=False)
    table.add_column(headers[0], overflow="fold")
    for header in headers[1:]:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column(f"0 … {percent(scale)}", no_wrap=True)
    for row, text in zip(rows, texts, strict=True):
        bar = bar_with_whisker(row.get("frequency"), row["ci_low"], row["ci_high"], scale, width)
        table.add_row(*text, bar)
    notes = estimate_notes(document)
    if notes:
        table.caption = "\n".join(notes)
        table.caption_justify = "left"
    return table


def print_estimate(document: dict[str, Any], fmt: str) -> None:
    """Print an estimate document as a table, JSON, or CSV: a numeric metric's mean, or the
    shares (a histogram's in bucket order, then its quantiles)."""
    if "strings" in document:
        from .textrender import print_text_estimate

        print_text_estimate(document, fmt)
    elif "mean" in document:
        print_mean_estimate(document, fmt)
    else:
        print_shares(document, fmt)


def print_mean_estimate(document: dict[str, Any], fmt: str) -> None:
    """Print a numeric metric's estimate document as JSON, or its mean as a table or CSV."""
    if fmt == "json":
        print_json(document)
    else:
        print_mean(document, fmt)


def print_shares(document: dict[str, Any], fmt: str) -> None:
    """Print an estimate document of shares as JSON, CSV or a table (a histogram's in bucket
    order, then its quantiles)."""
    if fmt == "json":
        print_json(document)
    elif fmt == "csv":
        sys.stdout.write(estimate_csv_text(document))
    else:
        out = console()
        head, how = estimate_heading(document)
        print_facts(out, head, "bold")
        print_facts(out, how, "dim")
        out.print(estimate_table(document))
        if "quantiles" in document:
            print_quantiles(out, document)


def series_names(
    document: dict[str, Any], categories: Sequence[str] | None, top: int | None
) -> list[str]:
    """The categories to show: those named, else the ``top`` largest by estimate over the range
    (report-weighted), else all (just ``true`` for a boolean), in the metric's order."""
    series = document.get("series", [])
    names: list[str] = []
    weight: dict[str, float] = {}
    for entry in series:
        for row in entry.get("estimates", []):
            name = row["category"]
            if name not in names:
                names.append(name)
            weight[name] = weight.get(name, 0.0) + entry.get("n", 0) * (row.get("frequency") or 0.0)
    if categories:
        unknown = [c for c in categories if c not in names]
        if unknown and series:
            raise ValueError(f"no category named {unknown[0]!r} in this metric")
        return [c for c in names if c in categories]
    if names == ["false", "true"]:
        return ["true"]
    if top is not None and top < len(names):
        largest = set(sorted(names, key=lambda name: -weight[name])[:top])
        return [name for name in names if name in largest]
    return names


def series_charts(
    document: dict[str, Any], categories: Sequence[str] | None = None, top: int | None = None
) -> list[Table]:
    """One small chart per category shown, all on one axis: a row per period with the estimate
    and its interval drawn. Without ``categories`` or ``top``, a metric with more than
    :data:`SERIES_TOP` categories shows its largest :data:`SERIES_TOP`, and says so."""
    series = document.get("series", [])
    every = series_names(document, None, None)
    if top is None and not categories and len(every) > SERIES_TOP:
        top = SERIES_TOP
    names = series_names(document, categories, top)
    found = [
        [
            next((r for r in entry.get("estimates", []) if r["category"] == name), None)
            for name in names
        ]
        for entry in series
    ]
    scale = _scale(
        r for rows in found for r in rows if r is not None and r.get("frequency") is not None
    )
    tables = []
    for column, name in enumerate(names):
        shown = [
            (entry, rows[column])
            for entry, rows in zip(series, found, strict=True)
            if rows[column] is not None
        ]
        tables.append(_series_chart(document, name, shown, scale))
    if tables and len(names) < len(every) and not categories:
        tables[-1].caption += (
            f"\nthe {len(names)} largest of {len(every)} categories by estimate over the range;"
            " --top N or --category to choose"
        )
    return tables


def _series_chart(
    document: dict[str, Any],
    name: str,
    shown: list[tuple[dict[str, Any], dict[str, Any]]],
    scale: float,
) -> Table:
    """One category's chart: a row per period, its estimate and interval on the shared axis."""
    table = Table(
        title=f"{document.get('metric', '')} · {name} · {intervals_kind(document)}, per period",
        title_justify="left",
    )
    headers = ["period", document.get("counted") or "reports", "estimate", "interval"]
    texts = [
        [
            str(entry.get("period")),
            f"{entry.get('n', 0):,}",
            percent(row.get("frequency")) + marker(row),
            interval(row.get("ci_low"), row.get("ci_high")),
        ]
        for entry, row in shown
    ]
    width = fit_bar(headers, texts)
    for header in headers:
        table.add_column(header, justify="left" if header == "period" else "right", no_wrap=True)
    table.add_column(f"0 … {percent(scale)}", no_wrap=True)
    for (entry, row), text in zip(shown, texts, strict=True):
        chart = (
            dot_with_whisker(row.get("frequency"), row["ci_low"], row["ci_high"], scale, width)
            if entry.get("n", 0)
            else Text("no reports", style="dim")
        )
        table.add_row(*text, chart)
    legend = [f"● estimate  ├─┤ {_pct_level(document)} interval  · marks along the axis"]
    marks = {marker(row) for _, row in shown} - {""}
    for side, words in (("below", "below 0"), ("above", "above 100%")):
        if MARKERS[side] in marks:
            legend.append(
                f"{MARKERS[side]} unbiased estimate {words}, shown at its interval's edge"
            )
    table.caption = "  ".join(legend)
    table.caption_justify = "left"
    return table


def print_series(
    document: dict[str, Any],
    fmt: str,
    categories: Sequence[str] | None = None,
    top: int | None = None,
) -> None:
    """Print a series document as charts, JSON, or CSV (one row per period and category).

    ``categories`` and ``top`` choose the categories charted or written; JSON is the document.
    """
    if fmt == "json":
        print_json(document)
    elif document.get("series") and "strings" in document["series"][0]:
        from .textrender import print_text_series

        print_text_series(document, fmt, top)
    elif "lower" in document:
        print_mean_series(document, fmt, categories, top)
    else:
        print_shares_series(document, fmt, categories, top)


def print_mean_series(
    document: dict[str, Any], fmt: str, categories: Sequence[str] | None, top: int | None
) -> None:
    """Print a numeric metric's series as JSON, CSV or a chart of its means (it has no
    categories: ``categories`` or ``top`` is refused)."""
    if fmt == "json":
        print_json(document)
        return
    if categories or top:
        raise InvalidInput("a numeric metric has no categories: leave out --category and --top")
    if fmt == "csv":
        sys.stdout.write(series_csv_text(document))
    else:
        console().print(mean_series_chart(document))


def print_shares_series(
    document: dict[str, Any], fmt: str, categories: Sequence[str] | None, top: int | None
) -> None:
    """Print a series of shares as JSON, CSV (one row per period and category) or charts."""
    if fmt == "json":
        print_json(document)
    elif fmt == "csv":
        sys.stdout.write(series_csv_text(document, set(series_names(document, categories, top))))
    else:
        out = console()
        for table in series_charts(document, categories, top):
            out.print(table)


def decimals_for(margin: float | None, lower: float, upper: float) -> int:
    """Decimals that show a margin to two significant digits (the range's, without one)."""
    spread = margin if margin else (upper - lower) / 100
    if not spread or not math.isfinite(spread) or spread <= 0:
        return 0
    return max(0, min(9, 1 - math.floor(math.log10(spread))))


def number(value: float | None, decimals: int) -> str:
    """A value in the metric's units with thousands separators; an em dash when there is none."""
    return "—" if value is None else f"{value:,.{decimals}f}"


def mean_texts(mean: dict[str, Any], lower: float, upper: float) -> tuple[str, str, str]:
    """The mean, "± margin" and "[low, high]", each in the metric's units."""
    margin = half_width(mean)
    places = decimals_for(margin, lower, upper)
    return (
        number(mean.get("estimate"), places),
        "—" if margin is None else f"± {number(margin, places)}",
        f"[{number(mean['ci_low'], places)}, {number(mean['ci_high'], places)}]",
    )


def mean_whisker(mean: dict[str, Any], lower: float, upper: float, width: int) -> Text:
    """The interval as a whisker with a dot at the mean, on the axis lower..upper."""
    estimate = mean.get("estimate")
    return dot_with_whisker(
        None if estimate is None else estimate - lower,
        mean["ci_low"] - lower,
        mean["ci_high"] - lower,
        upper - lower,
        width,
    )


def axis_label(lower: float, upper: float) -> str:
    """The header of a chart column on the axis lower..upper."""
    places = 0 if float(lower).is_integer() and float(upper).is_integer() else 2
    return f"{number(lower, places)} … {number(upper, places)}"


def mean_table(document: dict[str, Any]) -> Table:
    """A numeric estimate: the mean, its margin, its interval and a whisker over the range."""
    lower, upper = float(document["lower"]), float(document["upper"])
    mean = document["mean"]
    headers = ["mean", "margin", f"{_pct_level(document)} interval"]
    texts = list(mean_texts(mean, lower, upper))
    width = fit_bar(headers, [texts])
    table = Table(expand=False)
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column(axis_label(lower, upper), no_wrap=True)
    table.add_row(*texts, mean_whisker(mean, lower, upper, width))
    if document.get("n", 0) == 0:
        table.caption = (
            f"no reports in this range: the interval is the whole range [{lower:g}, {upper:g}]"
        )
    else:
        table.caption = f"values clamped to [{lower:g}, {upper:g}] on the device; the mean of the clamped values"
    table.caption_justify = "left"
    return table


QUANTILE_NOTES = (
    "at least, at most: the bucket edges each quantile lies between",
    "a wider interval: the data cannot place the quantile closer",
    "none: the quantile may lie in an end bucket (values beyond the outer edges)",
)
"""The lines under a quantile table, each a whole phrase that fits 80 columns."""


def quantile_title(document: dict[str, Any]) -> str:
    """The line above a quantile table."""
    return f"quantiles · {_pct_level(document)} intervals, all at once"


def quantile_table(document: dict[str, Any]) -> Table:
    """A histogram's quantile intervals: between which bucket edges each quantile lies (its
    title and notes are printed around it: :func:`print_quantiles`)."""
    table = Table()
    table.add_column("quantile", justify="right", no_wrap=True)
    table.add_column("at least", justify="right", no_wrap=True)
    table.add_column("at most", justify="right", no_wrap=True)
    edges = document.get("edges") or [0.0]
    for entry in document.get("quantiles", []):
        table.add_row(f"p{entry['q'] * 100:g}", *quantile_bounds(entry, edges, "{:,g}".format))
    return table


def print_quantiles(out: Console, document: dict[str, Any]) -> None:
    """A histogram's quantile table with its title above and its notes below, each on lines
    of its own (a narrow table would wrap them mid-phrase)."""
    out.print(Text(quantile_title(document), style="bold"))
    out.print(quantile_table(document))
    print_notes(out, QUANTILE_NOTES)


def mean_heading(document: dict[str, Any]) -> tuple[str, str]:
    """Two lines saying what mean was estimated and over what, then how."""
    head, _ = estimate_heading(document)
    how = [reports_text(document), f"{document.get('periods', 0)} period(s) with data"]
    how.append(f"pooling {document.get('pooling')}")
    how.append(f"{_pct_level(document)} interval")
    return head, " · ".join(how)


def print_mean(document: dict[str, Any], fmt: str) -> None:
    """Print a numeric estimate document as a table or CSV (JSON is handled by the caller)."""
    if fmt == "csv":
        sys.stdout.write(estimate_csv_text(document))
        return
    out = console()
    head, how = mean_heading(document)
    print_facts(out, head, "bold")
    print_facts(out, how, "dim")
    out.print(mean_table(document))


def mean_series_chart(document: dict[str, Any]) -> Table:
    """A numeric series: a row per period with its mean, margin, interval and whisker."""
    lower, upper = float(document["lower"]), float(document["upper"])
    table = Table(
        title=f"{metric_label(document)} · mean · {_pct_level(document)} interval, per period",
        title_justify="left",
    )
    headers = ["period", document.get("counted") or "reports", "mean", "margin", "interval"]
    rows = [(entry, mean_texts(entry["mean"], lower, upper)) for entry in document["series"]]
    texts = [[str(entry["period"]), f"{entry.get('n', 0):,}", *shown] for entry, shown in rows]
    width = fit_bar(headers, texts)
    for header in headers:
        table.add_column(header, justify="left" if header == "period" else "right", no_wrap=True)
    table.add_column(axis_label(lower, upper), no_wrap=True)
    for (entry, _), text in zip(rows, texts, strict=True):
        chart = (
            mean_whisker(entry["mean"], lower, upper, width)
            if entry.get("n", 0)
            else Text("no reports", style="dim")
        )
        table.add_row(*text, chart)
    table.caption = f"● mean  ├─┤ {_pct_level(document)} interval  · marks along the axis"
    table.caption_justify = "left"
    return table
