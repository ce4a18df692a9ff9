"""Text metrics without dimensions keep their sketch counts packed by sketch row, as those with
dimensions do: one ``text_cell_counts`` row per (metric, period, sketch row), cell ``''``.

Before, such a metric kept one ``support_counts`` row per nonzero sketch count: a report upserted
every bit it set and its tally (about 277 rows at eps 1, 19 at eps 4), and text ingestion at
eps 1 ran at 0.01 of an oue k = 100 metric's rate. A report sets bits of one sketch row only,
so now it adds to exactly one packed row (its 1,024 cell sums and its tally), written by the
same upsert and read by the same code as a cell's (``textcells``, ``queries``).

The upgrade packs each such metric's ``support_counts`` rows, one period at a time (a sketch
at most: 64 levels x 16 rows x 1,025 counts), into a row per sketch row holding a nonzero
count (little-endian int64 bytes on SQLite, the decimal ``numeric`` of 0013 on PostgreSQL),
then deletes them; the downgrade writes one ``support_counts`` row per nonzero count back and
deletes the packed rows of cell ``''``. Both are lossless. Collectors of the previous release
write ``support_counts`` for these metrics: stop them first.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_CELLS = 1024
"""Cells per sketch row (``TEXT_CELLS`` at this revision)."""
_ROWS = 16
"""Sketch rows per level (``TEXT_ROWS``)."""
_SEGMENT = 1
"""Bytes per prefix level (``TEXT_SEGMENT_BYTES``): a metric has ceil(max_length / it) levels."""
_DIGITS = 13
"""Decimal digits per count in PostgreSQL's packed ``numeric`` (0013)."""


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def _text_metrics() -> dict[str, int]:
    """The registered text metrics without dimensions, each with its sketch rows (levels x
    rows)."""
    rows = op.get_bind().execute(sa.text("SELECT name, spec FROM metrics ORDER BY name"))
    found = {}
    for name, spec in rows:
        fields = json.loads(spec)
        if fields.get("type") == "text" and not fields.get("dimensions"):
            found[name] = -(-int(fields["max_length"]) // _SEGMENT) * _ROWS
    return found


def _periods(metric: str, table: str) -> list[str]:
    query = sa.text(f"SELECT DISTINCT period FROM {table} WHERE metric = :m ORDER BY period")
    return [row[0] for row in op.get_bind().execute(query, {"m": metric})]


def _packed(counts: np.ndarray) -> object:
    """A sketch row's counts as this revision stores them on the current engine."""
    if _postgresql():
        return "".join(f"{count:0{_DIGITS}d}" for count in reversed(counts.tolist()))
    return np.ascontiguousarray(counts, dtype="<i8").tobytes()


def _unpacked(value: object) -> np.ndarray:
    """The int64 counts of a stored packed value (PostgreSQL's read as its decimal text)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(value), dtype="<i8").astype(np.int64)
    digits = str(value).partition(".")[0]
    digits = digits.zfill(-(-len(digits) // _DIGITS) * _DIGITS)
    counts = [int(digits[i : i + _DIGITS]) for i in range(0, len(digits), _DIGITS)]
    return np.asarray(counts[::-1], dtype=np.int64)


def _packed_rows(chunks: int, support: list[tuple[int, int]]) -> Iterator[tuple[int, np.ndarray]]:
    """(sketch row, its cells' counts then its tally) of one period's ``(category, support)``
    rows, for each sketch row with a nonzero count."""
    flat = np.zeros(chunks * (_CELLS + 1), dtype=np.int64)
    for category, count in support:
        if 0 <= category < len(flat):
            flat[category] = count
    rows = np.empty((chunks, _CELLS + 1), dtype=np.int64)
    rows[:, :_CELLS] = flat[: chunks * _CELLS].reshape(chunks, _CELLS)
    rows[:, _CELLS] = flat[chunks * _CELLS :]
    for chunk in np.flatnonzero(rows.any(axis=1)).tolist():
        yield chunk, rows[chunk]


def upgrade() -> None:
    """Pack each text metric's ``support_counts`` by sketch row into ``text_cell_counts``."""
    bind = op.get_bind()
    value = "CAST(:counts AS numeric)" if _postgresql() else ":counts"
    insert = sa.text(
        "INSERT INTO text_cell_counts (metric, period, cell, chunk, counts)"
        f" VALUES (:metric, :period, '', :chunk, {value})"
    )
    read = sa.text("SELECT category, support FROM support_counts WHERE metric = :m AND period = :p")
    for metric, chunks in _text_metrics().items():
        for period in _periods(metric, "support_counts"):
            support = [tuple(row) for row in bind.execute(read, {"m": metric, "p": period})]
            rows = [
                {"metric": metric, "period": period, "chunk": chunk, "counts": _packed(counts)}
                for chunk, counts in _packed_rows(chunks, support)
            ]
            if rows:
                bind.execute(insert, rows)
        bind.execute(sa.text("DELETE FROM support_counts WHERE metric = :m"), {"m": metric})


def downgrade() -> None:
    """One ``support_counts`` row per nonzero packed count of cell ``''``, then drop those
    packed rows."""
    bind = op.get_bind()
    column = "CAST(counts AS TEXT)" if _postgresql() else "counts"
    read = sa.text(
        f"SELECT chunk, {column} FROM text_cell_counts"
        " WHERE metric = :m AND period = :p AND cell = ''"
    )
    insert = sa.text(
        "INSERT INTO support_counts (metric, period, category, support)"
        " VALUES (:metric, :period, :category, :support)"
    )
    for metric, chunks in _text_metrics().items():
        for period in _periods(metric, "text_cell_counts"):
            rows = []
            for chunk, packed in bind.execute(read, {"m": metric, "p": period}):
                counts = np.zeros(_CELLS + 1, dtype=np.int64)
                found = _unpacked(packed)[: _CELLS + 1]
                counts[: len(found)] = found
                places = np.append(chunk * _CELLS + np.arange(_CELLS), chunks * _CELLS + chunk)
                nonzero = np.flatnonzero(counts)
                rows += [
                    {"metric": metric, "period": period, "category": c, "support": s}
                    for c, s in zip(places[nonzero].tolist(), counts[nonzero].tolist(), strict=True)
                ]
            if rows:
                bind.execute(insert, rows)
        bind.execute(
            sa.text("DELETE FROM text_cell_counts WHERE metric = :m AND cell = ''"), {"m": metric}
        )
