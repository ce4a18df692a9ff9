"""Reports keyed by (metric, period, id): one index instead of two.

Before, the primary key was the id alone, and a second index (metric, period, id) served
exports. A random id lands at a random place of an index over every stored report, so past
the page cache each new report cost a page write in each of the two indexes, and ingestion
slowed as the store grew (bench/ingest.py --big on SQLite: 46,000 reports/s fresh, 9,000 at
10 million). Keyed by (metric, period, id), new reports land in their period's part of the
one index; a resent report repeats all three, so exactly-once is unchanged. On SQLite the
table becomes ``WITHOUT ROWID``: the key's B-tree holds the rows.

Both directions rewrite the table's index (PostgreSQL: build the new unique index, swap the
primary key, drop the old index; SQLite: copy the table in key order), in the migration's one
transaction. Collectors of the previous release write ``ON CONFLICT (id)``, which the new
table has no constraint for: stop them first (docs/operations.md, "Upgrades that rewrite a
table"). The downgrade fails if two stored reports share an id (possible only since this
revision, by a client reusing an id in another period).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_COLUMNS = "id, metric, period, payload, received"


def _sqlite_copy(key: sa.PrimaryKeyConstraint, without_rowid: bool, order: str) -> None:
    """Copy ``reports`` into a table with primary ``key``, in ``order``, and swap them."""
    op.create_table(
        "reports_copy",
        sa.Column("id", sa.LargeBinary(16), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("received", sa.Date(), nullable=False),
        key,
        sqlite_with_rowid=not without_rowid,
    )
    op.execute(
        f"INSERT INTO reports_copy ({_COLUMNS}) SELECT {_COLUMNS} FROM reports ORDER BY {order}"
    )
    op.execute("DROP TABLE reports")
    op.rename_table("reports_copy", "reports")


def _analyze() -> None:
    """PostgreSQL: fresh planner statistics for the re-indexed table."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ANALYZE reports")


def upgrade() -> None:
    """Primary key (metric, period, id); drop the id key and the export index."""
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_reports_metric_period_id", table_name="reports")
        _sqlite_copy(
            sa.PrimaryKeyConstraint("metric", "period", "id", name="pk_reports"),
            without_rowid=True,
            order="metric, period, id",
        )
    else:
        op.execute("CREATE UNIQUE INDEX reports_key ON reports (metric, period, id)")
        op.execute("ALTER TABLE reports DROP CONSTRAINT pk_reports")
        op.execute(
            "ALTER TABLE reports ADD CONSTRAINT pk_reports PRIMARY KEY USING INDEX reports_key"
        )
        op.drop_index("ix_reports_metric_period_id", table_name="reports")
    _analyze()


def downgrade() -> None:
    """Primary key (id) and the export index (metric, period, id) again."""
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_copy(
            sa.PrimaryKeyConstraint("id", name="pk_reports"), without_rowid=False, order="id"
        )
    else:
        op.execute("ALTER TABLE reports DROP CONSTRAINT pk_reports")
        op.execute("ALTER TABLE reports ADD CONSTRAINT pk_reports PRIMARY KEY (id)")
    op.create_index("ix_reports_metric_period_id", "reports", ["metric", "period", "id"])
    _analyze()
