"""Text metrics with dimensions: their sketch counts per cell (``text_cell_counts``).

One row per (metric, period, cell, sketch row): the sketch row's 1,024 cell sums and its
report tally packed (little-endian int64 bytes on SQLite, ``bigint[]`` on PostgreSQL, as
``cell_counts.support``), added in place; a report adds to exactly one. Existing databases hold
no text metric with dimensions (the previous release refuses their specs), so the table starts
empty and every stored count stays where it is. Collectors of the previous release ignore it.

The downgrade drops the table, and refuses (changing nothing) while a text metric with
dimensions is registered: the previous release cannot read that spec, and its counts would be
lost.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


_COUNTS_TYPE = sa.LargeBinary().with_variant(postgresql.ARRAY(sa.BigInteger()), "postgresql")
"""A packed vector of counts, as ``tables.PackedCounts`` stores it on each engine."""


def upgrade() -> None:
    """Create ``text_cell_counts`` (as ``tables`` declares it at this revision)."""
    op.create_table(
        "text_cell_counts",
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("cell", sa.String(300), nullable=False),
        sa.Column("chunk", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("counts", _COUNTS_TYPE, nullable=False),
        sa.PrimaryKeyConstraint("metric", "period", "cell", "chunk", name="pk_text_cell_counts"),
    )


def _text_metrics_with_dimensions() -> list[str]:
    """The registered text metrics that declare dimensions, by name."""
    rows = op.get_bind().execute(sa.text("SELECT name, spec FROM metrics ORDER BY name"))
    return [
        name
        for name, spec in rows
        if json.loads(spec).get("type") == "text" and json.loads(spec).get("dimensions")
    ]


def downgrade() -> None:
    """Drop ``text_cell_counts``; refused while a text metric with dimensions is registered."""
    named = _text_metrics_with_dimensions()
    if named:
        raise RuntimeError(
            f"cannot downgrade below 0011: text metrics with dimensions are registered"
            f" ({', '.join(named)}); the previous release cannot read their specs"
        )
    op.drop_table("text_cell_counts")
