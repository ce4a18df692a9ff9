"""Initial schema: metric registry, raw reports, period and support counts.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the four tables."""
    op.create_table(
        "metrics",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_metrics"),
    )
    op.create_table(
        "reports",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("received", sa.Date(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_reports"),
    )
    op.create_index("ix_reports_metric_period", "reports", ["metric", "period"])
    op.create_table(
        "period_counts",
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("metric", "period", name="pk_period_counts"),
    )
    op.create_table(
        "support_counts",
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("category", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("support", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("metric", "period", "category", name="pk_support_counts"),
    )


def downgrade() -> None:
    """Drop the four tables."""
    op.drop_table("support_counts")
    op.drop_table("period_counts")
    op.drop_index("ix_reports_metric_period", table_name="reports")
    op.drop_table("reports")
    op.drop_table("metrics")
