"""A batch the collector refuses (here: below its DENIABLE_SHUFFLE_MIN_BATCH) never holds up
the others: the releaser forwards the next batch in the same round and tries the refused one
again later, unacknowledged."""

from __future__ import annotations

import datetime as dt
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from deniable.collector.sealingkeys import generate
from deniable.shuffler import ShufflerSettings
from deniable.shuffler.service import Releaser
from deniable.shuffler.store import BatchKey, Incoming, Store

from testkit import RunningCollector, collector_settings
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


def test_a_refused_batch_does_not_hold_up_the_next(
    server: RunningCollector, tmp_path: Path
) -> None:
    settings = ShufflerSettings(
        store=tmp_path / "s.db",
        collector_url=server.url,
        token=SHUFFLER_TOKEN,
        min_batch=COLLECTOR_MIN,
        max_delay=0,
        retry_cap=1,
    )
    store = Store(settings.store, limits=settings.limits())
    small, whole = (
        BatchKey("small", "krr", 1.0, "0" * 16, "f" * 16),
        BatchKey("whole", "krr", 1.0, "1" * 16, "f" * 16),
    )
    for i in range(COLLECTOR_MIN):
        keys = [small, whole] if i < COLLECTOR_MIN - 1 else [whole]
        store.receive(
            f"{i:032x}", [Incoming(secrets.token_hex(16), k, "f" * 16, "AAAA") for k in keys]
        )
    refused = store.form_batch(small, COLLECTOR_MIN - 1, 100, 1000, 900_000)
    assert refused is not None and refused.n == COLLECTOR_MIN - 1
    releaser = Releaser(store, settings)
    rounds = threading.Thread(target=releaser.round)
    rounds.start()
    rounds.join(timeout=30)
    held = rounds.is_alive()
    releaser.stop()  # ends a round still retrying, so a failure fails and does not hang
    rounds.join(timeout=30)
    try:
        assert not held, "the refused batch held the round up"
        (left,) = store.unfinished()  # the whole one went, acknowledged; the small one waits
        assert left.id == refused.id and left.forwarded == 0
        assert store.counts()["forwarded"] == COLLECTOR_MIN
    finally:
        store.close()
