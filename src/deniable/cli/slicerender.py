"""A breakdown (``deniable estimate NAME --by platform``) printed slice by slice: each shown
slice's estimate as ``deniable estimate`` prints one, each suppressed slice as one line that
says so and carries no number (``--format csv`` writes :mod:`deniable.estimators.slicecsv`'s
CSV, the dashboard's breakdown download byte for byte); a period comparison (``--compare-to``)
the same way, each slice's change per category with its interval and verdict."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from deniable.client.errors import InvalidInput
from deniable.estimators.slicecsv import breakdown_csv_text, slice_series_csv_text

from .render import console, decimals_for, percent, print_estimate, print_facts, print_json


def slice_title(values: dict[str, str]) -> str:
    """A slice named by its dimension values: ``platform=ios, country=fr``."""
    return ", ".join(f"{name}={value}" for name, value in values.items())


def print_breakdown(document: dict[str, Any], fmt: str) -> None:
    """Print a breakdown document as JSON, CSV (a row per slice and category), or a heading
    and one table per slice."""
    if fmt == "json":
        print_json(document)
        return
    if fmt == "csv":
        sys.stdout.write(breakdown_csv_text(document))
        return
    out = console()
    where = document["where"]
    head = f"{document['metric']} by {', '.join(document['by']) or 'slice'}"
    if where:
        head += f" where {slice_title(where)}"
    print_facts(out, f"{head}, {document['start']} to {document['end']}", "bold")
    print_facts(
        out,
        f"every interval shown holds at once at {document['confidence']:.4g}"
        f" (each slice at {document['slice_confidence']:.4g}); slices with fewer than"
        f" {document['min_slice_reports']:,} reports are suppressed",
        "dim",
    )
    for row in document["slices"]:
        title = slice_title(row["values"]) or "all"
        if row["suppressed"]:
            out.print(f"\n{title}: {row['note']}")
            continue
        out.print(f"\n[bold]{title}[/bold]")
        print_estimate(row["estimate"], fmt)


def _signed(value: float | None, numeric: bool, places: int) -> str:
    """A difference: ``+2.1 pts`` for shares, ``+12.5`` in value units for a mean."""
    if value is None:
        return "—"
    if numeric:
        return f"{value:+,.{places}f}"
    return f"{value * 100:+.1f} pts"


def _level(value: float | None, numeric: bool, places: int) -> str:
    if value is None:
        return "—"
    return f"{value:,.{places}f}" if numeric else percent(value)


def _window(start: str, end: str) -> str:
    return start if start == end else f"{start}..{end}"


def change_table(document: dict[str, Any], rows: list[dict[str, Any]]) -> Table:
    """One slice's change: each category's (or the mean's) value in both windows, the
    difference with its interval, and the verdict."""
    numeric = "lower" in document and document.get("lower") is not None
    places = 0
    if numeric:
        widths = [r["ci_high"] - r["ci_low"] for r in rows if r["difference"] is not None]
        places = decimals_for(
            min(widths) / 2 if widths else None, document["lower"], document["upper"]
        )
    table = Table(expand=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("category", "left"),
        ("current", "right"),
        ("baseline", "right"),
        ("difference", "right"),
        ("interval", "right"),
        ("verdict", "left"),
    )
    for header, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)
    for row in rows:
        low, high = row["ci_low"], row["ci_high"]
        span = f"[{_signed(low, numeric, places)}, {_signed(high, numeric, places)}]"
        style = "bold" if row["verdict"] in ("higher", "lower") else ""
        table.add_row(
            row["category"],
            _level(row["current"], numeric, places),
            _level(row["baseline"], numeric, places),
            _signed(row["difference"], numeric, places),
            span,
            Text(row["verdict"], style=style),
        )
    return table


def print_changes(document: dict[str, Any], fmt: str) -> None:
    """Print a period comparison (``--compare-to``) as JSON, or per slice a table of each
    category's change with its interval and verdict (suppressed slices as one line)."""
    if fmt == "json":
        print_json(document)
        return
    if fmt == "csv":
        raise InvalidInput("--compare-to prints a table or JSON (--format json), not CSV")
    out = console()
    head = (
        f"{document['metric']}: current {_window(document['start'], document['end'])} minus"
        f" baseline {_window(document['baseline_start'], document['baseline_end'])}"
    )
    if document["by"]:
        head += f" by {', '.join(document['by'])}"
    if document["where"]:
        head += f" where {slice_title(document['where'])}"
    print_facts(out, head, "bold")
    print_facts(
        out,
        f"every difference shown holds at once at {document['confidence']:.4g} (each at"
        f" {document['row_confidence']:.6g}), valid whatever devices report in both windows",
        "dim",
    )
    for row in document["slices"]:
        title = slice_title(row["values"])
        if row["suppressed"]:
            out.print(f"\n{title}: {row['note']}")
            continue
        if title:
            out.print(f"\n[bold]{title}[/bold]")
        out.print(f"reports: {row['n']:,} against {row['baseline_n']:,}")
        out.print(change_table(document, row["rows"]))


def print_slice_series(document: dict[str, Any], fmt: str) -> None:
    """Print a series by slice as JSON or CSV (a row per period, slice and category)."""
    if fmt == "json":
        print_json(document)
        return
    sys.stdout.write(slice_series_csv_text(document))
