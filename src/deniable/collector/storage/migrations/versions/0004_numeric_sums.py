"""Numeric metrics: ``numeric_sums`` (n, sum of y, sum of y^2 per metric and period).

A new table only: the upgrade touches no existing row, and collectors of the previous release
keep working beside it (they refuse numeric specs, so nothing of theirs belongs in it). The
downgrade drops it, and with it the sums of every numeric metric: their raw reports stay, but
estimates of numeric metrics need this table (upgrade again before serving them).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``numeric_sums``."""
    op.create_table(
        "numeric_sums",
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.Double(), nullable=False),
        sa.Column("total_squares", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("metric", "period", name="pk_numeric_sums"),
    )


def downgrade() -> None:
    """Drop ``numeric_sums``."""
    op.drop_table("numeric_sums")
