"""Shuffled batches: one row per batch the shuffler released (``shuffled_batches``).

The accountant reads their sizes; nothing else changes, and collectors of the previous
release ignore the table.

Revision ID: 0009
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``shuffled_batches`` (as ``tables`` declares it at this revision)."""
    op.create_table(
        "shuffled_batches",
        sa.Column("batch", sa.String(32), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("mechanism", sa.String(16), nullable=False),
        sa.Column("epsilon", sa.Double, nullable=False),
        sa.Column("fingerprint", sa.String(16), nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("batch", name="pk_shuffled_batches"),
    )


def downgrade() -> None:
    """Drop it (the batch sizes are lost; the reports stay)."""
    op.drop_table("shuffled_batches")
