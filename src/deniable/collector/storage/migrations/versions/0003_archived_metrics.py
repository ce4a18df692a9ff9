"""Archived metrics: ``metrics.archived_at``, set when an admin retires a metric.

An archived metric takes no more reports and leaves the list devices read, but keeps its
reports (until retention) and its estimates. The column is nullable and added without a
default, so the upgrade touches no row; collectors of the previous release ignore it (they
would still accept reports of an archived metric: upgrade them all before archiving one).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable ``archived_at`` column to ``metrics``."""
    op.add_column("metrics", sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Drop ``archived_at`` (archived metrics become active again: stop devices first)."""
    with op.batch_alter_table("metrics") as batch:
        batch.drop_column("archived_at")
