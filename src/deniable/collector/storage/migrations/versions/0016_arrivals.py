"""Arrivals: when each metric's reports arrived, one row per metric and minute of the last hour
(``arrivals``), for the dashboard's last report received and reports in the last hour.

Reports stored before this revision left no time of arrival: the table starts empty, and a
metric shows no last report until its next one arrives. Collectors of the previous release
ignore the table.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``arrivals`` (as ``tables`` declares it at this revision)."""
    op.create_table(
        "arrivals",
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("slot", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("minute", sa.BigInteger, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("last_at", sa.Double, nullable=False),
        sa.PrimaryKeyConstraint("metric", "slot", name="pk_arrivals"),
    )


def downgrade() -> None:
    """Drop it (nothing else reads it)."""
    op.drop_table("arrivals")
