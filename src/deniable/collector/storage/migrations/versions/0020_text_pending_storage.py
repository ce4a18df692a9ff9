"""PostgreSQL: ``text_pending``'s bytes are stored out of line without compression.

A pending row holds a group's text reports for one (metric, period, cell), often tens of
kilobytes of base64 text, so ``bytea``'s default storage (``extended``) compressed every one as
it was appended and decompressed it when a fold or a read took it. At eps 4 most bits are zero
and pglz found plenty to compress: the backends' CPU per stored text report was 19.8 us against
8.2 with ``SET STORAGE EXTERNAL`` (at eps 1 the bits are near random and pglz gave up early:
11.3 against 8.6), 100,000 reports stored in process (docs/performance.md, 2026-12-06, third).
Values already stored keep their form until a fold deletes them; reads see the same bytes
either way. SQLite is left as it is, both ways.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_COLUMNS = ("chunks", "payloads")


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    """Store the pending bytes uncompressed out of line."""
    if not _postgresql():
        return
    for column in _COLUMNS:
        op.execute(f"ALTER TABLE text_pending ALTER COLUMN {column} SET STORAGE EXTERNAL")


def downgrade() -> None:
    """Back to ``bytea``'s default storage (``extended``)."""
    if not _postgresql():
        return
    for column in _COLUMNS:
        op.execute(f"ALTER TABLE text_pending ALTER COLUMN {column} SET STORAGE EXTENDED")
