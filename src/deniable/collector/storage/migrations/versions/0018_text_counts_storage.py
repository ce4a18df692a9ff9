"""PostgreSQL: a packed text sketch row is stored uncompressed out of line, and
``text_cell_counts`` leaves room on each page for a row's next version.

A sketch row's packed ``numeric`` (0013, 0017) is about 6.7 KB: ``numeric``'s default storage
(``main``) compressed it on every update, since every group rewrites each sketch row it
touches. ``SET STORAGE EXTERNAL`` keeps it out of line without compression: the backends' CPU
per text report at eps 1 fell from 109-114 to 68-69 us (``bench.ingest --text``'s load, 8 s
runs alternated). ``fillfactor = 50``, as 0013 gave ``cell_counts``: with full pages 41 of
9,032 updates were HOT in such a run, with room on each page all 11,944. Values already stored
keep their form until rewritten; reads see the same numbers either way. SQLite is left as it
is, both ways.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_FILL = 50


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    """Store the packed counts uncompressed out of line; leave half of each page free."""
    if not _postgresql():
        return
    op.execute("ALTER TABLE text_cell_counts ALTER COLUMN counts SET STORAGE EXTERNAL")
    op.execute(f"ALTER TABLE text_cell_counts SET (fillfactor = {_FILL})")


def downgrade() -> None:
    """Back to ``numeric``'s default storage (``main``) and full pages."""
    if not _postgresql():
        return
    op.execute("ALTER TABLE text_cell_counts RESET (fillfactor)")
    op.execute("ALTER TABLE text_cell_counts ALTER COLUMN counts SET STORAGE MAIN")
