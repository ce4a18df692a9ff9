"""A text metric with dimensions: its sketch counts per cell (``text_cell_counts``), sparse.

A text report adds one to a few of its period's sketch counts (its set bits, about 19 at
eps 4, and its (level, row) tally: :class:`.ingest.TextRows`). Without dimensions those are
``support_counts`` rows; with them, the same rows keyed by the report's cell too, so a report
costs as many upserted rows as before whatever the number of cells, and a period stores at
most cells × the sketch's counts (bounded by the spec, ``MAX_TEXT_CELL_COUNTS``). A packed row
per cell, as ``cell_counts`` keeps for the other types, would be a whole sketch (16,400
counts per byte of ``max_length``) rewritten by every group that touches the cell.

Ingestion only counts the reports the insert found new (the same masks as every other
count), summed over the whole group per (metric, period, cell, category), upserted in one
statement in sorted key order after every other count, so the lock order stays reports,
totals, cells, text cells. Reads are in :mod:`.queries` (``read_text_cells``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, Text, bindparam, func, literal_column, select, text, true
from sqlalchemy.dialects import sqlite

from .engine import Database
from .tables import text_cell_counts

CellKey = tuple[str, str, str]
"""(metric, period, cell)."""

SparseCounts = dict[CellKey, tuple[np.ndarray, np.ndarray]]
"""(metric, period, cell) -> (its count indexes, sorted and distinct; what each adds)."""


@dataclass(frozen=True)
class TextCellRows:
    """One text metric's reports of a batch grouped by (period, cell): their positions in the
    batch, each row's group (``codes`` into ``groups``) and its count indexes."""

    positions: np.ndarray
    groups: list[tuple[str, str]]
    codes: np.ndarray
    indexes: list[np.ndarray]
    width: int

    def increments(self, metric: str, mask: np.ndarray | None = None) -> SparseCounts:
        """The nonzero count increments per (period, cell) of the rows ``mask`` selects (all
        if None): one ``np.unique`` over (group, index) pairs, never a dense sketch per cell."""
        rows = np.arange(len(self.indexes)) if mask is None else np.flatnonzero(mask)
        if not len(rows):
            return {}
        sizes = np.fromiter((len(self.indexes[i]) for i in rows), dtype=np.int64, count=len(rows))
        flat = np.concatenate([self.indexes[i] for i in rows]).astype(np.int64)
        flat += np.repeat(self.codes[rows], sizes) * self.width
        keys, counts = np.unique(flat, return_counts=True)
        groups, categories = np.divmod(keys, self.width)
        out: SparseCounts = {}
        starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
        for start, end in zip(starts, [*starts[1:], len(keys)], strict=True):
            period, cell = self.groups[int(groups[start])]
            out[(metric, period, cell)] = (
                categories[start:end],
                counts[start:end].astype(np.int64),
            )
        return out


def text_cell_rows(
    keys: Sequence[tuple[str, str]], positions: np.ndarray, indexes: list[np.ndarray], width: int
) -> TextCellRows:
    """The rows at ``positions`` (each with its (period, cell) in ``keys`` and its count
    ``indexes`` below ``width``) grouped by (period, cell)."""
    index: dict[tuple[str, str], int] = {}
    codes = np.fromiter(
        (index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(positions)
    )
    return TextCellRows(positions, list(index), codes, indexes, width)


def add_sparse(total: SparseCounts, more: SparseCounts) -> None:
    """Add ``more`` into ``total`` (a key in both: its indexes merged, shared ones summed)."""
    for key, (categories, counts) in more.items():
        if key not in total:
            total[key] = (categories, counts)
            continue
        joined = np.concatenate((total[key][0], categories))
        merged, where = np.unique(joined, return_inverse=True)
        summed = np.bincount(where, weights=np.concatenate((total[key][1], counts)))
        total[key] = (merged, summed.astype(np.int64))


def _sqlite_upsert() -> Any:
    """SQLite: the upsert fed one JSON text of (metric, period, cell, category, count) rows."""
    each = func.json_each(bindparam("rows", type_=Text)).table_valued("value", "key")
    values = [func.json_extract(each.c.value, literal_column(f"'$[{i}]'")) for i in range(5)]
    stmt = sqlite.insert(text_cell_counts).from_select(
        ["metric", "period", "cell", "category", "support"],
        select(*values).select_from(each).where(true()),
    )
    return stmt.on_conflict_do_update(
        index_elements=["metric", "period", "cell", "category"],
        set_={"support": text_cell_counts.c.support + stmt.excluded.support},
    )


_SQLITE_UPSERT = _sqlite_upsert()

_SEP = "\x1f"
"""Separates the values of a text column of the PostgreSQL statement (metric names, period
labels and cell texts hold no control character)."""

_PG_UPSERT = text("""
INSERT INTO text_cell_counts AS t (metric, period, cell, category, support)
SELECT * FROM unnest(
    string_to_array(:metrics, :sep),
    string_to_array(:periods, :sep),
    string_to_array(:cells, :sep),
    string_to_array(:categories, ',')::int[],
    string_to_array(:counts, ',')::bigint[]
)
ON CONFLICT (metric, period, cell, category) DO UPDATE SET support = t.support + excluded.support
""")
"""PostgreSQL: the upsert as one statement, each column one text parameter (as the ingest's
``_PG_STORE``), rows distinct and in key order."""


def upsert_text_cells(
    connection: Connection,
    database: Database,
    prepared: Sequence[tuple[dict[str, TextCellRows], SparseCounts]],
    new: Sequence[np.ndarray] | None,
) -> None:
    """Add the text cell counts of the group's new reports: ``prepared`` holds each batch's
    rows per text metric with dimensions and their increments if every report is new;
    ``new`` each batch's mask of new reports (None: all are). Nothing for a group without
    such metrics."""
    total: SparseCounts = {}
    for b, (groups, all_new) in enumerate(prepared):
        if not groups:
            continue
        if new is None or new[b].all():
            add_sparse(total, all_new)
            continue
        for metric, rows in groups.items():
            mask = new[b][rows.positions]
            if mask.any():
                add_sparse(total, rows.increments(metric, mask))
    if not total:
        return
    rows = [
        (*key, category, count)
        for key in sorted(total)
        for category, count in zip(*(a.tolist() for a in total[key]), strict=True)
    ]
    if database.dialect == "sqlite":
        connection.execute(_SQLITE_UPSERT, {"rows": json.dumps(rows, separators=(",", ":"))})
        return
    metrics, periods, cells, categories, counts = zip(*rows, strict=True)
    connection.execute(
        _PG_UPSERT,
        {
            "sep": _SEP,
            "metrics": _SEP.join(metrics),
            "periods": _SEP.join(periods),
            "cells": _SEP.join(cells),
            "categories": ",".join(map(str, categories)),
            "counts": ",".join(map(str, counts)),
        },
    )
