"""A breakdown (an estimate per slice of a metric's dimensions) as CSV, for ``deniable estimate
--by ... --format csv`` and the dashboard's breakdown download alike (the same bytes).

One row per slice and category (a numeric metric: per slice, its mean), each repeating what
it is from, as every CSV of :mod:`.csvtext` does: the metric and range, the slice's value of
each ``by`` dimension (columns ``by.<name>``), the ``where`` filter (``name:value`` joined by
``;``), the simultaneous and the per-slice confidence, ``suppressed`` and ``note``, then the
slice estimate's own columns (the estimate CSV's, without its metric and range). A suppressed
slice is ONE row whose number cells are all empty: no estimate, no n, nothing to subtract.
Cells pass through :func:`.csvtext.csv_cell`, so a label cannot become a formula.
"""

from __future__ import annotations

from typing import Any

from .csvtext import (
    CATEGORY_FIELDS,
    MEAN_FIELDS,
    MEAN_HOW,
    RENAMED,
    SHARES_HOW,
    csv_text,
    half_width,
)

SLICE_COLUMNS = ("confidence", "slice_confidence", "suppressed", "note")
"""What every row says of its slice, after the range and the slice's values."""


def _where_text(where: dict[str, str]) -> str:
    """The ``where`` filter as ``platform:ios;country:fr`` (empty: none)."""
    return ";".join(f"{name}:{value}" for name, value in where.items())


def breakdown_csv_text(document: dict[str, Any]) -> str:
    """A breakdown document (``GET /v1/metrics/{name}/estimate?by=...``) as CSV text."""
    by = list(document.get("by", []))
    shown = [row["estimate"] for row in document.get("slices", []) if row.get("estimate")]
    numeric = any("mean" in estimate for estimate in shown)
    how = [key for key in (MEAN_HOW if numeric else SHARES_HOW) if key != "confidence"]
    keys = MEAN_FIELDS if numeric else CATEGORY_FIELDS
    fields = [RENAMED.get(key, key) for key in keys] + (["margin"] if numeric else [])
    header = [
        "metric",
        "start",
        "end",
        *(f"by.{name}" for name in by),
        "where",
        *SLICE_COLUMNS,
        *how,
        *fields,
    ]
    leading = [
        document.get("metric"),
        document.get("start"),
        document.get("end"),
    ]
    where = _where_text(document.get("where", {}))
    rows = []
    for row in document.get("slices", []):
        values = [row["values"].get(name) for name in by]
        slice_cells = [
            document.get("confidence"),
            None if row["suppressed"] else document.get("slice_confidence"),
            row["suppressed"],
            row.get("note"),
        ]
        first = [*leading, *values, where, *slice_cells]
        estimate = row.get("estimate")
        if estimate is None:
            rows.append([*first, *(None for _ in how), *(None for _ in fields)])
            continue
        made = [estimate.get(key) for key in how]
        if numeric:
            mean = estimate["mean"]
            rows.append([*first, *made, *(mean.get(key) for key in keys), half_width(mean)])
            continue
        for category in estimate.get("estimates", []):
            rows.append([*first, *made, *(category.get(key) for key in CATEGORY_FIELDS)])
    return csv_text(header, rows)
