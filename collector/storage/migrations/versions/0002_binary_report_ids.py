"""Report ids as 16 bytes (SQLite) or ``uuid`` (PostgreSQL), and a storage sequence number.

The unique index on the id is where a random UUID lands at a random place on every insert;
text ids made it 36 bytes wide per entry, binary ones 16, which makes SQLite ingestion about
a third faster. ``seq`` (SQLite's rowid) orders a period's reports for export pages and
retention batches through the (metric, period, seq) index, so neither ever sorts a period.

Both directions rewrite the reports table: on PostgreSQL under an exclusive lock, on SQLite
by copying it in chunks inside the migration's one transaction.

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


def _sqlite_rebuild(columns: list[Any], convert: Callable[[Any], Any]) -> None:
    """Copy ``reports`` into a new table of ``columns`` in rowid order, converting each id.

    The rowid goes into ``seq`` when the new table has that column.
    """
    op.create_table("reports_copy", *columns)
    names = [column.name for column in columns if isinstance(column, sa.Column)]
    keep_seq = names[0] == "seq"
    insert = f"INSERT INTO reports_copy ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
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
            insert,
            [((row[0],) if keep_seq else ()) + (convert(row[1]), *row[2:]) for row in rows],
        )
        last = rows[-1][0]
    op.execute("DROP TABLE reports")
    op.rename_table("reports_copy", "reports")


def _common_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("period", sa.String(10), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("received", sa.Date(), nullable=False),
    ]


def _analyze() -> None:
    """PostgreSQL: fresh planner statistics for the rewritten table.

    Without them the planner takes a large table for a small one and answers an export page
    by sorting the whole metric (350 ms at 1M reports) instead of reading the index in order
    (10 ms).
    """
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ANALYZE reports")


def upgrade() -> None:
    """Binary ids, unique; ``seq`` as the primary key; index (metric, period, seq)."""
    op.drop_index("ix_reports_metric_period", table_name="reports")
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(
            [
                sa.Column("seq", sa.Integer(), nullable=False),
                sa.Column("id", sa.LargeBinary(16), nullable=False),
                *_common_columns(),
                sa.PrimaryKeyConstraint("seq", name="pk_reports"),
                sa.UniqueConstraint("id", name="uq_reports_id"),
            ],
            _to_bytes,
        )
    else:
        op.execute("ALTER TABLE reports DROP CONSTRAINT pk_reports")
        op.execute("ALTER TABLE reports ALTER COLUMN id TYPE uuid USING id::uuid")
        op.execute("ALTER TABLE reports ADD COLUMN seq bigserial NOT NULL")
        op.execute("ALTER TABLE reports ADD CONSTRAINT pk_reports PRIMARY KEY (seq)")
        op.execute("ALTER TABLE reports ADD CONSTRAINT uq_reports_id UNIQUE (id)")
    op.create_index("ix_reports_metric_period_seq", "reports", ["metric", "period", "seq"])
    _analyze()


def downgrade() -> None:
    """Text ids as the primary key again; ``seq`` dropped; index (metric, period)."""
    op.drop_index("ix_reports_metric_period_seq", table_name="reports")
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(
            [
                sa.Column("id", sa.String(36), nullable=False),
                *_common_columns(),
                sa.PrimaryKeyConstraint("id", name="pk_reports"),
            ],
            _to_text,
        )
    else:
        op.execute("ALTER TABLE reports DROP CONSTRAINT uq_reports_id")
        op.execute("ALTER TABLE reports DROP CONSTRAINT pk_reports")
        op.execute("ALTER TABLE reports DROP COLUMN seq")
        op.execute("ALTER TABLE reports ALTER COLUMN id TYPE varchar(36) USING id::text")
        op.execute("ALTER TABLE reports ADD CONSTRAINT pk_reports PRIMARY KEY (id)")
    op.create_index("ix_reports_metric_period", "reports", ["metric", "period"])
    _analyze()
