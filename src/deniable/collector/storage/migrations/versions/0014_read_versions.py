"""Read versions: a counter per metric (``read_versions``) that every write transaction
advances, so the collector's read cache keys an estimate by the version of what it read.

The ``""`` row (writes that name no metric) starts at a random number: a database dropped and
migrated again never repeats an earlier one's versions, so no cached answer of the old one can
pass for the new one's. Collectors of the previous release ignore the table (and cache nothing).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``read_versions`` (as ``tables`` declares it at this revision) with its ``""`` row."""
    table = op.create_table(
        "read_versions",
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("metric", name="pk_read_versions"),
    )
    op.bulk_insert(table, [{"metric": "", "version": secrets.randbits(48) << 8}])


def downgrade() -> None:
    """Drop it (nothing else reads it)."""
    op.drop_table("read_versions")
