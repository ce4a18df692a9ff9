"""Public dimensions: per-cell counts (``cell_counts``) and support (``cell_support``).

Existing databases hold no metric with dimensions, so the new tables start empty: every
stored count stays where it is, the one cell of a metric without dimensions (its
``period_counts``, ``support_counts`` and ``numeric_sums`` rows, which every report still
counts in). Collectors of the previous release ignore the tables.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the two cell tables (as ``tables`` declares them at this revision)."""
    op.create_table(
        "cell_counts",
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("cell", sa.String(300), nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("total", sa.Double, nullable=False),
        sa.Column("total_squares", sa.Double, nullable=False),
        sa.PrimaryKeyConstraint("metric", "period", "cell", name="pk_cell_counts"),
    )
    op.create_table(
        "cell_support",
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("cell", sa.String(300), nullable=False),
        sa.Column("category", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("support", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("metric", "period", "cell", "category", name="pk_cell_support"),
    )


def downgrade() -> None:
    """Drop them (every breakdown is lost; the totals stay)."""
    op.drop_table("cell_support")
    op.drop_table("cell_counts")
