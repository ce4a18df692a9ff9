"""A breakdown (``deniable estimate NAME --by platform``) printed slice by slice: each shown
slice's estimate as ``deniable estimate`` prints one, each suppressed slice as one line that
says so and carries no number (``--format csv`` writes :mod:`deniable.estimators.slicecsv`'s
CSV, the dashboard's breakdown download byte for byte); a period comparison (``--compare-to``)
the same way, each slice's change per category with its interval and verdict."""

from __future__ import annotations

import sys
from typing import Any

from rich.table import Table
from rich.text import Text

from deniable.estimators.slicecsv import breakdown_csv_text, slice_series_csv_text

from .render import (
    console,
    decimals_for,
    interval,
    level_text,
    mean_texts,
    number_column,
    percent,
    print_estimate,
    print_facts,
    print_json,
    words_column,
    write_csv,
)


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
    head = document["metric"] + (f" by {', '.join(document['by'])}" if document["by"] else "")
    if where:
        head += f" where {slice_title(where)}"
    print_facts(out, f"{head}, {document['start']} to {document['end']}", "bold")
    print_facts(
        out,
        f"every interval shown holds at once at {level_text(document['confidence'])}"
        f" (each slice at {level_text(document['slice_confidence'])}); slices with fewer than"
        f" {document['min_slice_reports']:,} reports are suppressed",
        "dim",
    )
    for row in document["slices"]:
        title = slice_title(row["values"]) or slice_title(where) or "all"
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
    words_column(table, "category")
    for header in ("current", "baseline", "difference"):
        number_column(table, header)
    table.add_column("interval", justify="right")
    words_column(table, "verdict")
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
        write_changes_csv(document)
        return
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
        f"every difference shown holds at once at {level_text(document['confidence'])} (each"
        f" at {level_text(document['row_confidence'])}), valid whatever devices report in both"
        " windows",
        "dim",
    )
    for row in document["slices"]:
        title = slice_title(row["values"])
        if row["suppressed"]:
            out.print(f"\n{title}: {row['note']}")
            continue
        if title:
            out.print(f"\n[bold]{title}[/bold]")
        out.print(
            f"reports: {row['n']:,} in the current window, {row['baseline_n']:,} in the baseline"
        )
        out.print(change_table(document, row["rows"]))


CHANGE_CSV_FIELDS = (
    "category",
    "current",
    "baseline",
    "difference",
    "ci_low",
    "ci_high",
    "verdict",
)
"""A comparison row's keys, in CSV column order."""


def write_changes_csv(document: dict[str, Any]) -> None:
    """A period comparison as CSV: a row per slice and category, each saying which windows,
    slice, reports and levels it is from; a suppressed slice one row without numbers."""
    by = list(document.get("by") or [])
    where = slice_title(document.get("where") or {})
    header = [
        "metric",
        "start",
        "end",
        "baseline_start",
        "baseline_end",
        *(f"by.{name}" for name in by),
        "where",
        "suppressed",
        "note",
        "reports",
        "baseline_reports",
        "confidence",
        "row_confidence",
        *CHANGE_CSV_FIELDS,
    ]
    windows = [document.get(key) for key in ("start", "end", "baseline_start", "baseline_end")]
    rows = []
    for row in document["slices"]:
        first = [
            document.get("metric"),
            *windows,
            *(row["values"].get(name) for name in by),
            where,
            row["suppressed"],
            row.get("note"),
            row.get("n"),
            row.get("baseline_n"),
            document.get("confidence"),
            document.get("row_confidence"),
        ]
        changes = row.get("rows") or []
        if row["suppressed"] or not changes:
            rows.append([*first, *(None for _ in CHANGE_CSV_FIELDS)])
            continue
        rows += [[*first, *(change.get(key) for key in CHANGE_CSV_FIELDS)] for change in changes]
    write_csv(header, rows)


def print_slice_series(document: dict[str, Any], fmt: str) -> None:
    """Print a series by slice as JSON, CSV (a row per period, slice and category) or a table
    (a row per period, slice and category shown: a boolean's true only)."""
    if fmt == "json":
        print_json(document)
        return
    if fmt == "csv":
        sys.stdout.write(slice_series_csv_text(document))
        return
    out = console()
    by = document.get("by") or []
    head = f"{document['metric']} per period" + (f" by {', '.join(by)}" if by else "")
    where = slice_title(document.get("where") or {})
    if where:
        head += f" where {where}"
    print_facts(out, head, "bold")
    print_facts(
        out,
        f"in each period every interval shown holds at once at"
        f" {level_text(document['confidence'])}; a slice with too few reports in a period is"
        " suppressed there",
        "dim",
    )
    out.print(slice_series_table(document))


def slice_series_table(document: dict[str, Any]) -> Table:
    """A series by slice as one table: per period and slice (a column per --by dimension)
    its reports, then each category shown (a boolean's true; a numeric metric's mean) with
    its estimate and interval; a period where every slice is suppressed is one row."""
    by = list(document.get("by") or [])
    table = Table(expand=False)
    number_column(table, "period", justify="left")
    for name in by:
        words_column(table, name)
    words_column(table, "category")
    number_column(table, "reports")
    number_column(table, "estimate")
    number_column(table, "interval")
    for point in document.get("series", []):
        slices = point["slices"]
        if all(row["suppressed"] or row.get("estimate") is None for row in slices):
            blank = ["" for _ in by]
            if blank:
                blank[0] = "every slice" if len(slices) > 1 else blank[0]
            table.add_row(point["period"], *blank, "", "", Text("suppressed", style="dim"), "")
            continue
        for row in slices:
            values = [str(row["values"].get(name, "")) for name in by]
            estimate = row.get("estimate")
            if row["suppressed"] or estimate is None:
                table.add_row(point["period"], *values, "", "", Text("suppressed", style="dim"), "")
                continue
            reports = f"{estimate.get('n', 0):,}"
            for category, shown, span in _slice_cells(estimate):
                table.add_row(point["period"], *values, category, reports, shown, span)
    return table


def _slice_cells(estimate: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A slice's estimate as (category, estimate, interval) cells: a mean in its units, a
    boolean's true share, or every category's share."""
    if "mean" in estimate:
        lower, upper = float(estimate["lower"]), float(estimate["upper"])
        shown, _, span = mean_texts(estimate["mean"], lower, upper)
        return [("mean", shown, span)]
    rows = estimate.get("estimates", [])
    if [r["category"] for r in rows] == ["false", "true"]:
        rows = rows[1:]
    return [
        (str(r["category"]), percent(r.get("frequency")), interval(r["ci_low"], r["ci_high"]))
        for r in rows
    ]
