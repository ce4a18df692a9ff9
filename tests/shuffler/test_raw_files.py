"""The shuffler's files, read as raw bytes, link no report to its device after batching: no
pseudonym is left in the database, its WAL or its shared memory, and the order the envelope
ids lie in the file is no closer to their arrival order than chance (Kendall's tau within its
exact null distribution; a device's reports no likelier neighbours than chance). A store of
the first layout (a rowid table, plain deletes, no checkpoint), filled the same way, fails
both: the tests can fail."""

from __future__ import annotations

import base64
import random
import sqlite3
from pathlib import Path

import pytest
from deniable.shuffler.store import BatchKey, Incoming, Store
from scipy import stats

from testkit.row_order import Z_LIMIT, neighbour_moments, same_device_neighbours
from testkit.shuffler_files import kendall_null_limit, physical_order, store_files

DEVICES = 300
KEYS = [BatchKey(f"metric_{i}", "krr", 1.0, f"{i:016x}") for i in range(3)]
PER_PART = 64


def uploads(seed: int) -> list[tuple[str, list[Incoming]]]:
    """Each device's one upload, in arrival order: one sealed report per key (seeded ids,
    pseudonyms and ciphertexts)."""
    rng = random.Random(seed)
    return [
        (
            f"{rng.getrandbits(128):032x}",
            [
                Incoming(
                    f"{rng.getrandbits(128):032x}",
                    key,
                    "fedcba9876543210",
                    base64.b64encode(rng.randbytes(240)).decode(),
                )
                for key in KEYS
            ],
        )
        for _ in range(DEVICES)
    ]


def check_files(path: Path, arrived: list[tuple[str, list[Incoming]]]) -> tuple[float, int]:
    """Assert no pseudonym is in any of the store's files; (Kendall's tau between the physical
    and the arrival order of the envelope ids, same-device neighbours in the physical order)."""
    files = store_files(path)
    for device, _ in arrived:
        for name, raw in files.items():
            assert device.encode() not in raw, f"a pseudonym is left in {name}"
            assert device[:12].encode() not in raw, f"part of a pseudonym is left in {name}"
    arrival = [envelope.id for _, envelopes in arrived for envelope in envelopes]
    device_of = {e.id: d for d, (_, envelopes) in enumerate(arrived) for e in envelopes}
    raw = b"".join(files.values())
    order = physical_order(raw, arrival)
    rank = {envelope: place for place, envelope in enumerate(order)}
    tau = stats.kendalltau(range(len(arrival)), [rank[e] for e in arrival]).statistic
    return tau, same_device_neighbours(order, device_of)


def neighbour_limit() -> float:
    mean, variance = neighbour_moments(DEVICES, len(KEYS))
    return mean + Z_LIMIT * variance**0.5


def test_after_batching_the_files_hold_no_pseudonym_and_no_arrival_order(tmp_path: Path) -> None:
    arrived = uploads(11)
    path = tmp_path / "shuffler.db"
    store = Store(path, rng=random.Random(3))
    for device, envelopes in arrived:
        store.receive(device, envelopes)
    waiting = store_files(path)
    assert any(arrived[0][0].encode() in raw for raw in waiting.values())  # the check sees one
    batches = [store.form_batch(key, DEVICES, DEVICES, PER_PART, 900_000) for key in KEYS]
    limit = kendall_null_limit(DEVICES * len(KEYS))
    tau, neighbours = check_files(path, arrived)  # batched, not yet forwarded
    assert abs(tau) <= limit and neighbours <= neighbour_limit(), (tau, limit, neighbours)
    for batch in batches:
        assert batch is not None
        for part in range(batch.parts):
            store.acknowledged(batch, part)
    tau, neighbours = check_files(path, arrived)  # forwarded: only ids left
    assert abs(tau) <= limit and neighbours <= neighbour_limit(), (tau, limit, neighbours)
    for name, raw in store_files(path).items():
        for _, envelopes in arrived:
            assert envelopes[0].sealed.encode() not in raw, f"a ciphertext is left in {name}"
    assert store.counts()["forwarded"] == DEVICES * len(KEYS)
    store.close()


def test_a_store_of_the_first_layout_fails_both_checks(tmp_path: Path) -> None:
    """The control: a rowid table in arrival order whose batching clears the pseudonym with a
    plain UPDATE leaves the pseudonyms in its WAL and its rows in arrival order."""
    arrived = uploads(11)
    path = tmp_path / "first.db"
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(
        "CREATE TABLE envelopes (id TEXT PRIMARY KEY, batch_key TEXT, device TEXT, key TEXT,"
        " sealed TEXT, batch TEXT, position INTEGER)"
    )
    for device, envelopes in arrived:
        connection.executemany(
            "INSERT INTO envelopes VALUES (?, ?, ?, ?, ?, NULL, NULL)",
            [(e.id, e.key.text(), device, e.sealing_key, e.sealed) for e in envelopes],
        )
    connection.execute("UPDATE envelopes SET device = NULL, batch = 'b'")
    with pytest.raises(AssertionError, match="pseudonym is left"):
        check_files(path, arrived)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA secure_delete=ON")
    connection.execute("VACUUM")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tau, neighbours = check_files(path, arrived)
    assert tau > kendall_null_limit(DEVICES * len(KEYS)) and neighbours > neighbour_limit()
    connection.close()
