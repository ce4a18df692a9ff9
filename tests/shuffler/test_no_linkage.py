"""Through the shuffler, nothing at the collector links a report to its device: no table or
log line holds a device's address, pseudonym, connection or arrival time, the reports carry
only their day, and the shuffler itself keeps no pseudonym once a report is batched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, select

from deniable.client import MetricSpec
from deniable.client.outbox import Outbox
from deniable.client.shuffling import device_pseudonym
from deniable.collector.storage.tables import metadata
from testkit import unique_name
from testkit.shuffle_run import run_devices
from testkit.shuffler_process import Pipeline

DEVICES = 8
ALLOWED_TIME_COLUMNS = {
    ("metrics", "created_at"),
    ("metrics", "archived_at"),
    ("shuffled_batches", "released_at"),
    ("reports", "received"),
}
"""The collector's only time columns: a metric's registration and archive, a batch's release
(one per batch, never per report) and a report's day (its batch's)."""
FORBIDDEN_WORDS = ("ip", "address", "host", "port", "agent", "header", "connection", "device")


def test_nothing_at_the_collector_links_a_report_to_its_device(tmp_path: Path) -> None:
    specs = [MetricSpec.categorical(unique_name("link"), ["a", "b", "c"], epsilon=1.0)]
    url = f"sqlite:///{tmp_path}/collector.db"
    pipeline = Pipeline(url, tmp_path, min_batch=4).start(specs)
    try:
        result = run_devices(pipeline, specs, tmp_path, devices=DEVICES, periods=3, seed=7)
        assert pipeline.shuffler is not None
        shuffler_log = pipeline.shuffler.log_tail(100_000)
        collector_log = pipeline.collector.log_tail(100_000)
    finally:
        pipeline.stop()
    # every report stored or still waiting for min_batch devices (how many wait: timing)
    assert result.stored + result.waiting == DEVICES * 3 and result.stored >= 4

    pseudonyms = []
    for i in range(DEVICES):
        outbox = Outbox(tmp_path / f"device-{i}")
        pseudonyms.append(device_pseudonym(outbox.secret()))
        outbox.close()

    engine = create_engine(url)
    cells: list[str] = []
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            for column in table.columns:
                name = column.name.lower()
                assert not any(word in name.split("_") for word in FORBIDDEN_WORDS), column
                is_time = column.type.python_type.__name__ in ("date", "datetime")
                assert not is_time or (table.name, column.name) in ALLOWED_TIME_COLUMNS, column
            cells += [str(value) for row in connection.execute(select(table)) for value in row]
        days = connection.execute(select(metadata.tables["reports"].c.received).distinct()).all()
    engine.dispose()
    assert len(days) == 1  # one day for every report: nothing finer survives
    everything = "\n".join(cells) + collector_log
    for pseudonym in pseudonyms:
        assert pseudonym not in everything
    assert "127.0.0.1:" not in everything.replace(pipeline.collector.url, "")
    assert "GET /v1" not in collector_log and "POST /v1" not in collector_log
    assert "POST /v1" not in shuffler_log

    store = sqlite3.connect(tmp_path / "shuffler.db")
    left = store.execute("SELECT COUNT(*) FROM envelopes WHERE device IS NOT NULL").fetchone()[0]
    assert left == result.waiting  # only reports still waiting for a batch keep a pseudonym
    tables = {row[0] for row in store.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"envelopes", "batches"}
    store.close()
