"""PostgreSQL: raw reports in a table partitioned by period (``PARTITION BY LIST (period)``).

The upgrade creates the partitioned table beside ``reports`` with one partition per stored
period label, copies every report into it (in key order, one ``INSERT ... SELECT``), drops
the old table and gives the new one its name and key (``pk_reports`` on (metric, period,
id), so ``ON CONFLICT`` exactly-once is unchanged). It runs in the migration's one
transaction, which holds the old table exclusively while it copies: collectors wait (their
uploads are retried by the SDK), so stop them or expect a pause of about the copy time
(docs/operations.md, "Partitioning an existing database": 19 s for 1 million reports on a
shared 2-core machine, bench/partitioning.py --migrate). The downgrade copies back into one unpartitioned table.
SQLite has no partitions and is left as it is, both ways.

Revision ID: 0010
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

from deniable.collector.storage.partitions import partition_name

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_COLUMNS = "id, metric, period, payload, received, cell"
_DEFINITION = (
    "id uuid NOT NULL, metric varchar(64) NOT NULL, period varchar(10) NOT NULL,"
    " payload text NOT NULL, received date NOT NULL, cell varchar(300) DEFAULT '' NOT NULL"
)


def _swap(new: str) -> None:
    """Copy ``reports`` into ``new`` in key order, drop it and rename ``new`` to it."""
    op.execute(
        f"INSERT INTO {new} ({_COLUMNS}) SELECT {_COLUMNS} FROM reports ORDER BY metric, period, id"
    )
    op.execute("DROP TABLE reports")
    op.execute(f"ALTER TABLE {new} RENAME TO reports")
    op.execute(f"ALTER TABLE reports RENAME CONSTRAINT pk_{new} TO pk_reports")
    op.execute("ANALYZE reports")


def upgrade() -> None:
    """Partition ``reports`` by period (PostgreSQL only)."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute("LOCK TABLE reports IN ACCESS EXCLUSIVE MODE")
    op.execute(
        f"CREATE TABLE reports_partitioned ({_DEFINITION},"
        " CONSTRAINT pk_reports_partitioned PRIMARY KEY (metric, period, id))"
        " PARTITION BY LIST (period)"
    )
    labels = [row[0] for row in bind.exec_driver_sql("SELECT DISTINCT period FROM reports")]
    for label in sorted(labels):
        op.execute(
            f'CREATE TABLE "{partition_name(label)}" PARTITION OF reports_partitioned'
            f" FOR VALUES IN ('{label}')"
        )
    _swap("reports_partitioned")


def downgrade() -> None:
    """One unpartitioned ``reports`` again (PostgreSQL only), every report kept."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute(
        f"CREATE TABLE reports_plain ({_DEFINITION},"
        " CONSTRAINT pk_reports_plain PRIMARY KEY (metric, period, id))"
    )
    _swap("reports_plain")
