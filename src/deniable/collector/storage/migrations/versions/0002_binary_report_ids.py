"""Report ids as 16 bytes (SQLite) or ``uuid`` (PostgreSQL); export index (metric, period, id).

The unique index on the id is where a random UUID lands at a random place on every insert;
text ids made it 36 bytes wide per entry, binary ones 16 (bench/ingest.py on SQLite: about
10 % more reports/s, with the wider export index below included). Replacing the (metric, period) index by (metric, period, id) lets an
export page seek to its cursor instead of sorting the rest of its period.

Both directions rewrite the reports table once: on PostgreSQL with one ``ALTER TABLE`` under
an exclusive lock, on SQLite by copying it in chunks inside the migration's one transaction.
Collectors of the previous release cannot write the new table: stop them first (see
docs/operations.md, "Upgrades that rewrite a table").

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COPY_CHUNK = 10_000


def _to_bytes(report_id: str) -> bytes:
    return bytes.fromhex(report_id.replace("-", ""))


def _to_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _sqlite_rebuild(id_type: sa.types.TypeEngine[Any], convert: Callable[[Any], Any]) -> None:
    """Copy ``reports`` into a new table whose id column is ``id_type``, converting each id.

    SQLite 3.40 has no ``unhex()``, so the ids are converted in Python, a chunk at a time.
    """
    op.create_table(
        "reports_copy",
        sa.Column("id", id_type, nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("received", sa.Date(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_reports"),
    )
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.exec_driver_sql(
            "SELECT rowid, id, metric, period, payload, received FROM reports"
            " WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, COPY_CHUNK),
        ).fetchall()
        if not rows:
            break
        bind.exec_driver_sql(
            "INSERT INTO reports_copy (id, metric, period, payload, received)"
            " VALUES (?, ?, ?, ?, ?)",
            [(convert(row[1]), *row[2:]) for row in rows],
        )
        last = rows[-1][0]
    op.execute("DROP TABLE reports")
    op.rename_table("reports_copy", "reports")


def _analyze() -> None:
    """PostgreSQL: fresh planner statistics for the rewritten table.

    Without them the planner takes a large table for a small one and may answer an export
    page by sorting the whole metric instead of reading the index in order.
    """
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ANALYZE reports")


def upgrade() -> None:
    """Binary ids; index (metric, period, id)."""
    op.drop_index("ix_reports_metric_period", table_name="reports")
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(sa.LargeBinary(16), _to_bytes)
    else:
        op.execute("ALTER TABLE reports ALTER COLUMN id TYPE uuid USING id::uuid")
    op.create_index("ix_reports_metric_period_id", "reports", ["metric", "period", "id"])
    _analyze()


def downgrade() -> None:
    """Text ids; index (metric, period)."""
    op.drop_index("ix_reports_metric_period_id", table_name="reports")
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(sa.String(36), _to_text)
    else:
        op.execute("ALTER TABLE reports ALTER COLUMN id TYPE varchar(36) USING id::text")
    op.create_index("ix_reports_metric_period", "reports", ["metric", "period"])
    _analyze()
