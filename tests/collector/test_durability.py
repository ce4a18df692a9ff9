"""Durability: a collector process SIGKILLed during sustained concurrent ingestion, then restarted.

Every report that got a 202 is counted exactly once; nothing that got an error response is
stored; a batch whose answer was lost in the crash is stored whole or not at all; and the
counts equal the stored reports' support exactly.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, select

from deniable.client import MetricSpec, SeededRandomness
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.tables import period_counts, reports, support_counts
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    CollectorProcess,
    DatabaseFactory,
    collector_settings,
)

BATCH = 200
WORKERS = 4


def stored_state(database_url: str) -> tuple[dict[str, str], int, Counter[int]]:
    """Stored report ids with payloads, the period count n, and the support counts."""
    engine = create_engine(normalize_url(database_url))
    try:
        with engine.connect() as conn:
            ids = dict(conn.execute(select(reports.c.id, reports.c.payload)).all())
            n = sum(row[0] for row in conn.execute(select(period_counts.c.n)))
            support: Counter[int] = Counter(
                dict(
                    conn.execute(select(support_counts.c.category, support_counts.c.support)).all()
                )
            )
    finally:
        engine.dispose()
    return ids, n, support


def test_sigkill_during_ingestion_loses_no_acknowledged_report_and_counts_once(
    databases: DatabaseFactory, backend: str, tmp_path: Path
) -> None:
    url = databases.new(backend)
    server = CollectorProcess(collector_settings(url), tmp_path).start()
    spec = MetricSpec.categorical("crash", ["a", "b", "c", "d"], epsilon=1.0, mechanism="krr")
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    response = httpx.post(
        f"{server.url}/v1/metrics", json=spec.fingerprint_fields(), headers=headers
    )
    assert response.status_code == 201
    period = dt.datetime.now(dt.UTC).date().isoformat()

    acked: list[list[dict[str, Any]]] = []
    refused: list[list[dict[str, Any]]] = []
    lost: list[list[dict[str, Any]]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def make_batch(rng: SeededRandomness, poison: bool) -> list[dict[str, Any]]:
        batch = [
            {
                "id": str(uuid.uuid4()),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": period,
                "payload": spec.randomizer.randomize(rng.randbelow(4), rng),
            }
            for _ in range(BATCH)
        ]
        if poison:
            batch[-1]["payload"] = 9
        return batch

    def worker(seed: int) -> None:
        rng = SeededRandomness(seed)
        with httpx.Client(
            timeout=10, trust_env=False, headers={"Authorization": f"Bearer {INGEST_KEY}"}
        ) as client:
            sent = 0
            while not stop.is_set() and sent < 400:
                sent += 1
                if sent % 4 == 0 and acked:
                    with lock:
                        batch = acked[(seed * sent) % len(acked)]
                else:
                    batch = make_batch(rng, poison=sent % 5 == 0)
                try:
                    answer = client.post(f"{server.url}/v1/reports", json={"reports": batch})
                except httpx.HTTPError:
                    with lock:
                        lost.append(batch)
                    return
                with lock:
                    (acked if answer.status_code == 202 else refused).append(batch)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(WORKERS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(acked) < 25 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert len(acked) >= 25, "ingestion did not get going before the kill"
    assert refused, "the poisoned batches should have been refused"

    server.start()
    try:
        ids, n, support = stored_state(url)
        acked_ids = {r["id"] for batch in acked for r in batch}
        assert acked_ids <= set(ids)
        for batch in refused:
            assert all(r["payload"] == 9 for r in batch[-1:])
            assert not {r["id"] for r in batch} & set(ids)
        poisoned = [batch for batch in lost if batch[-1]["payload"] == 9]
        lost = [batch for batch in lost if batch[-1]["payload"] != 9]
        for batch in poisoned:
            assert not {r["id"] for r in batch} & set(ids)
        for batch in lost:
            stored = {r["id"] for r in batch} & set(ids)
            assert len(stored) in (0, len({r["id"] for r in batch}))
        assert n == len(ids)
        expected: Counter[int] = Counter(json.loads(payload) for payload in ids.values())
        assert support == expected

        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {INGEST_KEY}"}, trust_env=False
        ) as client:
            for batch in lost:
                assert client.post("/v1/reports", json={"reports": batch}).status_code == 202
        ids, n, _ = stored_state(url)
        everything = acked_ids | {r["id"] for batch in lost for r in batch}
        assert set(ids) == everything
        assert n == len(everything)
    finally:
        server.stop()
