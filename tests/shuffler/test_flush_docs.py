"""docs/sdk.md's section on sending through a shuffler (issue 41): it documents ``shuffler=``
and says that a ``flush()`` through a shuffler means "delivered to the shuffler"; and so it is:
over real processes, one device's flush returns True while the collector stores nothing until
the shuffler's minimum batch of devices is reached."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from sqlalchemy import create_engine, text

from deniable.client import Client, MetricSpec
from testkit import unique_name
from testkit.configuration import INGEST_KEY
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, Pipeline

ROOT = Path(__file__).resolve().parents[2]
MIN_BATCH = 2


def section() -> str:
    guide = (ROOT / "docs" / "sdk.md").read_text()
    start = guide.index("## Sending through a shuffler")
    end = guide.find("\n## ", start + 1)
    return " ".join(guide[start : None if end < 0 else end].split())


def test_the_guide_documents_shuffler_and_what_flush_means() -> None:
    words = section()
    assert 'shuffler="https://shuffler.example.com"' in words and "shuffler_key=" in words
    assert 'What `flush()` means through a shuffler: "delivered to the shuffler".' in words
    assert "It does not mean the collector has them yet" in words
    assert "DENIABLE_SHUFFLER_MIN_BATCH" in words


def stored(database_url: str, metric: str) -> int:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            query = text("SELECT count(*) FROM reports WHERE metric = :m")
            return int(connection.execute(query, {"m": metric}).scalar_one())
    finally:
        engine.dispose()


def test_a_flush_is_delivered_to_the_shuffler_not_yet_to_the_collector(tmp_path: Path) -> None:
    spec = MetricSpec.boolean(unique_name("flushdoc"), epsilon=1.0)
    database = f"sqlite:///{tmp_path}/collector.db"
    pipeline = Pipeline(database, tmp_path, min_batch=MIN_BATCH).start([spec])
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    try:
        assert pipeline.shuffler is not None

        def device(i: int) -> Client:
            assert pipeline.shuffler is not None
            return Client(
                pipeline.collector.url,
                shuffler=pipeline.shuffler.url,
                shuffler_key=SHUFFLER_UPLOAD_KEY,
                state_dir=tmp_path / f"device-{i}",
                metrics=[spec],
                ingest_key=INGEST_KEY,
                clock=lambda: yesterday,
                timeout=5.0,
            )

        with device(0) as first:
            assert first.record(spec.name, True)
            assert first.flush(timeout=30.0) is True
            assert first.stats.delivered == 1
        time.sleep(1.0)  # several release rounds (0.2 s apart): one device is no batch
        assert pipeline.shuffler.counts()["received"] == 1
        assert stored(database, spec.name) == 0
        with device(1) as second:
            assert second.record(spec.name, False)
            assert second.flush(timeout=30.0) is True
        deadline = time.monotonic() + 30
        while stored(database, spec.name) < MIN_BATCH and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stored(database, spec.name) == MIN_BATCH
    finally:
        pipeline.stop()
