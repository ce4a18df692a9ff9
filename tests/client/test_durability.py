"""Durability: kill -9 of a recording process, then a restart that delivers exactly once and
never grants a second report in a period."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from deniable.client import Client, MetricSpec
from testkit.stub_collector import StubCollector, running

SPECS = [
    MetricSpec.boolean("dark_mode", epsilon=0.5),
    MetricSpec.categorical("browser", ["chrome", "firefox", "safari", "other"], epsilon=1.0),
    MetricSpec.categorical("country", [f"c{i}" for i in range(40)], epsilon=1.0, mechanism="olh"),
]

QUEUE_CHILD = """
import sys, time
from deniable.client import Client
client = Client(sys.argv[1], state_dir=sys.argv[2], batch_size=10, max_reports_per_period=30,
                backoff_base=0.05, backoff_cap=0.1, flush_interval=0.1, persist_interval=0.2)
for i in range(30):
    assert client.record("browser", ["chrome", "safari"][i % 2])
time.sleep(1.5)
print("READY", flush=True)
time.sleep(120)
"""

BUDGET_CHILD = """
import sys, time
from deniable.client import Client
client = Client(sys.argv[1], state_dir=sys.argv[2], persist_interval=0.2, flush_interval=60)
print("STARTED", flush=True)
while True:
    client.record("dark_mode", True)
    client.record("browser", "other")
    client.record("country", "c9")
    time.sleep(0.001)
"""


@pytest.fixture
def collector() -> Iterator[StubCollector]:
    with running(SPECS) as stub:
        yield stub


def spawn(code: str, url: str, state_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, url, str(state_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )


def kill9(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL


def test_kill_9_mid_queue_then_restart_delivers_every_report_exactly_once(
    collector: StubCollector, tmp_path: Path
) -> None:
    collector.drop_ack = 1
    collector.down_after = 1
    child = spawn(QUEUE_CHILD, collector.url, tmp_path)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "READY"
    finally:
        kill9(child)
    assert collector.commits == 1
    first_batch = set(collector.stored)
    assert len(first_batch) == 10
    collector.down_after = None

    client = Client(collector.url, state_dir=tmp_path, max_reports_per_period=30, backoff_base=0.02)
    assert client.stats.queued == 30
    assert client.record("browser", "chrome") is False
    assert client.flush(timeout=10)
    client.close()
    assert len(collector.stored) == 30
    assert {i for i, n in collector.deliveries.items() if n == 2} == first_batch
    assert client.stats.duplicates == 10
    assert Counter(r["metric"] for r in collector.stored.values()) == {"browser": 30}


@pytest.mark.parametrize("delay", [0.05, 0.8])
def test_a_kill_at_any_moment_never_leads_to_a_second_report_in_a_period(
    collector: StubCollector, tmp_path: Path, delay: float
) -> None:
    collector.down_after = 0
    child = spawn(BUDGET_CHILD, collector.url, tmp_path)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "STARTED"
        time.sleep(delay)
    finally:
        kill9(child)
    collector.down_after = None
    client = Client(collector.url, state_dir=tmp_path, backoff_base=0.02)
    admitted = [client.record(m.name, v) for m, v in zip(SPECS, [True, "other", "c9"], strict=True)]
    assert client.flush(timeout=10)
    client.close()
    per_metric_period = Counter((r["metric"], r["period"]) for r in collector.stored.values())
    assert sorted(m for m, _ in per_metric_period) == sorted(s.name for s in SPECS)
    assert set(per_metric_period.values()) == {1}
    if delay > 0.5:
        assert admitted == [False, False, False]
