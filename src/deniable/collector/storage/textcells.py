"""A text metric's sketch counts per cell (``text_cell_counts``), one packed row per (period,
cell, sketch row); a metric without dimensions has the one cell ``""`` (migration 0017).

A text report sets bits of one sketch row only, its (level, row), and adds one to that pair's
tally (:class:`.kindrows.TextRows`), so per cell the counts are kept by sketch row: the row's
1,024 cell sums and its tally, packed in one value (``chunk`` = (level - 1) × 16 + row). A
report adds to exactly one such row whatever its eps; a group of reports upserts one row per
(period, cell, sketch row) it touches, each added in place (SQLite: the sums with the stored rows,
:mod:`.packedsums`; PostgreSQL: one numeric addition, :data:`.tables.COUNT_DIGITS`). Measured against one row per
nonzero count (a report's 19 set bits at eps 4, 277 at eps 1; how a metric without dimensions
kept them before 0017) and one packed row per cell (a whole sketch, 1 MB at 8 bytes, rewritten
by every group touching the cell): ``python -m bench.text_cells``, ``python -m bench.ingest
--text`` and docs/DESIGN.md, "Text metrics with dimensions".

Ingestion only counts the reports the insert found new (the same masks as every other count),
summed over the whole group per (metric, period, cell, chunk) and upserted in one statement in
sorted key order after every other count, so the lock order stays reports, totals, cells, text
cells. Reads are in :mod:`.queries` (``read_text_cells``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, select, text, true
from sqlalchemy.dialects import sqlite

from .engine import Database
from .kindrows import TextRows
from .packedsums import plus_stored
from .sqlitejson import blob_cut, blob_spans, json_each_rows, json_items
from .tables import decimal_counts, pack_counts, text_cell_counts

ChunkKey = tuple[str, str, str, int]
"""(metric, period, cell, chunk): one sketch row of one cell."""

ChunkCounts = dict[ChunkKey, np.ndarray]
"""Each touched sketch row's increments: its 1,024 cell sums, then its tally."""


@dataclass(frozen=True)
class TextCellRows:
    """One text metric's reports of a batch grouped by (period, cell): their positions in the
    batch, each report's group (``codes`` into ``groups``), its sketch row (``chunks``) and its
    cells' bits (reports × cells, :class:`.kindrows.TextRows`), and the sketch's
    ``sketch_rows`` (levels × rows)."""

    positions: np.ndarray
    groups: list[tuple[str, str]]
    codes: np.ndarray
    chunks: np.ndarray
    bits: np.ndarray
    sketch_rows: int

    def increments(self, metric: str, mask: np.ndarray | None = None) -> ChunkCounts:
        """The increments per (period, cell, chunk) of the reports ``mask`` selects (all if
        None): one ``bincount`` of their set bits by (touched sketch row, cell), and each
        row's tally (its reports)."""
        rows = np.arange(len(self.chunks)) if mask is None else np.flatnonzero(mask)
        if not len(rows):
            return {}
        keys, which = np.unique(
            self.codes[rows] * self.sketch_rows + self.chunks[rows], return_inverse=True
        )
        which = which.reshape(-1)
        cells = self.bits.shape[1]
        # Each set bit's flat position (report × cells + cell; a 2-D ``nonzero`` or a division
        # costs several times as much) moved to its sketch row's: its report's offset repeated.
        bits = self.bits[rows]
        offsets = (which - np.arange(len(rows))) * cells
        place = np.flatnonzero(bits) + np.repeat(offsets, bits.sum(axis=1))
        sums = np.empty((len(keys), chunk_width(cells)), dtype=np.int64)
        found = np.bincount(place, minlength=len(keys) * cells)
        sums[:, :cells] = found.reshape(len(keys), cells)
        sums[:, cells] = np.bincount(which, minlength=len(keys))
        out: ChunkCounts = {}
        for j, key in enumerate(keys.tolist()):
            period, cell = self.groups[key // self.sketch_rows]
            out[(metric, period, cell, key % self.sketch_rows)] = sums[j]
        return out


def chunk_width(cells: int) -> int:
    """The counts one packed row holds: a sketch row's cells and its tally."""
    return cells + 1


def text_cell_rows(
    keys: Sequence[tuple[str, str]], rows: TextRows, sketch_rows: int
) -> TextCellRows:
    """The text ``rows`` (each with its (period, cell) in ``keys``; the sketch's
    ``sketch_rows``) grouped by (period, cell)."""
    index: dict[tuple[str, str], int] = {}
    codes = np.fromiter(
        (index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys)
    )
    return TextCellRows(rows.positions, list(index), codes, rows.chunks, rows.bits, sketch_rows)


def add_chunks(total: ChunkCounts, more: ChunkCounts) -> None:
    """Add ``more`` into ``total``."""
    for key, counts in more.items():
        total[key] = total[key] + counts if key in total else counts


def _sqlite_upsert() -> Any:
    """SQLite: the upsert fed one JSON text of (metric, period, cell, chunk, offset, length)
    rows and one blob of every row's packed counts (cut out by offset and length), each
    already the sum with the stored counts (:func:`.packedsums.plus_stored`): one call into
    SQLite."""
    each = json_each_rows()
    values = json_items(each, range(4))
    packed = blob_cut(each, "counts", 4)
    stmt = sqlite.insert(text_cell_counts).from_select(
        ["metric", "period", "cell", "chunk", "counts"],
        select(*values, packed).select_from(each).where(true()),
    )
    return stmt.on_conflict_do_update(
        index_elements=["metric", "period", "cell", "chunk"],
        set_={"counts": stmt.excluded.counts},
    )


_SQLITE_UPSERT = _sqlite_upsert()

_SEP = "\x1f"
"""Separates the values of a text column of the PostgreSQL statement (metric names, period
labels and cell texts hold no control character)."""

_PG_UPSERT = text("""
INSERT INTO text_cell_counts AS t (metric, period, cell, chunk, counts)
SELECT * FROM unnest(
    string_to_array(:metrics, :sep),
    string_to_array(:periods, :sep),
    (string_to_array(:cells, :sep))[2:],
    string_to_array(:chunks, ',')::int[],
    string_to_array(:counts, ',')::numeric[]
)
ON CONFLICT (metric, period, cell, chunk) DO UPDATE SET counts = t.counts + excluded.counts
""")
"""PostgreSQL: the upsert as one statement, each column one text parameter (as
:data:`.pgupserts.STORE`; a row's counts as its packed ``numeric``, :func:`.tables.decimal_counts`),
rows distinct and in key order, each row's counts added in place by one numeric addition.
Each cell text follows a separator (the first element, empty, is dropped): a metric without
dimensions has the one cell ``""``, and ``string_to_array`` of one empty text is no element."""


def upsert_text_cells(
    connection: Connection,
    database: Database,
    prepared: Sequence[tuple[dict[str, TextCellRows], ChunkCounts]],
    new: Sequence[np.ndarray] | None,
) -> None:
    """Add the text cell counts of the group's new reports: ``prepared`` holds each batch's
    rows per text metric and their increments if every report is new;
    ``new`` each batch's mask of new reports (None: all are). Nothing for a group without
    text metrics."""
    total: ChunkCounts = {}
    for b, (groups, all_new) in enumerate(prepared):
        if not groups:
            continue
        if new is None or new[b].all():
            add_chunks(total, all_new)
            continue
        for metric, rows in groups.items():
            mask = new[b][rows.positions]
            if mask.any():
                add_chunks(total, rows.increments(metric, mask))
    if not total:
        return
    keys = sorted(total)
    if database.dialect == "sqlite":
        packed = plus_stored(
            connection, text_cell_counts, "counts", keys, [pack_counts(total[key]) for key in keys]
        )
        rows = [[*key, *span] for key, span in zip(keys, blob_spans(packed), strict=True)]
        connection.execute(
            _SQLITE_UPSERT,
            {"rows": json.dumps(rows, separators=(",", ":")), "counts": b"".join(packed)},
        )
        return
    metrics, periods, cells, chunks = zip(*keys, strict=True)
    connection.execute(
        _PG_UPSERT,
        {
            "sep": _SEP,
            "metrics": _SEP.join(metrics),
            "periods": _SEP.join(periods),
            "cells": "".join(_SEP + cell for cell in cells),
            "chunks": ",".join(map(str, chunks)),
            "counts": ",".join(decimal_counts([total[key] for key in keys])),
        },
    )
