"""PostgreSQL packs a cell's support vector into one ``numeric`` (migration 0013): the text
encoding round-trips every vector a row can hold, migration 0013 converts stored vectors
(cell support and text sketch rows) both ways without loss, and the CHECK on n refuses a row that could carry one count into the
next."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import sqlalchemy.exc
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sqlalchemy import text

from deniable.client import MetricSpec
from deniable.collector import migrate
from deniable.collector.storage.pgnumeric import NumericArray
from deniable.collector.storage.tables import (
    COUNT_LIMIT,
    binary_counts,
    counts_of_decimal,
    decimal_counts,
)
from testkit import TEST_NOW, DatabaseFactory
from tests.collector.test_dimension_cells import PLATFORMS, _cells, _execute, _register
from tests.collector.test_migrations import _downgrade, _rows

PERIOD = TEST_NOW.date().isoformat()


def _padded(counts: np.ndarray, width: int) -> list[int]:
    out = np.zeros(width, dtype=np.int64)
    out[: len(counts)] = counts
    return out.tolist()


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        arrays(np.int64, st.integers(0, 40), elements=st.integers(0, COUNT_LIMIT - 1)),
        min_size=1,
        max_size=6,
    )
)
def test_decimal_counts_round_trip(vectors: list[np.ndarray]) -> None:
    for vector, packed in zip(vectors, decimal_counts(vectors), strict=True):
        back = counts_of_decimal(str(int(packed)))
        width = max(len(vector), len(back))
        assert _padded(back, width) == _padded(vector, width)


def test_decimal_counts_write_small_and_large_counts_digit_for_digit() -> None:
    """Counts below 10,000 (a group's increments, written by one lookup) and above (written
    four digits at a time) both give each count's 13 digits, the first count rightmost."""
    small, large = np.array([0, 1, 9_999, 42]), np.array([10_000, 0, COUNT_LIMIT - 1, 7])
    for vector, packed in zip((small, large), decimal_counts([small, large]), strict=True):
        assert packed == "".join(f"{count:013d}" for count in reversed(vector.tolist()))


def test_decimal_counts_add_as_vectors_when_added_as_numbers() -> None:
    first, second = np.array([3, 0, COUNT_LIMIT // 2]), np.array([COUNT_LIMIT // 2 - 1, 7])
    a, b = decimal_counts([first, second])
    assert counts_of_decimal(str(int(a) + int(b))).tolist() == [
        3 + COUNT_LIMIT // 2 - 1,
        7,
        COUNT_LIMIT // 2,
    ]


def _numeric_value(packed: bytes) -> int:
    """The integer a binary ``numeric`` (no fraction, not negative) holds."""
    ndigits, weight, sign, scale = struct.unpack(">hhHh", packed[:8])
    assert (sign, scale, len(packed)) == (0, 0, 8 + 2 * ndigits)
    digits = struct.unpack(f">{ndigits}h", packed[8:])
    assert all(0 <= digit < 10_000 for digit in digits)
    return sum(digit * 10_000 ** (weight - i) for i, digit in enumerate(digits))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.one_of(
            arrays(np.int64, st.integers(0, 40), elements=st.integers(0, COUNT_LIMIT - 1)),
            arrays(np.int64, st.integers(0, 40), elements=st.integers(0, 9_999)),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_binary_counts_hold_the_decimal_texts_value(vectors: list[np.ndarray]) -> None:
    for packed, decimal in zip(binary_counts(vectors), decimal_counts(vectors), strict=True):
        assert _numeric_value(packed) == int(decimal)


def test_binary_counts_are_the_numerics_the_decimal_text_writes(databases: DatabaseFactory) -> None:
    """Sent as one binary ``numeric[]`` (:mod:`.pgnumeric`), every vector reads back from
    PostgreSQL as the decimal text :func:`decimal_counts` writes (leading zeros aside): empty,
    zeros, small and large counts, and a text sketch row's 1,025."""
    rng = np.random.default_rng(7)
    vectors = [
        np.zeros(0, np.int64),
        np.zeros(3, np.int64),
        np.array([0, 1, 9_999, 42]),
        np.array([10_000, 0, COUNT_LIMIT - 1, 7]),
        rng.integers(0, COUNT_LIMIT, 1_025),
        rng.integers(0, 10_000, 1_025),
    ]
    url = databases.new("postgresql")
    query = text(
        "SELECT x::text FROM unnest(CAST(:values AS numeric[])) WITH ORDINALITY AS u(x, i) ORDER BY i"
    )
    found = _rows(url, query.bindparams(values=NumericArray.of_counts(vectors)))
    assert [row[0] for row in found] == [
        packed.lstrip("0") or "0" for packed in decimal_counts(vectors)
    ]


def test_migration_0013_converts_the_packed_vectors_both_ways(databases: DatabaseFactory) -> None:
    url = databases.new("postgresql")
    migrate(url, "0012")
    split = MetricSpec.categorical(
        "split", ["a", "b", "c"], epsilon=1.0, mechanism="oue", dimensions=PLATFORMS
    )
    mean = MetricSpec.numeric("mean", lower=0.0, upper=1.0, epsilon=1.0, dimensions=PLATFORMS)
    _register(url, split, mean)
    big = COUNT_LIMIT - 1
    rows = [
        ("split", "ios", big, f"{{{big},0,{big - 1}}}"),
        ("split", "android", 5, "{0,5}"),
        ("mean", "ios", 2, "{}"),
    ]
    _execute(
        url,
        "INSERT INTO cell_counts (metric, period, cell, n, total, total_squares, support)"
        " VALUES (:m, :p, :c, :n, 0, 0, CAST(:s AS bigint[]))",
        [{"m": m, "p": PERIOD, "c": c, "n": n, "s": s} for m, c, n, s in rows],
    )
    tally = [0] * 1024 + [big]
    tally[3] = big - 2
    _execute(
        url,
        "INSERT INTO text_cell_counts (metric, period, cell, chunk, counts)"
        " VALUES ('words', :p, 'ios', 5, CAST(:s AS bigint[]))",
        [{"p": PERIOD, "s": "{" + ",".join(map(str, tally)) + "}"}],
    )
    sketch_rows = text("SELECT counts FROM text_cell_counts")
    before = _rows(url, text("SELECT metric, cell, support FROM cell_counts ORDER BY metric, cell"))
    before_text = _rows(url, sketch_rows)
    migrate(url)
    assert _cells(url, split, [PERIOD]) == {
        "ios": ([big], [[big, 0, big - 1]]),
        "android": ([5], [[0, 5, 0]]),
    }
    assert _rows(url, text("SELECT support::text FROM cell_counts WHERE metric = 'mean'")) == [
        ("0",)
    ]
    (packed,) = _rows(url, text("SELECT counts::text FROM text_cell_counts"))[0]
    assert counts_of_decimal(packed).tolist() == tally
    options = text("SELECT reloptions FROM pg_class WHERE relname = 'cell_counts'")
    assert _rows(url, options) == [(["fillfactor=50"],)]
    _downgrade(url, "0012")
    assert _rows(url, options) == [(None,)]
    assert _rows(url, sketch_rows) == before_text
    assert _rows(
        url, text("SELECT metric, cell, support FROM cell_counts ORDER BY metric, cell")
    ) == (before)


def test_postgresql_refuses_a_cell_row_whose_counts_could_carry(databases: DatabaseFactory):
    url = databases.new("postgresql")
    migrate(url)
    with pytest.raises(sqlalchemy.exc.IntegrityError, match="ck_cell_counts_n_packable"):
        _execute(
            url,
            "INSERT INTO cell_counts (metric, period, cell, n, total, total_squares, support)"
            " VALUES ('m', :p, 'ios', :n, 0, 0, 0)",
            [{"p": PERIOD, "n": COUNT_LIMIT}],
        )
    with pytest.raises(sqlalchemy.exc.IntegrityError, match="ck_text_cell_counts_tally_packable"):
        _execute(
            url,
            "INSERT INTO text_cell_counts (metric, period, cell, chunk, counts)"
            " VALUES ('m', :p, 'ios', 0, power(10::numeric, :digits))",
            [{"p": PERIOD, "digits": 13 * 1025}],
        )
