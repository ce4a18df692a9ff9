"""A collector that serves a fresh key per ``GET /v1/keys`` (issue 37, item 3) cannot link a
shuffled report to its device: devices take keys from the shuffler only, the shuffler serves one
key set to all of them, and a batch holds reports sealed to one key only.

The collector is :class:`testkit.key_server.KeyServer` in partitioning mode; the shuffler is a
real ``deniable shuffle`` process; the devices are real SDK clients. The shuffler is restarted
between two groups of devices, so the collector does hand out two keys (the attack is live):
each group's reports form their own batch, and the key that opens a report names only its
group of ``MIN_BATCH`` devices, never its device."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import httpx

from deniable.client import Client, MetricSpec
from deniable.client.sealing import envelope_id
from testkit.key_server import KeyServer
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, ShufflerProcess
from testkit.stub_collector import eventually

SPEC = MetricSpec.categorical("browser", ["a", "b", "c"], epsilon=1.0)
MIN_BATCH = 3
GROUPS = 2


class Spy(httpx.HTTPTransport):
    """The device's own HTTP transport, noting the envelopes it uploads (id -> key id)."""

    def __init__(self) -> None:
        super().__init__()
        self.sealed: dict[str, str] = {}
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(f"{request.url.host}:{request.url.port}{request.url.path}")
        if request.url.path == "/v1/sealed":
            for item in json.loads(request.content)["envelopes"]:
                self.sealed[item["id"]] = item["key"]
        return super().handle_request(request)


def send_one(collector: str, shuffler: str, state_dir: Path, spy: Spy) -> None:
    """One device records one value and delivers it to the shuffler."""
    with Client(
        collector,
        shuffler=shuffler,
        shuffler_key=SHUFFLER_UPLOAD_KEY,
        state_dir=state_dir,
        metrics=[SPEC],
        transport=spy,
        backoff_base=0.02,
        backoff_cap=0.2,
        flush_interval=60.0,
    ) as device:
        assert device.record("browser", "b")
        assert device.flush(timeout=20)


def test_a_key_partitioning_collector_never_gets_two_keys_into_one_batch(
    tmp_path: Path,
) -> None:
    spies: list[list[Spy]] = []
    with KeyServer([SPEC], partition=True) as collector:
        shuffler = ShufflerProcess(
            tmp_path / "shuffler.db",
            collector.url,
            tmp_path,
            min_batch=MIN_BATCH,
            settings={"DENIABLE_SHUFFLER_KEYS_REFRESH": "3600"},
        )
        try:
            for group in range(GROUPS):
                shuffler.start()  # a (re)start fetches the collector's keys: a new key
                spies.append([Spy() for _ in range(MIN_BATCH)])
                for i, spy in enumerate(spies[-1]):
                    send_one(collector.url, shuffler.url, tmp_path / f"d{group}-{i}", spy)
                assert eventually(lambda: shuffler.counts()["forwarded"] == len(spies) * MIN_BATCH)
                shuffler.stop()
        finally:
            shuffler.stop()
        parts = list(collector.parts)
        opened = {
            (part["batch"], index): collector.open(envelope, part)
            for part in parts
            for index, envelope in enumerate(part["envelopes"])
        }
        fetches, handed_out = collector.fetches, len(collector.handed_out)
        collector_keys = collector.url.removeprefix("http://") + "/v1/keys"

    # Only the shuffler asked the collector for keys (once per start), never a device.
    assert fetches == GROUPS and handed_out == GROUPS
    shuffler_keys = shuffler.url.removeprefix("http://") + "/v1/keys"
    for spy in (spy for group in spies for spy in group):
        assert collector_keys not in spy.paths and shuffler_keys in spy.paths

    # The devices of one group sealed to one key; the two groups to two (the attack was live).
    group_keys = [{key for spy in group for key in spy.sealed.values()} for group in spies]
    assert all(len(keys) == 1 for keys in group_keys)
    assert len(set.union(*group_keys)) == GROUPS

    # Every part holds one key id, and every report in it opens with one handed-out key.
    for part in parts:
        assert len({envelope["key"] for envelope in part["envelopes"]}) == 1
    assert None not in opened.values()
    by_batch: dict[str, set[int]] = defaultdict(set)
    for (batch, _), found in opened.items():
        assert found is not None
        by_batch[batch].add(found[0])
    assert all(len(keys) == 1 for keys in by_batch.values())

    # What the collector learns from the key that opens a report: its group, never its device.
    device_of: dict[str, tuple[int, int]] = {
        envelope: (g, i)
        for g, group in enumerate(spies)
        for i, spy in enumerate(group)
        for envelope in spy.sealed
    }
    devices_per_key: dict[int, set[tuple[int, int]]] = defaultdict(set)
    batches_of_device: dict[tuple[int, int], set[str]] = defaultdict(set)
    for (batch, _), found in opened.items():
        assert found is not None
        device = device_of[envelope_id(found[1])]
        devices_per_key[found[0]].add(device)
        batches_of_device[device].add(batch)
    assert sorted(len(devices) for devices in devices_per_key.values()) == [MIN_BATCH] * GROUPS
    batch_groups: dict[str, set[int]] = defaultdict(set)
    for (g, _), batches in batches_of_device.items():
        for batch in batches:
            batch_groups[batch].add(g)
    assert all(len(groups) == 1 for groups in batch_groups.values())
