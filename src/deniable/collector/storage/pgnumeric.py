"""PostgreSQL: packed counts sent as a binary ``numeric[]`` parameter.

A packed count vector is one ``numeric`` of about 13,000 decimal digits
(:data:`.tables.COUNT_DIGITS`); sent as decimal text, the writer joins the digits of every
row into one text and the server parses them back. :class:`NumericArray` holds the values
already in ``numeric``'s binary format (:func:`.tables.binary_counts`), and its dumper frames
them as PostgreSQL's binary array: psycopg sends it as it is, whatever the statement's
placeholder.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

from .tables import binary_counts

_NUMERIC = psycopg.postgres.types["numeric"]


class NumericArray(list[bytes]):
    """``numeric`` values in their binary format, bound as one ``numeric[]`` parameter."""

    @classmethod
    def of_counts(cls, vectors: Sequence[np.ndarray]) -> NumericArray:
        """The packed ``numeric`` of each vector of counts."""
        return cls(binary_counts(vectors))


class _NumericArrayDumper(Dumper):
    """A one-dimensional array without nulls: its header, then each value's length and bytes."""

    format = Format.BINARY
    oid = _NUMERIC.array_oid

    def dump(self, obj: NumericArray) -> bytes:
        header = struct.pack(">iiIii", 1, 0, _NUMERIC.oid, len(obj), 1)
        return header + b"".join(struct.pack(">i", len(value)) + value for value in obj)


psycopg.adapters.register_dumper(NumericArray, _NumericArrayDumper)
