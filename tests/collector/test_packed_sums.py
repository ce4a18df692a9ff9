"""SQLite adds a group's packed counts to the stored ones in Python, read in one statement
(:mod:`deniable.collector.storage.packedsums`): every sum must be the stored vector plus the
new one, category by category (a shorter one read as zeros), for keys stored or not, in any
order, on both packed tables."""

from __future__ import annotations

import numpy as np

from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.packedsums import plus_stored
from deniable.collector.storage.tables import (
    cell_counts,
    pack_counts,
    text_cell_counts,
    unpack_counts,
)
from testkit import DatabaseFactory


def _padded_sum(first: np.ndarray, second: np.ndarray) -> list[int]:
    total = np.zeros(max(len(first), len(second)), dtype=np.int64)
    total[: len(first)] += first
    total[: len(second)] += second
    return total.tolist()


def test_each_sum_is_the_stored_vector_plus_the_new_one(databases: DatabaseFactory) -> None:
    url = databases.new("sqlite")
    migrate(url)
    database = open_database(url)
    rng = np.random.default_rng(27)
    keys = [("m", f"2026-11-{day:02d}", cell) for day in range(1, 9) for cell in ("ios", "web")]
    stored = {key: rng.integers(0, 10**12, int(rng.integers(0, 9))) for key in keys[::2]}
    new = {key: rng.integers(0, 10**6, int(rng.integers(0, 9))) for key in keys}
    try:
        with database.writing() as connection:
            connection.execute(
                cell_counts.insert(),
                [
                    {
                        "metric": m,
                        "period": p,
                        "cell": c,
                        "n": 1,
                        "total": 0.0,
                        "total_squares": 0.0,
                        "support": counts,
                    }
                    for (m, p, c), counts in stored.items()
                ],
            )
            order = [keys[i] for i in rng.permutation(len(keys))]
            sums = plus_stored(
                connection, cell_counts, "support", order, [pack_counts(new[k]) for k in order]
            )
    finally:
        database.dispose()
    empty = np.zeros(0, dtype=np.int64)
    assert [unpack_counts(blob).tolist() for blob in sums] == [
        _padded_sum(stored.get(key, empty), new[key]) for key in order
    ]
    assert any(len(stored[key]) != len(new[key]) for key in stored)


def test_text_cell_counts_are_keyed_by_their_chunk(databases: DatabaseFactory) -> None:
    url = databases.new("sqlite")
    migrate(url)
    database = open_database(url)
    try:
        with database.writing() as connection:
            connection.execute(
                text_cell_counts.insert(),
                [
                    {
                        "metric": "t",
                        "period": "2026-11",
                        "cell": "ios",
                        "chunk": 3,
                        "counts": [5, 1],
                    },
                    {"metric": "t", "period": "2026-11", "cell": "ios", "chunk": 4, "counts": [9]},
                ],
            )
            keys = [("t", "2026-11", "ios", 4), ("t", "2026-11", "ios", 5)]
            sums = plus_stored(
                connection,
                text_cell_counts,
                "counts",
                keys,
                [pack_counts(np.array([1, 1])), pack_counts(np.array([2]))],
            )
    finally:
        database.dispose()
    assert [unpack_counts(blob).tolist() for blob in sums] == [[10, 1], [2]]
