"""PostgreSQL: a cell's support vector packed in one ``numeric`` instead of a ``bigint[]``.

The cell upsert added a batch's counts to each touched row's ``bigint[]`` element by element
in SQL (``unnest ... WITH ORDINALITY``, one subquery per row): at 2,400 rows of 100 counts
per group (reports over 90 days, 40 cells) that was 0.4 s of the database's time per group
and held ingestion with 2 dimensions to 0.70 of the speed without. Packed in a ``numeric``
(count v in the decimal digits 13 v to 13 v + 12 from the right: :data:`.tables.COUNT_DIGITS`)
the addition is one numeric ``+``, done in C. A CHECK keeps each row's n below 10^13, so no
count (at most n) ever carries into the next. The upgrade converts every row in place
(a new column filled from the old, then swapped); the downgrade unpacks each value back into
an array as long as its highest nonzero count (categories past the end count 0, as before).
The table also gets ``fillfactor = 50``: every group rewrites each cell row it touches, and
with full pages no new version fit beside the old one, so no update was HOT (0 of 67,080
while loading 1 million reports over 7 days and 40 cells): the table grew to 51 MB for 280
live rows and a breakdown walked the dead versions until a VACUUM. With room on each page
97% of the updates are HOT and pruned in place (1.4 MB). SQLite stores packed bytes added by
a registered function and is left as it is, both ways.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_DIGITS = 13
_CHECK = "ck_cell_counts_n_packable"
_FILL = 50
_UNIT = f"power(10::numeric, {_DIGITS})"


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def _swap(definition: str, fill: str) -> None:
    """Give ``cell_counts.support`` the type ``definition``, each row's value from ``fill``."""
    op.execute(f"ALTER TABLE cell_counts ADD COLUMN support_new {definition}")
    op.execute(f"UPDATE cell_counts SET support_new = {fill}")
    op.execute("ALTER TABLE cell_counts DROP COLUMN support")
    op.execute("ALTER TABLE cell_counts RENAME COLUMN support_new TO support")
    op.execute("ALTER TABLE cell_counts ALTER COLUMN support SET NOT NULL")


def upgrade() -> None:
    """Pack every ``bigint[]`` into its ``numeric``; add the CHECK on n; leave room on each
    page for a row's next version."""
    if not _postgresql():
        return
    _swap(
        "numeric",
        f"(SELECT trunc(coalesce(sum(a::numeric * power(10::numeric, {_DIGITS} * (i - 1))), 0))"
        " FROM unnest(support) WITH ORDINALITY AS v(a, i))",
    )
    op.execute(f"ALTER TABLE cell_counts ADD CONSTRAINT {_CHECK} CHECK (n < {10**_DIGITS})")
    op.execute(f"ALTER TABLE cell_counts SET (fillfactor = {_FILL})")


def downgrade() -> None:
    """Unpack every ``numeric`` into a ``bigint[]`` (``{}`` for 0); drop the CHECK and the
    fillfactor."""
    if not _postgresql():
        return
    op.execute("ALTER TABLE cell_counts RESET (fillfactor)")
    op.execute(f"ALTER TABLE cell_counts DROP CONSTRAINT {_CHECK}")
    _swap(
        "bigint[]",
        f"ARRAY(SELECT mod(div(support, power(10::numeric, {_DIGITS} * i)), {_UNIT})::bigint"
        f" FROM generate_series(0, ceil(length(support::text) / {_DIGITS}.0)::int - 1) AS i"
        " WHERE support > 0 ORDER BY i)",
    )
