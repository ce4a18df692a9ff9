"""SQLite statements fed one JSON text of rows and one blob of packed values: the row source
they select from, and where each row's bytes sit in the blob.

One JSON text and one blob per statement make a group's insert or upsert one call into SQLite,
which runs without the GIL, rather than one Python round trip per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import LargeBinary, Text, bindparam, func, literal_column


def json_each_rows() -> Any:
    """``json_each(:rows)``: one row per element of the JSON array of rows bound as ``rows``,
    with its ``value`` and its ``key`` (the element's index)."""
    return func.json_each(bindparam("rows", type_=Text)).table_valued("value", "key")


def json_items(each: Any, indexes: Iterable[int]) -> list[Any]:
    """``value->>i`` of each row of ``each`` (:func:`json_each_rows`) for every i of
    ``indexes``: the row's columns, in that order."""
    return [func.json_extract(each.c.value, literal_column(f"'$[{i}]'")) for i in indexes]


def blob_cut(each: Any, blob: str, at: int) -> Any:
    """Each row's bytes cut out of the blob bound as ``blob``: the row's items ``at`` and
    ``at + 1`` are their offset and length (:func:`blob_spans`)."""
    offset, length = json_items(each, (at, at + 1))
    return func.substr(bindparam(blob, type_=LargeBinary), offset + 1, length)


def blob_spans(blobs: Sequence[bytes]) -> list[tuple[int, int]]:
    """Each of ``blobs``' (offset, length) in their concatenation, which :func:`blob_cut`
    reads back."""
    offsets = np.cumsum([0, *map(len, blobs)]).tolist()
    return [(offsets[i], len(blob)) for i, blob in enumerate(blobs)]
