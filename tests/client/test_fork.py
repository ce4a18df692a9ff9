"""After ``os.fork()`` parent and child must not share buffered randomness or pre-made report
ids: shared draws would correlate their randomization, shared ids would make the collector drop
one report as a duplicate. Seeded test randomness stays reproducible."""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deniable.client import MetricSpec
from deniable.client.randomness import (
    LocalRandomness,
    ReportIds,
    SeededRandomness,
    SystemRandomness,
    system_randomness,
    uuid4_texts,
)
from testkit.stub_collector import fast_client, running

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")

N = 64
SPECS = [MetricSpec.categorical("browser", ["chrome", "firefox", "safari", "other"], epsilon=1.0)]


def _read_all(fd: int, timeout: float) -> bytes:
    """Everything written to the pipe until EOF; fails instead of hanging on a stuck child."""
    deadline = time.monotonic() + timeout
    data = b""
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, "the child did not answer in time"
        chunk = os.read(fd, 65536)
        if not chunk:
            return data
        data += chunk


def in_parent_and_child(draw: Callable[[], Any]) -> tuple[Any, Any]:
    """Fork, then ``draw()`` in both processes; the child's result comes back through a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            os.write(write, json.dumps(draw()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        mine = draw()
        theirs = json.loads(_read_all(read, timeout=20))
    finally:
        os.close(read)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return mine, theirs


def test_buffered_sources_and_ids_differ_between_parent_and_child() -> None:
    local, shared, ids = LocalRandomness(), SystemRandomness(), ReportIds()
    for source in (local, shared, system_randomness):  # fill every buffer before the fork
        source.random()
        source.randbelow(1000)
        source.token_bytes(16)
    ids.take()

    def draw() -> dict[str, list[Any]]:
        return {
            "local": [local.random() for _ in range(N)],
            "local_words": [local.randbelow(1 << 40) for _ in range(N)],
            "local_bytes": [local.token_bytes(N).hex()],
            "shared": [shared.random() for _ in range(N)],
            "shared_bytes": [shared.token_bytes(N).hex()],
            "default": [system_randomness.random() for _ in range(N)],
            "ids": [ids.take() for _ in range(N)],
            "uuid4_texts": uuid4_texts(N),
        }

    mine, theirs = in_parent_and_child(draw)
    for name, values in mine.items():
        assert values != theirs[name], name
    assert not set(mine["ids"] + mine["uuid4_texts"]) & set(theirs["ids"] + theirs["uuid4_texts"])


def test_seeded_randomness_is_not_reseeded_by_a_fork() -> None:
    seeded = SeededRandomness(20261101)
    seeded.random()
    mine, theirs = in_parent_and_child(lambda: [seeded.random() for _ in range(N)])
    assert mine == theirs


def test_a_client_records_reports_with_different_ids_in_parent_and_child(tmp_path: Path) -> None:
    with running(SPECS) as stub:
        client = fast_client(
            stub.url, tmp_path, metrics=SPECS, max_reports_per_period=4 * N, persist_interval=1.0
        )
        assert client.record("browser", "chrome")  # makes the first block of ids

        def record() -> list[str]:
            for _ in range(N):
                assert client.record("browser", "safari")
            # the child has no persister thread, so its new reports are the last in memory
            return [report[0] for report in list(client._recorder.pending)[-N:]]

        _, child_ids = in_parent_and_child(record)
        assert client.flush(timeout=10)
        client.close()
    assert len(stub.stored) == N + 1
    assert len(set(child_ids)) == N
    assert not set(stub.stored) & set(child_ids)
