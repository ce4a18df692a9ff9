"""Text metrics' reports not yet folded into their counts (``text_pending``): ingestion appends
a group's new text reports per (metric, period, cell) here, and a fold adds them into
``text_cell_counts`` later, many groups' reports to each 8 KB sketch row at once.

The table starts empty: every count stored before this revision is already in
``text_cell_counts``. Collectors of the previous release neither write nor read it, so a
downgrade first folds what is pending (the counts then hold every report), then drops it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``text_pending`` (as ``tables`` declares it at this revision)."""
    op.create_table(
        "text_pending",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), autoincrement=True),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("cell", sa.String(300), nullable=False),
        sa.Column("reports", sa.Integer, nullable=False),
        sa.Column("chunks", sa.LargeBinary, nullable=False),
        sa.Column("payloads", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_text_pending"),
    )
    op.create_index(
        "ix_text_pending_metric_period_cell", "text_pending", ["metric", "period", "cell"]
    )


def downgrade() -> None:
    """Fold every pending report into ``text_cell_counts``, then drop the table."""
    from deniable.collector.storage.textbacklog import fold_pending_rows

    fold_pending_rows(op.get_bind())
    op.drop_index("ix_text_pending_metric_period_cell", table_name="text_pending")
    op.drop_table("text_pending")
