"""SQLite: new packed count vectors plus the ones stored under the same keys, read in one
statement, so an upsert can write the sums without calling Python once per row.

SQLite cannot add two packed vectors itself. Calling ``deniable_add_counts``
(:func:`.tables.add_packed`) inside the upsert would, but SQLite calls it once per updated
row, and each call must take the GIL back from the request threads: with dimensions a group
updates hundreds of rows, and those waits cost a tenth of ingestion's throughput. Here every stored vector of a group comes back
concatenated in one row (``group_concat`` keeps a blob's bytes), with each one's place and
length, and the additions are done here in one pass. The writer holds SQLite's only write
lock (``BEGIN IMMEDIATE``) from this read to the upsert, so nothing changes in between.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    LargeBinary,
    Table,
    Text,
    and_,
    bindparam,
    cast,
    func,
    literal,
    literal_column,
    select,
)

from .tables import add_packed


@functools.cache
def _stored_query(table: Table, column: str) -> Any:
    """The one-row read of ``table``'s packed ``column`` at the keys of a JSON array of
    primary keys: every stored vector concatenated, and a JSON array of (key index, length)."""
    each = func.json_each(bindparam("keys", type_=Text)).table_valued("value", "key")
    on = and_(
        *(
            key == func.json_extract(each.c.value, literal_column(f"'$[{i}]'"))
            for i, key in enumerate(table.primary_key.columns)
        )
    )
    stored = func.coalesce(table.c[column], literal_column("x''"))
    return select(
        cast(func.group_concat(stored, literal("")), LargeBinary),
        func.json_group_array(func.json_array(each.c.key, func.length(stored))),
    ).select_from(each.join(table, on))


def plus_stored(
    connection: Connection,
    table: Table,
    column: str,
    keys: Sequence[Sequence[Any]],
    packed: list[bytes],
) -> list[bytes]:
    """Each of ``packed`` (the new counts at ``keys``, primary keys of ``table``) plus the
    vector stored in ``column`` under its key (itself where no row is stored yet)."""
    if not keys:
        return packed
    blob, places = connection.execute(
        _stored_query(table, column), {"keys": json.dumps(keys, separators=(",", ":"))}
    ).one()
    sums = list(packed)
    offset = 0
    for index, length in json.loads(places):
        sums[index] = add_packed(blob[offset : offset + length], packed[index])
        offset += length
    return sums
