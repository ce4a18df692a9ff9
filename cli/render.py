"""How estimates look: rich tables with a whisker bar per category, a per-period chart, JSON and CSV.

``--format json`` prints the collector's document unchanged; ``csv`` flattens it to one row per
(period,) category; ``table`` is for people: sorted by estimate, with the interval drawn.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

BAR_WIDTH = 28
"""Characters given to a bar or a whisker when nothing else decides."""

MIN_BAR, MAX_BAR = 12, 40
"""Bounds of a chart column's width when it is fitted to the terminal."""

ESTIMATE_FIELDS = ("category", "frequency", "std_error", "ci_low", "ci_high", "count")
"""One estimate row's fields, in the order CSV prints them."""


def console() -> Console:
    """A console on stdout, wide enough for a table with a bar even when piped."""
    out = Console(soft_wrap=False)
    if not out.is_terminal:
        out = Console(width=120, soft_wrap=False)
    return out


def print_json(document: Any, stream: TextIO | None = None) -> None:
    """Print a JSON document exactly as received (indented for reading)."""
    (stream or sys.stdout).write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def write_csv(
    header: Sequence[str], rows: Iterable[Sequence[Any]], stream: TextIO | None = None
) -> None:
    """Write rows as CSV, with ``None`` as an empty cell."""
    writer = csv.writer(stream or sys.stdout, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])


def percent(value: float | None) -> str:
    """A share as a percentage with one decimal; an em dash when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value * 100:.1f}%"


def interval(low: float | None, high: float | None) -> str:
    """An interval as ``[a%, b%]``."""
    return f"[{percent(low)}, {percent(high)}]"


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


def _pct_level(document: dict[str, Any]) -> str:
    """The document's confidence level as a percentage, or CI if it has none."""
    confidence = document.get("confidence")
    return f"{confidence * 100:g}%" if isinstance(confidence, int | float) else "CI"


def estimate_heading(document: dict[str, Any]) -> tuple[str, str]:
    """Two lines saying what was estimated and over what, then how."""
    head = [str(document.get("metric", ""))]
    if document.get("mechanism"):
        head.append(f"{document['mechanism']} ε={document.get('epsilon')}")
    if document.get("start") or document.get("end"):
        start, end = document.get("start"), document.get("end")
        head.append(str(start) if start == end else f"{start} … {end}")
    how = [f"n={document.get('n', 0):,}"]
    if document.get("periods") is not None:
        how.append(f"{document['periods']} period(s) with data")
    if document.get("pooling"):
        how.append(f"pooling {document['pooling']}")
    if document.get("method"):
        how.append(f"method {document['method']}")
    kind = "simultaneous" if document.get("simultaneous") else "per-category"
    how.append(f"{_pct_level(document)} {kind} intervals")
    return " · ".join(head), " · ".join(how)


def estimate_table(document: dict[str, Any]) -> Table:
    """Per category: estimate, interval, estimated count and a whisker bar; sorted by estimate."""
    rows = sorted_rows(document.get("estimates", []))
    scale = _scale(rows)
    headers = ["category", "estimate", f"{_pct_level(document)} interval", "count"]
    texts = [
        [
            str(row.get("category")),
            percent(row.get("frequency")),
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
    if document.get("n", 0) == 0:
        table.caption = "no reports in this range: every interval is [0%, 100%]"
    return table


def estimate_csv_rows(document: dict[str, Any]) -> list[list[Any]]:
    """CSV rows of one estimate document, in the API's category order."""
    return [[row.get(f) for f in ESTIMATE_FIELDS] for row in document.get("estimates", [])]


def print_estimate(document: dict[str, Any], fmt: str) -> None:
    """Print an estimate document as a table, JSON, or CSV."""
    if fmt == "json":
        print_json(document)
    elif fmt == "csv":
        write_csv(ESTIMATE_FIELDS, estimate_csv_rows(document))
    else:
        out = console()
        head, how = estimate_heading(document)
        out.print(Text(head, style="bold"))
        out.print(Text(how, style="dim"))
        out.print(estimate_table(document))


def series_charts(document: dict[str, Any], categories: Sequence[str] | None = None) -> list[Table]:
    """One small chart per category: a row per period with the estimate and its interval drawn."""
    series = document.get("series", [])
    names: list[str] = []
    for entry in series:
        for row in entry.get("estimates", []):
            if row["category"] not in names:
                names.append(row["category"])
    if categories:
        unknown = [c for c in categories if c not in names]
        if unknown and series:
            raise ValueError(f"no category named {unknown[0]!r} in this metric")
        names = [c for c in names if c in categories]
    elif names == ["false", "true"]:
        names = ["true"]
    tables = []
    for name in names:
        rows = [
            (entry, next((r for r in entry.get("estimates", []) if r["category"] == name), None))
            for entry in series
        ]
        scale = _scale(r for _, r in rows if r is not None and r.get("frequency") is not None)
        table = Table(
            title=f"{document.get('metric', '')} · {name} · {_pct_level(document)} intervals per period",
            title_justify="left",
        )
        headers = ["period", "n", "estimate", "interval"]
        shown = [(entry, row) for entry, row in rows if row is not None]
        texts = [
            [
                str(entry.get("period")),
                f"{entry.get('n', 0):,}",
                percent(row.get("frequency")),
                interval(row.get("ci_low"), row.get("ci_high")),
            ]
            for entry, row in shown
        ]
        width = fit_bar(headers, texts)
        for header in headers:
            table.add_column(
                header, justify="left" if header == "period" else "right", no_wrap=True
            )
        table.add_column(f"0 … {percent(scale)}", no_wrap=True)
        for (entry, row), text in zip(shown, texts, strict=True):
            chart = (
                dot_with_whisker(row.get("frequency"), row["ci_low"], row["ci_high"], scale, width)
                if entry.get("n", 0)
                else Text("no reports", style="dim")
            )
            table.add_row(*text, chart)
        table.caption = (
            f"● estimate  ├─┤ {_pct_level(document)} interval  · quarter marks of the axis"
        )
        tables.append(table)
    return tables


def print_series(
    document: dict[str, Any], fmt: str, categories: Sequence[str] | None = None
) -> None:
    """Print a series document as charts, JSON, or CSV (one row per period and category)."""
    if fmt == "json":
        print_json(document)
    elif fmt == "csv":
        rows = [
            [entry.get("period"), entry.get("n"), *(row.get(f) for f in ESTIMATE_FIELDS)]
            for entry in document.get("series", [])
            for row in entry.get("estimates", [])
            if not categories or row.get("category") in categories
        ]
        write_csv(("period", "n", *ESTIMATE_FIELDS), rows)
    else:
        out = console()
        for table in series_charts(document, categories):
            out.print(table)
