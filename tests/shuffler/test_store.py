"""The shuffler's store: durable states, one report per device per batch, no batch below
min_batch, and a forwarded order independent of the arrival order."""

from __future__ import annotations

import json
import random
import secrets
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from deniable.shuffler.store import BatchKey, Incoming, Store

KEY = BatchKey("browser", "krr", 1.0, "0123456789abcdef", "fedcba9876543210")


def incoming(label: str, key: BatchKey = KEY, envelope: str | None = None) -> Incoming:
    """An envelope whose ciphertext is ``label`` (so its forwarded place can be read back),
    with the id ``envelope`` (random if None)."""
    return Incoming(envelope or secrets.token_hex(16), key, key.sealing_key, label)


def test_a_resent_report_is_stored_once_in_every_state(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    first = incoming("a")
    assert store.receive("d" * 32, [first, first]) == (1, 1)
    assert store.receive("d" * 32, [first]) == (0, 1)
    others = [incoming(str(i)) for i in range(2)]
    for i, envelope in enumerate(others):
        store.receive(f"{i:032x}", [envelope])
    batch = store.form_batch(KEY, 3, 10, 1000, 900_000)
    assert batch is not None and batch.n == 3
    assert store.receive("d" * 32, [first]) == (0, 1)
    store.acknowledged(batch, 0)
    assert store.receive("e" * 32, [first]) == (0, 1)
    assert store.counts() == {"received": 0, "batched": 0, "forwarded": 3, "batches": 1}


def test_a_batch_takes_one_report_per_device_and_waits_for_min_batch(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.receive("a" * 32, [incoming(f"a{i}") for i in range(5)])
    store.receive("b" * 32, [incoming(f"b{i}") for i in range(5)])
    store.receive(
        "c" * 32,
        [incoming("c0"), incoming("c1", BatchKey("other", "krr", 1.0, "0" * 16, "f" * 16))],
    )
    assert store.waiting_keys(3) == [KEY]
    assert store.form_batch(KEY, 4, 100, 1000, 900_000) is None
    batch = store.form_batch(KEY, 3, 100, 1000, 900_000)
    assert batch is not None and batch.n == 3
    members = [sealed for _, sealed in store.part(batch, 0)]
    assert sorted(label[0] for label in members) == ["a", "b", "c"]
    assert store.form_batch(KEY, 3, 100, 1000, 900_000) is None  # c has nothing left
    assert store.waiting_keys(3) == []
    raw = sqlite3.connect(tmp_path / "s.db")
    devices = raw.execute("SELECT device FROM envelopes WHERE batch IS NOT NULL").fetchall()
    assert devices == [(None,)] * 3  # a batched report is linked to no device any more
    columns = {row[1] for row in raw.execute("PRAGMA table_info(envelopes)")}
    assert columns == {"id", "batch_key", "device", "key", "sealed", "expires", "batch", "position"}


def test_a_batch_is_forwarded_in_parts_that_resume_after_the_last_acknowledged(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "s.db")
    for i in range(25):
        store.receive(f"{i:032x}", [incoming(f"{i:04d}")])
    batch = store.form_batch(KEY, 20, 100, 10, 900_000)
    assert batch is not None and (batch.n, batch.parts, batch.per_part) == (25, 3, 10)
    parts = [store.part(batch, p) for p in range(3)]
    assert [len(p) for p in parts] == [10, 10, 5]
    store.acknowledged(batch, 0)
    reopened = Store(tmp_path / "s.db")
    (left,) = reopened.unfinished()
    assert left.forwarded == 1
    assert reopened.part(left, 1) == parts[1]
    assert reopened.counts()["forwarded"] == 10


def test_max_batch_caps_a_batch_and_the_rest_wait(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    for i in range(30):
        store.receive(f"{i:032x}", [incoming(str(i))])
    batch = store.form_batch(KEY, 10, 12, 1000, 900_000)
    assert batch is not None and batch.n == 12
    assert store.counts()["received"] == 18


def contingency(store: Store, batches: int, size: int, *, shuffle: bool) -> np.ndarray:
    """counts[r, p]: how often the report that arrived r-th left at place p.

    The device ids are drawn from a seeded generator too: the store reads a batch's waiting
    reports in device order before shuffling them, so random ids would make the outcome
    differ from run to run."""
    ids = random.Random(size * batches)
    counts = np.zeros((size, size), dtype=np.int64)
    for _ in range(batches):
        for rank in range(size):
            device = f"{ids.getrandbits(128):032x}"
            store.receive(device, [incoming(str(rank), envelope=f"{ids.getrandbits(128):032x}")])
        batch = store.form_batch(KEY, size, size, 1000, 900_000)
        assert batch is not None
        order = [int(sealed) for _, sealed in store.part(batch, 0)]
        if not shuffle:
            order = sorted(order)
        for place, rank in enumerate(order):
            counts[rank, place] += 1
        store.acknowledged(batch, 0)
    return counts


ALPHA = 1e-4
"""The permutation test's false alarm rate (seeded, so it runs the same every time)."""


@pytest.mark.parametrize("shuffle", [True, False], ids=["shuffled", "arrival-order-control"])
def test_the_forwarded_order_is_independent_of_the_arrival_order(
    memory_dir: Path, shuffle: bool
) -> None:
    """Chi-square test of independence between arrival rank and forwarded place over 300
    batches of 8 (expected count 37.5 per cell). The control, reading the batch back in arrival
    order, must be rejected: the test can fail."""
    store = Store(memory_dir / "s.db", rng=random.Random(29))
    counts = contingency(store, 300, 8, shuffle=shuffle)
    statistic, p_value, _, _ = stats.chi2_contingency(counts)
    assert (p_value > ALPHA) == shuffle, (statistic, p_value)
    if shuffle:
        ranks = np.repeat(np.arange(8), 8)
        places = np.tile(np.arange(8), 8)
        rho = np.corrcoef(
            ranks,
            places,
        )[0, 1]
        assert rho == pytest.approx(0.0, abs=1e-12)  # the design itself is balanced


def test_the_store_draws_from_the_os_csprng_by_default(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    assert isinstance(store._rng, random.SystemRandom)


def test_concurrent_uploads_commit_in_groups_and_each_counts_its_own(memory_dir: Path) -> None:
    store = Store(memory_dir / "s.db")
    shared = [incoming(f"shared{i}") for i in range(10)]
    results: list[tuple[int, int]] = []
    lock = threading.Lock()

    def device(n: int) -> None:
        for round_ in range(20):
            mine = [incoming(f"{n}-{round_}"), shared[round_ % 10]]
            outcome = store.receive(f"{n:032x}", mine)
            with lock:
                results.append(outcome)

    threads = [threading.Thread(target=device, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(new for new, _ in results) == 8 * 20 + 10
    assert sum(dup for _, dup in results) == 8 * 20 - 10
    assert store.counts()["received"] == 8 * 20 + 10


def test_a_file_of_the_first_layout_moves_to_the_hash_ordered_table(tmp_path: Path) -> None:
    path = tmp_path / "first.db"
    first = sqlite3.connect(path, isolation_level=None)
    first.execute(
        "CREATE TABLE envelopes (id TEXT PRIMARY KEY, batch_key TEXT NOT NULL, device TEXT,"
        " key TEXT NOT NULL, sealed TEXT, batch TEXT, position INTEGER)"
    )
    first.execute(
        "CREATE TABLE batches (id TEXT PRIMARY KEY, batch_key TEXT NOT NULL, n INTEGER NOT"
        " NULL, parts INTEGER NOT NULL, per_part INTEGER NOT NULL, forwarded INTEGER NOT NULL"
        " DEFAULT 0)"
    )
    fields = [KEY.metric, KEY.mechanism, KEY.epsilon, KEY.fingerprint]
    old_key = json.dumps(fields, separators=(",", ":"))  # cb36814's four-field batch key
    first.executemany(
        "INSERT INTO envelopes VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            ("a" * 32, old_key, "d" * 32, KEY.sealing_key, "waiting", None, None),
            ("b" * 32, old_key, None, KEY.sealing_key, "batched", "x" * 32, 0),
            ("c" * 32, old_key, None, KEY.sealing_key, None, "y" * 32, 0),
        ],
    )
    first.execute("INSERT INTO batches VALUES (?, ?, 1, 1, 1000, 0)", ("x" * 32, old_key))
    first.close()
    store = Store(path)
    assert store.counts() == {"received": 1, "batched": 1, "forwarded": 1, "batches": 1}
    assert store.receive("e" * 32, [incoming("again", envelope="c" * 32)]) == (0, 1)
    (unfinished,) = store.unfinished()  # the batch formed before the upgrade keeps its key
    assert unfinished.key == KEY and store.part(unfinished, 0) == [(KEY.sealing_key, "batched")]
    assert store.waiting_keys(1) == [KEY]  # the report that waited across the upgrade
    batch = store.form_batch(KEY, 1, 10, 1000, 900_000)
    assert batch is not None and store.part(batch, 0) == [(KEY.sealing_key, "waiting")]
    (sql,) = (
        sqlite3.connect(path)
        .execute("SELECT sql FROM sqlite_master WHERE name = 'envelopes'")
        .fetchone()
    )
    assert "WITHOUT ROWID" in sql


def test_batches_formed_together_are_those_formed_one_by_one(tmp_path: Path) -> None:
    other = BatchKey("other", "krr", 1.0, "0" * 16, "f" * 16)
    store = Store(tmp_path / "s.db")
    for i in range(7):  # KEY: 7 devices with 2 reports each; other: 3 devices with 1
        mine = [incoming(f"k{i}a"), incoming(f"k{i}b")]
        store.receive(f"{i:032x}", [*mine, *([incoming(f"o{i}", other)] if i < 3 else [])])
    first, left = store.form_batches([KEY, other], 3, 3, 1000, 900_000, 1)
    assert [b.key for b in first] == [KEY] and left == [KEY, other]
    rest, left = store.form_batches(left, 3, 3, 1000, 900_000, 10)
    formed = first + rest
    assert [b.key for b in formed] == [KEY] * 4 + [other] and left == []
    assert [batch.n for batch in formed] == [3] * 5
    assert store.counts()["received"] == 2  # 14 of KEY in 4 batches of 3: 2 left waiting
    for batch in formed:
        members = [sealed for _, sealed in store.part(batch, 0)]
        assert len({label[:2] for label in members}) == 3  # one report per device
    threads = [threading.Thread(target=store.acknowledged, args=(b, 0)) for b in formed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.unfinished() == []
    assert store.counts() == {"received": 2, "batched": 0, "forwarded": 15, "batches": 5}
