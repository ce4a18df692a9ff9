"""PostgreSQL: a cell's support vector (and a text cell's sketch row) packed in one ``numeric``
instead of a ``bigint[]``.

The cell upsert added a batch's counts to each touched row's ``bigint[]`` element by element
in SQL (``unnest ... WITH ORDINALITY``, one subquery per row): at 2,400 rows of 100 counts
per group (reports over 90 days, 40 cells) that was 0.4 s of the database's time per group
and held ingestion with 2 dimensions to 0.70 of the speed without. Packed in a ``numeric``
(count v in the decimal digits 13 v to 13 v + 12 from the right: :data:`.tables.COUNT_DIGITS`)
the addition is one numeric ``+``, done in C. A CHECK keeps each row's n below 10^13, so no
count (at most n) ever carries into the next. The upgrade converts every row in place
(a new column filled from the old, then swapped); the downgrade unpacks each value back into
an array as long as its highest nonzero count (categories past the end count 0, as before).
``text_cell_counts`` (0011) is converted the same way; its CHECK bounds the packed value
below 10^(13 x 1,025): its top count is the row's report tally, which bounds every other.
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
_FILL = 50
_TEXT_WIDTH = 1025
"""A text cell row's counts: a sketch row's 1,024 cells and its tally, the top one."""

_TABLES = {
    "cell_counts": ("support", "ck_cell_counts_n_packable", f"n < {10**_DIGITS}"),
    "text_cell_counts": (
        "counts",
        "ck_text_cell_counts_tally_packable",
        f"counts < power(10::numeric, {_DIGITS * _TEXT_WIDTH})",
    ),
}
"""Each packed column and the CHECK that keeps its counts from carrying."""

_PACK = (
    f"(SELECT trunc(coalesce(sum(a::numeric * power(10::numeric, {_DIGITS} * (i - 1))), 0))"
    " FROM unnest({0}) WITH ORDINALITY AS v(a, i))"
)
_UNPACK = (
    f"ARRAY(SELECT mod(div({{0}}, power(10::numeric, {_DIGITS} * i)), power(10::numeric, {_DIGITS}))::bigint"
    f" FROM generate_series(0, ceil(length({{0}}::text) / {_DIGITS}.0)::int - 1) AS i"
    " WHERE {0} > 0 ORDER BY i)"
)


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def _swap(table: str, column: str, definition: str, fill: str) -> None:
    """Give ``table.column`` the type ``definition``, each row's value from ``fill`` (an
    expression of the old value, written ``{0}``)."""
    op.execute(f"ALTER TABLE {table} ADD COLUMN {column}_new {definition}")
    op.execute(f"UPDATE {table} SET {column}_new = {fill.format(column)}")
    op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    op.execute(f"ALTER TABLE {table} RENAME COLUMN {column}_new TO {column}")
    op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET NOT NULL")


def upgrade() -> None:
    """Pack every ``bigint[]`` into its ``numeric``; add the CHECKs; leave room on each
    ``cell_counts`` page for a row's next version."""
    if not _postgresql():
        return
    for table, (column, check, condition) in _TABLES.items():
        _swap(table, column, "numeric", _PACK)
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {check} CHECK ({condition})")
    op.execute(f"ALTER TABLE cell_counts SET (fillfactor = {_FILL})")


def downgrade() -> None:
    """Unpack every ``numeric`` into a ``bigint[]`` (``{}`` for 0); drop the CHECKs and the
    fillfactor."""
    if not _postgresql():
        return
    op.execute("ALTER TABLE cell_counts RESET (fillfactor)")
    for table, (column, check, _) in _TABLES.items():
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {check}")
        _swap(table, column, "bigint[]", _UNPACK)
