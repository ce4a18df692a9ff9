"""A batch the collector refuses (here: below its DENIABLE_SHUFFLE_MIN_BATCH, or under a metric
it never registered) never holds up the others: the releaser forwards the next batch in the
same round and tries the refused one again later, unacknowledged, until ``max_wait_hours``
after its first refusal; then it is deleted, durably, with an ERROR. The collector is real, its metrics registered and the reports
sealed to its current key, so only the refusal under test can refuse them."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deniable.client import MetricSpec
from deniable.client.sealing import envelope, public_key_of
from deniable.client.wire import report_text
from deniable.collector.sealingkeys import generate
from deniable.shuffler import ShufflerSettings
from deniable.shuffler.service import Releaser
from deniable.shuffler.store import BatchKey, Incoming, Limits, Store
from testkit import ADMIN_TOKEN, RunningCollector, collector_settings, unique_name
from testkit.clock import Clock
from testkit.metrics import register
from testkit.shuffler_files import store_files
from testkit.shuffler_process import SHUFFLER_TOKEN

COLLECTOR_MIN = 4


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningCollector]:
    keys = tmp_path / "keys.json"
    generate(keys, dt.datetime.now(dt.UTC))
    settings = collector_settings(
        f"sqlite:///{tmp_path}/c.db",
        shuffler_token=SHUFFLER_TOKEN,
        sealing_keys_file=keys,
        shuffle_min_batch=COLLECTOR_MIN,
    )
    running = RunningCollector(settings).start()
    yield running
    running.stop()


def registered(server: RunningCollector, prefix: str) -> MetricSpec:
    """A categorical metric registered on ``server``."""
    spec = MetricSpec.categorical(unique_name(prefix), ["a", "b", "c"], epsilon=1.0)
    with server.client(ADMIN_TOKEN) as admin:
        return register(admin, spec)


def sealed(server: RunningCollector, spec: MetricSpec) -> Incoming:
    """One report of ``spec`` for today sealed to ``server``'s current key, as a device
    uploads it to the shuffler."""
    served = httpx.get(server.url + "/v1/keys", trust_env=False).json()["keys"]
    (entry,) = [k for k in served if k["current"]]
    kid, public = public_key_of(entry)
    period = server.clock().date().isoformat()
    report = report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, 0)
    sent = envelope(report, spec, public)
    key = BatchKey(spec.name, spec.mechanism, spec.epsilon, spec.fingerprint, kid)
    return Incoming(sent["id"], key, kid, sent["sealed"])


def releaser_for(server: RunningCollector, store: Store) -> Releaser:
    settings = ShufflerSettings(
        store=store.path,
        collector_url=server.url,
        token=SHUFFLER_TOKEN,
        min_batch=COLLECTOR_MIN,
        max_delay=0,
        retry_cap=1,
        max_wait_hours=store.limits.max_wait_hours,
    )
    return Releaser(store, settings)


def run_round(releaser: Releaser) -> bool:
    """Run one round of ``releaser`` in a thread; whether it was still running after 30 s
    (then it is stopped, so a failure fails and does not hang)."""
    rounds = threading.Thread(target=releaser.round)
    rounds.start()
    rounds.join(timeout=30)
    held = rounds.is_alive()
    if held:
        releaser.stop()
        rounds.join(timeout=30)
    return held


def test_a_refused_batch_does_not_hold_up_the_next(
    server: RunningCollector, tmp_path: Path
) -> None:
    small, whole = registered(server, "small"), registered(server, "whole")
    store = Store(tmp_path / "s.db")
    for i in range(COLLECTOR_MIN):
        specs = [small, whole] if i < COLLECTOR_MIN - 1 else [whole]
        store.receive(f"{i:032x}", [sealed(server, spec) for spec in specs])
    small_key = sealed(server, small).key
    refused = store.form_batch(small_key, COLLECTOR_MIN - 1, 100, 1000, 900_000)
    assert refused is not None and refused.n == COLLECTOR_MIN - 1
    releaser = releaser_for(server, store)
    held = run_round(releaser)
    releaser.stop()
    try:
        assert not held, "the refused batch held the round up"
        (left,) = store.unfinished()  # the whole one went, acknowledged; the small one waits
        assert left.id == refused.id and left.forwarded == 0
        assert store.counts()["forwarded"] == COLLECTOR_MIN
    finally:
        store.close()


def test_junk_the_collector_refuses_is_kept_max_wait_hours_then_deleted_durably(
    server: RunningCollector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hours = 48
    clock = Clock()
    invented = MetricSpec.categorical(unique_name("invented"), ["a", "b", "c"], epsilon=1.0)
    store = Store(tmp_path / "s.db", limits=Limits(max_wait_hours=hours), clock=clock)
    junk = [sealed(server, invented) for _ in range(COLLECTOR_MIN)]
    for i, report in enumerate(junk):  # min_batch pseudonyms, as anyone with the app's key
        store.receive(f"{i:032x}", [report])
    releaser = releaser_for(server, store)
    try:
        with caplog.at_level(logging.WARNING, logger="deniable.shuffler"):
            assert not run_round(releaser)  # formed, forwarded, refused: unknown metric
        assert any("HTTP 422" in r.getMessage() for r in caplog.records)
        caplog.clear()
        (batch,) = store.unfinished()
        assert (batch.n, batch.forwarded) == (COLLECTOR_MIN, 0)
        clock.now += dt.timedelta(hours=hours, seconds=-1)
        releaser._refused.clear()  # no backoff left: it is tried again, and refused again
        assert not run_round(releaser)
        assert [b.id for b in store.unfinished()] == [batch.id]
        assert store.counts()["batched"] == COLLECTOR_MIN
        assert junk[0].sealed[:64].encode() in store_files(store.path)["s.db"]
        clock.now += dt.timedelta(seconds=1)  # max_wait_hours since the first refusal
        with caplog.at_level(logging.ERROR, logger="deniable.shuffler"):
            assert not run_round(releaser)
        assert store.unfinished() == []
        assert store.counts() == {"received": 0, "batched": 0, "forwarded": 0, "batches": 0}
        for name, raw in store_files(store.path).items():
            for report in junk:
                assert report.sealed[:64].encode() not in raw, name
        (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert invented.name in record.getMessage()
        assert f"{COLLECTOR_MIN} reports" in record.getMessage()
    finally:
        releaser.stop()
        store.close()
