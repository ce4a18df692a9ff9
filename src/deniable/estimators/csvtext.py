"""CSV as every document is written for people's spreadsheets: the CLI's ``--format csv`` and
the dashboard's downloads both write through this module, so a document has ONE CSV schema
whichever of them wrote it (docs/DESIGN.md, "CSV").

Every row repeats the document fields that say how it was made (metric, range or period, its
reports, method, confidence, ...), so a row read alone is complete. Columns are the JSON
document's keys, except three named for what they hold (:func:`column_names`): ``n``, written
``reports`` (``devices`` where the document counts devices: an event metric over one window),
``count``, written ``estimated_reports`` (``estimated_devices``; it is n times a debiased share,
not a tally), and a mean's ``estimate``, written ``mean``. Booleans are ``true``/``false`` (as in
the JSON), ``None`` an empty cell, floats at full precision.

Category labels are chosen by whoever registers a metric, so a cell may read
``=cmd|' /C calc'!A0``: a spreadsheet opening the file would run it as a formula (CSV formula
injection, OWASP). A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return gets a leading ``'``, which spreadsheets show as text and never evaluate; numbers (and
text that is a plain number, such as ``-1.5``) stay as they are, so they stay numbers. Rows end
in CRLF (RFC 4180), so the csv module quotes any cell holding a CR or LF and a label can never
split a row.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any, TextIO

from .documents import counted_unit

FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
"""The first characters that make a spreadsheet read a cell as a formula (OWASP's list)."""

PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
"""Text that is only a number, which no spreadsheet evaluates as a formula."""

CATEGORY_FIELDS = (
    "category",
    "frequency",
    "std_error",
    "ci_low",
    "ci_high",
    "count",
    "unbiased",
    "clipped",
)
"""One category's keys in an estimate or series document, in CSV column order."""

QUANTILE_COLUMNS = ("quantile", "quantile_low", "quantile_high", "unit")
"""The histogram estimate's extra columns: a quantile ``q``, its interval's ends (bucket
edges, value units; empty where the quantile may lie beyond the outer edge) and the metric's
unit (empty if it has none)."""

MEAN_FIELDS = ("estimate", "std_error", "ci_low", "ci_high")
"""A mean's keys, in CSV column order (``estimate`` is written ``mean``), then its margin."""


SHARES_HOW = ("n", "periods", "pooling", "method", "confidence", "simultaneous")
"""The estimate document's fields every shares row repeats."""
MEAN_HOW = ("n", "periods", "pooling", "confidence", "lower", "upper", "unit")
"""The numeric estimate document's fields its row holds (``unit`` empty if it has none)."""
SERIES_HOW = ("method", "confidence", "simultaneous")
"""The series document's fields every row repeats, after its period's reports."""
MEAN_SERIES_HOW = ("confidence", "lower", "upper", "unit")
"""The numeric series document's fields every row repeats, after its period's reports."""


def csv_cell(value: Any) -> Any:
    """A value as a safe CSV cell: None empty, a boolean ``true``/``false``, formula-leading
    text behind a ``'``, the rest as it is."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    formula = isinstance(value, str) and value.startswith(FORMULA_LEADS)
    return "'" + value if formula and not PLAIN_NUMBER.fullmatch(value) else value


def write_csv(stream: TextIO, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Write ``header`` and ``rows`` to ``stream`` as CSV, every cell through :func:`csv_cell`."""
    writer = csv.writer(stream, lineterminator="\r\n")
    writer.writerow([csv_cell(name) for name in header])
    for row in rows:
        writer.writerow([csv_cell(value) for value in row])


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """``header`` and ``rows`` as CSV text (:func:`write_csv`)."""
    out = io.StringIO()
    write_csv(out, header, rows)
    return out.getvalue()


def column_names(fields: Iterable[str], unit: str) -> list[str]:
    """Column names for document keys: ``n`` is the ``unit`` counted, ``count`` its estimate
    (``estimated_reports``), a mean's ``estimate`` is ``mean``; other keys as they are."""
    renamed = {"n": unit, "count": f"estimated_{unit}", "estimate": "mean"}
    return [renamed.get(field, field) for field in fields]


def half_width(mean: dict[str, Any]) -> float | None:
    """A mean's margin: half its interval's width (None without reports)."""
    if mean.get("estimate") is None:
        return None
    return (float(mean["ci_high"]) - float(mean["ci_low"])) / 2


def _mean_cells(mean: dict[str, Any]) -> list[Any]:
    """A mean's cells: :data:`MEAN_FIELDS`, then its margin."""
    return [*(mean.get(field) for field in MEAN_FIELDS), half_width(mean)]


def estimate_csv_text(document: dict[str, Any]) -> str:
    """An estimate document (any metric type) as CSV text.

    Shares: a row per category (a histogram's buckets in order, then a row per quantile in
    the :data:`QUANTILE_COLUMNS`, its category cells empty). A numeric metric: one row, its
    mean.
    """
    leading = ["metric", "start", "end"]
    unit = counted_unit(document)
    if "mean" in document:
        how = [document.get(key) for key in (*leading, *MEAN_HOW)]
        header = [*leading, *column_names((*MEAN_HOW, *MEAN_FIELDS), unit), "margin"]
        return csv_text(header, [[*how, *_mean_cells(document["mean"])]])
    how = [document.get(key) for key in (*leading, *SHARES_HOW)]
    quantiles = document.get("quantiles")
    extra = QUANTILE_COLUMNS if quantiles is not None else ()
    header = [*leading, *column_names((*SHARES_HOW, *CATEGORY_FIELDS), unit), *extra]
    rows = [
        [*how, *(row.get(key) for key in CATEGORY_FIELDS), *(None for _ in extra)]
        for row in document.get("estimates", [])
    ]
    blank = [None] * len(CATEGORY_FIELDS)
    for entry in quantiles or []:
        rows.append(
            [
                *how,
                *blank,
                entry.get("q"),
                entry.get("low"),
                entry.get("high"),
                document.get("unit"),
            ]
        )
    return csv_text(header, rows)


def series_csv_text(document: dict[str, Any], categories: Collection[str] | None = None) -> str:
    """A series document as CSV text: a row per period and category (only ``categories``,
    when given), or a numeric metric's row per period with its mean."""
    metric = document.get("metric")
    points = document.get("series", [])
    unit = counted_unit(document)
    if "lower" in document:
        how = [document.get(key) for key in MEAN_SERIES_HOW]
        names = column_names(("n", *MEAN_SERIES_HOW, *MEAN_FIELDS), unit)
        header = ["metric", "period", *names, "margin"]
        rows = [
            [metric, point.get("period"), point.get("n"), *how, *_mean_cells(point["mean"])]
            for point in points
        ]
        return csv_text(header, rows)
    how = [document.get(key) for key in SERIES_HOW]
    header = ["metric", "period", *column_names(("n", *SERIES_HOW, *CATEGORY_FIELDS), unit)]
    rows = [
        [metric, point.get("period"), point.get("n"), *how]
        + [row.get(key) for key in CATEGORY_FIELDS]
        for point in points
        for row in point.get("estimates", [])
        if categories is None or row.get("category") in categories
    ]
    return csv_text(header, rows)
