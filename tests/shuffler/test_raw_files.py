"""The shuffler's files, read as raw bytes, link no report to its device after batching: no
pseudonym is left in the database, its WAL or its shared memory, and the order the envelope
ids lie in the file is no closer to their arrival order than chance (Kendall's tau within its
exact null distribution; a device's reports no likelier neighbours than chance). A store of
the first layout (a rowid table, plain updates, no checkpoint), filled the same way, fails
both: the checks can fail."""

from __future__ import annotations

import random
from pathlib import Path

from deniable.shuffler.store import Store
from testkit.shuffler_files import (
    DEVICES,
    KEYS,
    device_uploads,
    file_statistics,
    first_layout,
    kendall_null_limit,
    neighbour_limit,
    settle_first_layout,
    store_files,
)

PER_PART = 64
TAU_LIMIT = kendall_null_limit(DEVICES * len(KEYS))
NEIGHBOUR_LIMIT = neighbour_limit(DEVICES, len(KEYS))


def test_after_batching_the_files_hold_no_pseudonym_and_no_arrival_order(tmp_path: Path) -> None:
    arrived = device_uploads(11, DEVICES, KEYS)
    path = tmp_path / "shuffler.db"
    store = Store(path, rng=random.Random(3))
    for device, envelopes in arrived:
        store.receive(device, envelopes)
    assert file_statistics(path, arrived).pseudonyms_in  # waiting: the check sees them
    batches = [store.form_batch(key, DEVICES, DEVICES, PER_PART, 900_000) for key in KEYS]
    batched = file_statistics(path, arrived)
    assert not batched.pseudonyms_in
    assert abs(batched.tau) <= TAU_LIMIT and batched.neighbours <= NEIGHBOUR_LIMIT, batched
    for batch in batches:
        assert batch is not None
        for part in range(batch.parts):
            store.acknowledged(batch, part)
    forwarded = file_statistics(path, arrived)
    assert not forwarded.pseudonyms_in
    assert abs(forwarded.tau) <= TAU_LIMIT and forwarded.neighbours <= NEIGHBOUR_LIMIT, forwarded
    for name, raw in store_files(path).items():
        for _, envelopes in arrived:
            assert envelopes[0].sealed.encode() not in raw, f"a ciphertext is left in {name}"
    assert store.counts()["forwarded"] == DEVICES * len(KEYS)
    store.close()


def test_a_store_of_the_first_layout_fails_both_checks(tmp_path: Path) -> None:
    """The control: pseudonyms left in its WAL, and, once that is cleared, its rows in
    arrival order."""
    arrived = device_uploads(11, DEVICES, KEYS)
    path = tmp_path / "first.db"
    connection = first_layout(path, arrived)
    try:
        assert "first.db-wal" in file_statistics(path, arrived).pseudonyms_in
        settle_first_layout(connection)
        settled = file_statistics(path, arrived)
    finally:
        connection.close()
    assert not settled.pseudonyms_in
    assert settled.tau > TAU_LIMIT and settled.neighbours > NEIGHBOUR_LIMIT, settled
