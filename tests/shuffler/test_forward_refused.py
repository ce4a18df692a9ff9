"""A batch the collector refuses for good (422: its header names a metric nobody registered) is
dropped by the shuffler, not retried forever: the batch behind it still reaches the collector.
A real ``deniable shuffle`` forwarding to a real collector, both processes on loopback."""

from __future__ import annotations

import base64
import datetime as dt
import secrets
import time
import uuid
from pathlib import Path

import httpx
from deniable.client import MetricSpec
from deniable.client.sealing import envelope, public_key_of
from deniable.client.wire import report_text
from deniable.collector.storage import open_database, read_batches

from testkit import unique_name
from testkit.shuffler_process import Pipeline

MIN_BATCH = 2


def upload(shuffler_url: str, sealed: dict[str, object]) -> None:
    """One device's one envelope to the shuffler; 202."""
    body = {"device": secrets.token_hex(16), "envelopes": [sealed]}
    answer = httpx.post(shuffler_url + "/v1/sealed", json=body, trust_env=False, timeout=30)
    assert answer.status_code == 202, answer.text


def test_a_refused_batch_is_dropped_and_the_next_one_arrives(tmp_path: Path) -> None:
    spec = MetricSpec.categorical(unique_name("fwd"), ["a", "b", "c"], epsilon=2.0)
    url = f"sqlite:///{tmp_path}/collector.db"
    pipeline = Pipeline(url, tmp_path, min_batch=MIN_BATCH).start([spec])
    assert pipeline.shuffler is not None
    try:
        served = httpx.get(pipeline.collector.url + "/v1/keys", trust_env=False).json()["keys"]
        key_id, public = public_key_of(next(k for k in served if k["current"]))
        for _ in range(MIN_BATCH):  # a metric the collector never registered: refused whole
            upload(
                pipeline.shuffler.url,
                {
                    "id": secrets.token_hex(16),
                    "metric": "never-registered",
                    "mechanism": "krr",
                    "epsilon": 2.0,
                    "fingerprint": "0123456789abcdef",
                    "key": key_id,
                    "sealed": base64.b64encode(secrets.token_bytes(240)).decode(),
                },
            )
        time.sleep(1.0)  # the shuffler forms and forwards that batch first
        period = dt.datetime.now(dt.UTC).date().isoformat()
        for i in range(MIN_BATCH):
            text = report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, i)
            upload(pipeline.shuffler.url, envelope(text, spec, public))
        deadline = time.monotonic() + 60
        batches = []
        while not (batches and not batches[0].incomplete) and time.monotonic() < deadline:
            database = open_database(url)
            try:
                batches = read_batches(database, spec.name)
            finally:
                database.dispose()
            time.sleep(0.2)
    finally:
        pipeline.stop()
    assert [(b.n, b.incomplete) for b in batches] == [(MIN_BATCH, False)]
    log = "\n".join(p.read_text(errors="replace") for p in tmp_path.glob("*.log"))
    assert "refused a part of a batch of never-registered for good (HTTP 422" in log, log[-2000:]
