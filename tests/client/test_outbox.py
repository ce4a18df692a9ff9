"""The SQLite outbox: wire-format chunks, oldest-first trimming across chunks, batch reads."""

from __future__ import annotations

import json
from pathlib import Path

from deniable.client.ledger import LedgerDelta
from deniable.client.outbox import Outbox, QueuedReport
from deniable.client.randomness import uuid4_texts
from deniable.client.wire import split_reports


def reports(n: int) -> list[QueuedReport]:
    payloads: list[object] = [3, "AQI=", {"a": 5, "b": 7, "y": 1}]
    return [
        (rid, "m", "0123456789abcdef", "2026-11-22", payloads[i % 3])  # type: ignore[misc]
        for i, rid in enumerate(uuid4_texts(n))
    ]


def ids_in(outbox: Outbox) -> list[str]:
    return [
        json.loads(item)["id"]
        for chunk in outbox.peek(10**6, 10**9)
        for item in split_reports(chunk.reports)
    ]


def test_chunks_hold_wire_json_and_trimming_drops_the_oldest_across_chunks(
    tmp_path: Path,
) -> None:
    outbox = Outbox(tmp_path)
    first, second = reports(7), reports(5)
    assert outbox.commit(first, LedgerDelta(), max_queue=100, per_chunk=3, max_bytes=10**6) == 0
    assert len(outbox) == 7
    batch = outbox.peek(5, 10**6)
    assert [c.count for c in batch] == [3]
    assert [c.count for c in outbox.peek(6, 10**6)] == [3, 3]
    decoded = [json.loads(i) for i in split_reports(batch[0].reports)]
    assert [d["payload"] for d in decoded] == [3, "AQI=", {"a": 5, "b": 7, "y": 1}]
    assert [d["id"] for d in decoded] == [r[0] for r in first[:3]]
    dropped = outbox.commit(second, LedgerDelta(), max_queue=8, per_chunk=3, max_bytes=10**6)
    assert dropped == 4
    assert len(outbox) == 8
    expected = [r[0] for r in first[4:] + second]
    assert ids_in(outbox) == expected
    outbox.remove([outbox.peek(1, 10**6)[0].seq])
    assert len(outbox) == 6
    outbox.close()
    reopened = Outbox(tmp_path)
    assert len(reopened) == 6
    assert ids_in(reopened) == expected[2:]
    reopened.close()


def test_chunks_respect_the_byte_limit(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    outbox.commit(reports(30), LedgerDelta(), max_queue=100, per_chunk=1000, max_bytes=1000)
    chunks = outbox.peek(10**6, 10**9)
    assert sum(c.count for c in chunks) == 30
    assert all(len(c.reports) <= 1000 for c in chunks)
    assert len(outbox.peek(1000, 1500)) == 1
    outbox.close()
