"""Counted parts: a batch is accounted at the distinct reports the collector received, not at
the size its shuffler stated.

``shuffled_parts`` gets ``counted`` (the distinct reports a part stored anew; 0 for the rows of
before, which recorded parts with refusals only) and ``shuffled_batches`` gets ``parts`` (how
many parts the shuffler stated; null for the batches of before). Every part now writes a row,
and a batch is complete once each of its parts has one. A batch recorded before this revision
cannot show what it held: it is left incomplete and counts no device (its reports are at their
local eps in the account), which is the truth the collector can vouch for.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``shuffled_parts.counted`` and ``shuffled_batches.parts`` (as ``tables`` declares)."""
    op.add_column(
        "shuffled_parts", sa.Column("counted", sa.BigInteger, nullable=False, server_default="0")
    )
    op.add_column("shuffled_batches", sa.Column("parts", sa.Integer, nullable=True))


def downgrade() -> None:
    """Drop them (batches count at their stated n less refusals again; the rows of parts
    without refusals stay, counting 0 refused)."""
    with op.batch_alter_table("shuffled_batches") as table:
        table.drop_column("parts")
    with op.batch_alter_table("shuffled_parts") as table:
        table.drop_column("counted")
