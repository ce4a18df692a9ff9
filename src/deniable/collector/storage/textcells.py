"""A text metric's sketch counts per cell (``text_cell_counts``), one packed row per (period,
cell, sketch row); a metric without dimensions has the one cell ``""`` (migration 0017).

A text report sets bits of one sketch row only, its (level, row), and adds one to that pair's
tally (:class:`.kindrows.TextRows`), so per cell the counts are kept by sketch row: the row's
1,024 cell sums and its tally, packed in one value (``chunk`` = (level - 1) × 16 + row). A
report adds to exactly one such row whatever its eps; a fold upserts one row per (period,
cell, sketch row) it touches, each added in place (SQLite: the sums with the stored rows,
:mod:`.packedsums`; PostgreSQL: one numeric addition, :data:`.tables.COUNT_DIGITS`). Measured
against one row per nonzero count (a report's 19 set bits at eps 4, 277 at eps 1; how a metric
without dimensions kept them before 0017) and one packed row per cell (a whole sketch, 1 MB
at 8 bytes, rewritten by every group touching the cell): ``python -m bench.text_cells``,
``python -m bench.ingest --text`` and docs/DESIGN.md, "Text metrics with dimensions".

Ingestion only counts the reports the insert found new (the same masks as every other count).
It appends them to ``text_pending``, one row per (metric, period, cell) per group, and a fold
(:mod:`.textbacklog`) sums many groups' rows per (metric, period, cell, chunk) and upserts
them in one statement in sorted key order; a database not yet migrated to 0019 gets each
group's sums upserted at once, after every other count, so the lock order stays reports,
totals, cells, text cells. Reads are in :mod:`.queries` (``read_text_cells``), and add the
pending rows to the counts.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import Connection, select, text, true
from sqlalchemy.dialects import sqlite

from deniable.client.mechanisms import PrefixSketch
from deniable.estimators.support import oue_bits

from .kindrows import TextRows
from .packedsums import plus_stored
from .pgnumeric import NumericArray
from .sqlitejson import blob_cut, blob_spans, json_each_rows, json_items
from .tables import pack_counts, text_cell_counts

ChunkKey = tuple[str, str, str, int]
"""(metric, period, cell, chunk): one sketch row of one cell."""

ChunkCounts = dict[ChunkKey, np.ndarray]
"""Each touched sketch row's increments: its 1,024 cell sums, then its tally."""


class PendingRow(NamedTuple):
    """One ``text_pending`` row: a (metric, period, cell)'s new reports of one group, their
    count, each one's sketch row (little-endian 16-bit) and their ``"b"`` texts joined."""

    metric: str
    period: str
    cell: str
    reports: int
    chunks: bytes
    payloads: bytes


@dataclass(frozen=True)
class TextCellRows:
    """One text metric's reports of a batch grouped by (period, cell): their positions in the
    batch, each report's group (``codes`` into ``groups``), its sketch row (``chunks``) and its
    ``"b"`` text's ASCII codes (``encoded``, reports × length, :class:`.kindrows.TextRows`),
    and the sketch's ``sketch_rows`` (levels × rows) and ``cells`` per sketch row."""

    positions: np.ndarray
    groups: list[tuple[str, str]]
    codes: np.ndarray
    chunks: np.ndarray
    encoded: np.ndarray
    sketch_rows: int
    cells: int

    def increments(self, metric: str, mask: np.ndarray | None = None) -> ChunkCounts:
        """The increments per (period, cell, chunk) of the reports ``mask`` selects (all if
        None): their bits decoded and summed by touched sketch row, and each row's tally (its
        reports). Sorted by sketch row, a row of several reports (a fold's, mostly) sums its
        rows of bits at once; a batch of scattered reports takes one ``bincount`` of every
        set bit's place instead."""
        rows = np.arange(len(self.chunks)) if mask is None else np.flatnonzero(mask)
        if not len(rows):
            return {}
        touched = self.codes[rows] * self.sketch_rows + self.chunks[rows]
        order = np.argsort(touched, kind="stable")
        rows, touched = rows[order], touched[order]
        starts = np.flatnonzero(np.r_[True, touched[1:] != touched[:-1]])
        bounds = np.r_[starts, len(rows)]
        cells = self.cells
        bits = oue_bits(self.encoded[rows], cells)
        sums = np.empty((len(starts), chunk_width(cells)), dtype=np.int64)
        sums[:, cells] = np.diff(bounds)
        if len(starts) * SUMMED_ROWS <= len(rows):
            for j, (start, stop) in enumerate(itertools.pairwise(bounds.tolist())):
                sums[j, :cells] = bits[start:stop].sum(axis=0, dtype=np.int64)
        else:
            # Each set bit's flat place (report × cells + cell) moved to its sketch row's.
            which = np.repeat(np.arange(len(starts)), sums[:, cells])
            offsets = (which - np.arange(len(rows))) * cells
            place = np.flatnonzero(bits) + np.repeat(offsets, bits.sum(axis=1))
            found = np.bincount(place, minlength=len(starts) * cells)
            sums[:, :cells] = found.reshape(len(starts), cells)
        out: ChunkCounts = {}
        for j, key in enumerate(touched[starts].tolist()):
            period, cell = self.groups[key // self.sketch_rows]
            out[(metric, period, cell, key % self.sketch_rows)] = sums[j]
        return out

    def pending(self, metric: str, mask: np.ndarray | None = None) -> list[PendingRow]:
        """The ``text_pending`` rows of the reports ``mask`` selects (all if None): one per
        (period, cell), its reports in batch order."""
        rows = np.arange(len(self.chunks)) if mask is None else np.flatnonzero(mask)
        if not len(rows):
            return []
        order = rows[np.argsort(self.codes[rows], kind="stable")]
        codes = self.codes[order]
        starts = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist(), len(order)]
        chunks = self.chunks.astype(PENDING_CHUNK)
        out = []
        for start, stop in itertools.pairwise(starts):
            picked = order[start:stop]
            period, cell = self.groups[int(codes[start])]
            out.append(
                PendingRow(
                    metric,
                    period,
                    cell,
                    stop - start,
                    chunks[picked].tobytes(),
                    self.encoded[picked].tobytes(),
                )
            )
        return out


SUMMED_ROWS = 4
"""Reports per touched sketch row (on average) from which :meth:`TextCellRows.increments` sums
each row's bits directly rather than counting every set bit's place (twice as fast for a fold's
16 a row, slower for scattered reports)."""

PENDING_CHUNK = np.dtype("<u2")
"""How ``text_pending.chunks`` stores each report's sketch row."""


def pending_increments(
    metric: str, sketch: PrefixSketch, rows: Sequence[tuple[str, str, bytes, bytes]]
) -> ChunkCounts:
    """The increments per (period, cell, chunk) of ``metric``'s ``text_pending`` rows, each
    (period, cell, chunks, payloads); ``sketch`` is the metric's."""
    if not rows:
        return {}
    index: dict[tuple[str, str], int] = {}
    chunks = [np.frombuffer(row[2], dtype=PENDING_CHUNK) for row in rows]
    codes = np.repeat(
        [index.setdefault((period, cell), len(index)) for period, cell, _, _ in rows],
        [len(c) for c in chunks],
    )
    joined = np.concatenate(chunks).astype(np.int64)
    encoded = np.frombuffer(b"".join(row[3] for row in rows), dtype=np.uint8)
    grouped = TextCellRows(
        np.arange(len(joined)),
        list(index),
        codes,
        joined,
        encoded.reshape(len(joined), -1),
        sketch.levels * sketch.rows,
        sketch.cells,
    )
    return grouped.increments(metric)


def chunk_width(cells: int) -> int:
    """The counts one packed row holds: a sketch row's cells and its tally."""
    return cells + 1


def text_cell_rows(
    keys: Sequence[tuple[str, str]], rows: TextRows, sketch: PrefixSketch
) -> TextCellRows:
    """The text ``rows`` (each with its (period, cell) in ``keys``, of ``sketch``) grouped by
    (period, cell)."""
    sketch_rows, cells = sketch.levels * sketch.rows, sketch.cells
    index: dict[tuple[str, str], int] = {}
    codes = np.fromiter(
        (index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys)
    )
    return TextCellRows(
        rows.positions, list(index), codes, rows.chunks, rows.encoded, sketch_rows, cells
    )


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
    CAST(:counts AS numeric[])
)
ON CONFLICT (metric, period, cell, chunk) DO UPDATE SET counts = t.counts + excluded.counts
""")
"""PostgreSQL: the upsert as one statement, each key column one text parameter (as
:data:`.pgupserts.STORE`) and the counts one binary ``numeric[]`` (:mod:`.pgnumeric`, each
row's packed ``numeric``), rows distinct and in key order, each row's counts added in place
by one numeric addition.
Each cell text follows a separator (the first element, empty, is dropped): a metric without
dimensions has the one cell ``""``, and ``string_to_array`` of one empty text is no element."""


def text_increments(
    grouped: Sequence[dict[str, TextCellRows]], new: Sequence[np.ndarray] | None
) -> ChunkCounts:
    """The text cell counts of a group's new reports: ``grouped`` holds each batch's rows per
    text metric, ``new`` each batch's mask of new reports (None: all are)."""
    total: ChunkCounts = {}
    for b, groups in enumerate(grouped):
        for metric, rows in groups.items():
            mask = None if new is None else new[b][rows.positions]
            if mask is None or mask.any():
                add_chunks(total, rows.increments(metric, mask))
    return total


def write_chunk_counts(connection: Connection, total: ChunkCounts) -> None:
    """Add ``total`` into ``text_cell_counts``, rows in sorted key order (the lock order)."""
    if not total:
        return
    keys = sorted(total)
    if connection.dialect.name == "sqlite":
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
            "counts": NumericArray.of_counts([total[key] for key in keys]),
        },
    )
