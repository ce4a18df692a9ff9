"""Shuffled parts: how many sealed reports of each part of a released batch the collector
refused (``shuffled_parts``), so the accountant counts a batch at n less them.

Nothing else changes: collectors of the previous release ignore the table (and count a batch
at the n its shuffler stated), and batches recorded before it count no refusal.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``shuffled_parts`` (as ``tables`` declares it at this revision)."""
    op.create_table(
        "shuffled_parts",
        sa.Column("batch", sa.String(32), nullable=False),
        sa.Column("part", sa.Integer, nullable=False),
        sa.Column("refused", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("batch", "part", name="pk_shuffled_parts"),
    )


def downgrade() -> None:
    """Drop it (the refusals are lost: batches count at their stated n again)."""
    op.drop_table("shuffled_parts")
