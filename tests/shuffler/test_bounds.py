"""The shuffler's bounds and expiry: a client pushing junk (under invented metric names, from
one pseudonym or from fresh ones) is refused whole at the per-pseudonym bound (429) and at the
file's bound (507), the file stays under that bound; reports waiting past ``max_wait_hours``
and forwarded ids kept as long are deleted, durably, and a batched report never expires."""

from __future__ import annotations

import base64
import datetime as dt
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from deniable.shuffler import ShufflerSettings
from deniable.shuffler.service import Releaser
from deniable.shuffler.store import WAL_LIMIT, BatchKey, Incoming, Limits, Store
from testkit.clock import Clock
from testkit.key_server import KeyServer
from testkit.shuffler_files import store_files
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, ShufflerProcess

MAX_BYTES = 2 << 20
DEVICE_WAITING = 50
KEY = BatchKey("browser", "krr", 1.0, "0123456789abcdef", "fedcba9876543210")
COLLECTOR = KeyServer([])
"""Serves the shuffler one key; nothing is forwarded here (min_batch is never reached)."""


def junk(metric: str, size: int = 3000) -> dict[str, Any]:
    """An envelope of random bytes under ``metric`` (a name nobody registered), sealed (as far
    as the shuffler can tell) to the key it serves: what anyone holding the app's upload key
    can send."""
    return {
        "id": secrets.token_hex(16),
        "metric": metric,
        "mechanism": "krr",
        "epsilon": 1.0,
        "fingerprint": secrets.token_hex(8),
        "key": COLLECTOR.key_id,
        "sealed": base64.b64encode(secrets.token_bytes(size)).decode(),
    }


@pytest.fixture
def shuffler(tmp_path: Path) -> Iterator[ShufflerProcess]:
    with COLLECTOR:
        process = ShufflerProcess(
            tmp_path / "s.db",
            COLLECTOR.url,
            tmp_path,
            min_batch=1000,
            settings={
                "DENIABLE_SHUFFLER_MAX_BYTES": str(MAX_BYTES),
                "DENIABLE_SHUFFLER_DEVICE_WAITING": str(DEVICE_WAITING),
                "DENIABLE_SHUFFLER_MAX_UPLOAD": str(DEVICE_WAITING),
                "DENIABLE_SHUFFLER_KEYS_REFRESH": "60",
            },
        )
        with process:
            yield process


def test_a_client_pushing_junk_hits_the_bounds_and_the_file_stays_under_them(
    shuffler: ShufflerProcess,
) -> None:
    device = secrets.token_hex(16)
    upload_key = {"Authorization": f"Bearer {SHUFFLER_UPLOAD_KEY}"}
    with httpx.Client(
        base_url=shuffler.url, trust_env=False, timeout=30, headers=upload_key
    ) as client:

        def post(device: str, envelopes: list[dict[str, Any]]) -> httpx.Response:
            return client.post("/v1/sealed", json={"device": device, "envelopes": envelopes})

        first = [junk("made_up") for _ in range(40)]
        assert post(device, first).status_code == 202
        over = post(device, [junk("made_up") for _ in range(11)])
        assert over.status_code == 429 and "DENIABLE_SHUFFLER_DEVICE_WAITING" in over.text
        assert shuffler.counts()["received"] == 40  # nothing of the refused upload
        statuses = []
        for round_ in range(200):
            answer = post(secrets.token_hex(16), [junk(f"invented_{round_}") for _ in range(40)])
            statuses.append(answer.status_code)
            if answer.status_code != 202:
                break
        assert answer.status_code == 507 and "DENIABLE_SHUFFLER_MAX_BYTES" in answer.text
        assert statuses.count(202) * 40 * 3000 > MAX_BYTES // 2  # the bound stopped it
        before = shuffler.counts()["received"]
        small: list[httpx.Response] = []
        for _ in range(500):  # the room left is under one large upload: small ones fill it
            small.append(post(secrets.token_hex(16), [junk("tiny", 16) for _ in range(20)]))
            if small[-1].status_code != 202:
                break
        assert {a.status_code for a in small} <= {202, 507} and small[-1].status_code == 507
        accepted = before + 20 * sum(a.status_code == 202 for a in small)
        assert shuffler.counts()["received"] == accepted  # whole uploads or nothing
        again = post(device, first[:1])  # a resend takes no room: still acknowledged
        assert (again.status_code, again.json()) == (202, {"accepted": 0, "duplicates": 1})
    files = store_files(shuffler.store)
    assert len(files["s.db"]) <= MAX_BYTES, len(files["s.db"])
    assert len(files.get("s.db-wal", b"")) <= WAL_LIMIT
    assert shuffler.counts()["received"] == accepted


def test_waiting_reports_and_forwarded_ids_expire_durably_and_batched_ones_never(
    tmp_path: Path,
) -> None:
    clock = Clock()
    path = tmp_path / "s.db"
    store = Store(path, limits=Limits(max_wait_hours=168), clock=clock)
    sent = [Incoming(secrets.token_hex(16), KEY, "f" * 16, f"report{i}") for i in range(6)]
    for i, envelope in enumerate(sent):
        store.receive(f"{i:032x}", [envelope])
    forwarded = store.form_batch(KEY, 3, 3, 1000, 900_000)
    batched = store.form_batch(KEY, 3, 3, 1000, 900_000)
    assert forwarded is not None and batched is not None
    gone = {sealed for _, sealed in store.part(forwarded, 0)}
    store.acknowledged(forwarded, 0)
    clock.now += dt.timedelta(hours=1)
    device = secrets.token_hex(16)
    junk_key = BatchKey("invented", "krr", 1.0, "0" * 16, "f" * 16)
    waiting = [Incoming(secrets.token_hex(16), junk_key, "f" * 16, "junk" * 20) for _ in range(2)]
    store.receive(device, waiting)
    clock.now += dt.timedelta(hours=167) - dt.timedelta(seconds=1)
    assert store.expire() == 0  # the forwarded ids' week is up, the junk's is not
    clock.now += dt.timedelta(seconds=1)
    assert store.expire() == 3
    clock.now += dt.timedelta(hours=1)
    assert store.expire() == 2
    assert store.counts() == {"received": 0, "batched": 3, "forwarded": 0, "batches": 2}
    for name, raw in store_files(path).items():
        assert device.encode() not in raw and b"junkjunk" not in raw, name
        for envelope in waiting:
            assert envelope.id.encode() not in raw, name
    (resent,) = [e for e in sent if e.sealed == sorted(gone)[0]]
    assert store.receive("e" * 32, [resent]) == (1, 0)  # an expired id is new again
    store.close()


def test_a_pseudonyms_bound_below_the_largest_upload_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"DEVICE_WAITING must be at least .*MAX_UPLOAD"):
        ShufflerSettings(device_waiting=10, max_upload=20)


def test_the_releaser_expires_in_each_round(tmp_path: Path) -> None:
    clock = Clock()
    settings = ShufflerSettings(store=tmp_path / "s.db", max_wait_hours=1)
    store = Store(settings.store, limits=settings.limits(), clock=clock)
    store.receive("a" * 32, [Incoming(secrets.token_hex(16), KEY, "f" * 16, "junk")])
    releaser = Releaser(store, settings)
    try:
        releaser.round()
        assert store.counts()["received"] == 1
        clock.now += dt.timedelta(hours=2)
        releaser.round()
        assert store.counts()["received"] == 0
    finally:
        releaser.stop()
        store.close()
