"""A breakdown (an estimate per slice of a metric's dimensions) as CSV, for ``deniable estimate
--by ... --format csv`` and the dashboard's breakdown download alike (the same bytes).

One row per slice and category (a numeric metric: per slice, its mean; a text metric: per
slice and string listed, with the slice's reports, mode and floor T95), each repeating what
it is from, as every CSV of :mod:`.csvtext` does: the metric and range, the slice's value of
each ``by`` dimension (columns ``by.<name>``), the ``where`` filter (``name:value`` joined by
``;``), the simultaneous and the per-slice confidence, ``suppressed`` and ``note``, then the
slice estimate's own columns (the estimate CSV's, without its metric and range). A suppressed
slice is ONE row whose number cells are all empty: no estimate, no n, nothing to subtract.
Cells pass through :func:`.csvtext.csv_cell`, so a label cannot become a formula.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .csvtext import (
    CATEGORY_FIELDS,
    MEAN_FIELDS,
    MEAN_HOW,
    SHARES_HOW,
    column_names,
    counted_unit,
    csv_text,
    half_width,
)

SLICE_COLUMNS = ("confidence", "slice_confidence", "suppressed", "note")
"""What every row says of its slice, after the range and the slice's values."""

TEXT_HOW = ("n", "mode", "cap_bound", "floor_t95")
"""What every row of a text metric's slice repeats: its reports, discovery or candidates,
whether the survivor cap bound, and its floor T95."""
TEXT_FIELDS = ("value", "share", "ci_low", "ci_high", "reports", "truncated", "detected")
"""A text metric's row per string of a slice (a shown slice that found none: one row, these
cells empty); its ``reports`` are those of the prefix level the string was scored at, written
``level_reports`` (the slice's own are ``reports``)."""
TEXT_NAMES = {"reports": "level_reports"}
"""A text string's keys written under another name, beside the slice's ``reports``."""

RowMaker = Callable[[list[Any], dict[str, Any], list[str]], list[list[Any]]]
"""The rows of one shown slice from its leading cells, its estimate and the estimate fields
every row repeats."""

Layout = tuple[RowMaker, list[str], list[str], list[str]]
"""How the slices' rows are made (shares, a mean or text strings), the estimate fields every
row repeats, their columns' names, and the value columns."""


def _where_text(where: dict[str, str]) -> str:
    """The ``where`` filter as ``platform:ios;country:fr`` (empty: none)."""
    return ";".join(f"{name}:{value}" for name, value in where.items())


def _layout(by: list[str], slices: list[dict[str, Any]]) -> Layout:
    """The slices' kind, the estimate fields every row repeats and their columns, and the
    value columns (named as the estimate CSV names them: reports, or devices where the
    slices' estimates count devices)."""
    shown = [row["estimate"] for row in slices if row.get("estimate")]
    unit = counted_unit(shown[0] if shown else {})
    if any("strings" in estimate for estimate in shown):
        fields = [TEXT_NAMES.get(key, key) for key in TEXT_FIELDS]
        return _text_rows, list(TEXT_HOW), column_names(TEXT_HOW, unit), fields
    numeric = any("mean" in estimate for estimate in shown)
    how = [key for key in (MEAN_HOW if numeric else SHARES_HOW) if key != "confidence"]
    keys = MEAN_FIELDS if numeric else CATEGORY_FIELDS
    fields = column_names(keys, unit) + (["margin"] if numeric else [])
    return _mean_rows if numeric else _share_rows, how, column_names(how, unit), fields


def _text_rows(first: list[Any], estimate: dict[str, Any], how: list[str]) -> list[list[Any]]:
    """A shown text slice's rows: one per string listed (one without strings if none)."""
    made = [*(estimate.get(key) for key in TEXT_HOW[:-1]), estimate["floor"]["t95"]]
    strings = estimate.get("strings") or [{}]
    return [[*first, *made, *(row.get(key) for key in TEXT_FIELDS)] for row in strings]


def _mean_rows(first: list[Any], estimate: dict[str, Any], how: list[str]) -> list[list[Any]]:
    """A shown numeric slice's row: its mean with the interval's half width."""
    made = [estimate.get(key) for key in how]
    mean = estimate["mean"]
    return [[*first, *made, *(mean.get(key) for key in MEAN_FIELDS), half_width(mean)]]


def _share_rows(first: list[Any], estimate: dict[str, Any], how: list[str]) -> list[list[Any]]:
    """A shown slice's rows of shares: one per category."""
    made = [estimate.get(key) for key in how]
    return [
        [*first, *made, *(category.get(key) for key in CATEGORY_FIELDS)]
        for category in estimate.get("estimates", [])
    ]


def _slice_rows(
    document: dict[str, Any],
    leading: list[Any],
    slices: list[dict[str, Any]],
    slice_confidence: float | None,
    layout: Layout,
) -> list[list[Any]]:
    """The rows of ``slices``: ``leading`` cells, the slice's values and filter and what it
    is, then a row per category (a mean: one), or one row without numbers if suppressed."""
    make_rows, how, _, fields = layout
    by = list(document.get("by", []))
    where = _where_text(document.get("where", {}))
    rows = []
    for row in slices:
        values = [row["values"].get(name) for name in by]
        slice_cells = [
            document.get("confidence"),
            None if row["suppressed"] else slice_confidence,
            row["suppressed"],
            row.get("note"),
        ]
        first = [*leading, *values, where, *slice_cells]
        estimate = row.get("estimate")
        if estimate is None:
            rows.append([*first, *(None for _ in how), *(None for _ in fields)])
            continue
        rows += make_rows(first, estimate, how)
    return rows


def _header(leading: list[str], by: list[str], layout: Layout) -> list[str]:
    """The columns: ``leading``, the ``by`` dimensions, the filter and the slice's, then the
    layout's."""
    _, _, how, fields = layout
    return [*leading, *(f"by.{name}" for name in by), "where", *SLICE_COLUMNS, *how, *fields]


def breakdown_csv_text(document: dict[str, Any]) -> str:
    """A breakdown document (``GET /v1/metrics/{name}/estimate?by=...``) as CSV text."""
    slices = list(document.get("slices", []))
    layout = _layout(list(document.get("by", [])), slices)
    header = _header(["metric", "start", "end"], list(document.get("by", [])), layout)
    leading = [document.get("metric"), document.get("start"), document.get("end")]
    rows = _slice_rows(document, leading, slices, document.get("slice_confidence"), layout)
    return csv_text(header, rows)


def slice_series_csv_text(document: dict[str, Any]) -> str:
    """A series by slice (``GET /v1/metrics/{name}/series?by=...``) as CSV text: the
    breakdown CSV's rows for each period in turn, ``period`` in place of the range."""
    points = list(document.get("series", []))
    layout = _layout(
        list(document.get("by", [])), [row for point in points for row in point["slices"]]
    )
    header = _header(["metric", "period"], list(document.get("by", [])), layout)
    rows = []
    for point in points:
        leading = [document.get("metric"), point.get("period")]
        rows += _slice_rows(document, leading, point["slices"], point["slice_confidence"], layout)
    return csv_text(header, rows)
