"""Metric descriptions: ``metrics.unit``, ``metrics.description`` and ``metrics.owner``.

What a metric is to people, beside its spec and outside its fingerprint (DESIGN.md, "Metric
descriptions"). The columns are nullable and added without a default, so the upgrade touches
no row and every registered metric is undescribed until registered again with them;
collectors of the previous release ignore them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_COLUMNS = (("unit", 16), ("description", 500), ("owner", 100))
"""The new columns and their lengths (as ``tables`` declares them at this revision)."""


def upgrade() -> None:
    """Add the three nullable columns to ``metrics``."""
    for name, length in _COLUMNS:
        op.add_column("metrics", sa.Column(name, sa.String(length), nullable=True))


def downgrade() -> None:
    """Drop them (every metric's unit, description and owner are lost; its spec stays)."""
    with op.batch_alter_table("metrics") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
