"""A breakdown (``deniable estimate NAME --by platform``) printed slice by slice: each shown
slice's estimate as ``deniable estimate`` prints one, each suppressed slice as one line that
says so and carries no number; ``--format csv`` writes :mod:`deniable.estimators.slicecsv`'s
CSV (the dashboard's breakdown download, byte for byte)."""

from __future__ import annotations

import sys
from typing import Any

from deniable.estimators.slicecsv import breakdown_csv_text, slice_series_csv_text

from .render import console, print_estimate, print_facts, print_json


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


def print_slice_series(document: dict[str, Any], fmt: str) -> None:
    """Print a series by slice as JSON or CSV (a row per period, slice and category)."""
    if fmt == "json":
        print_json(document)
        return
    sys.stdout.write(slice_series_csv_text(document))
