"""Event windows under kill -9 (issue 40): a child counting events with ``event()`` is killed
mid-window again and again, then restarted where its clock stopped; every window is reported
exactly once, with at least the events the durability rule promises and at most those counted.

The durability rule: an event is durable once a commit took it, the commit of ``flush()`` or
the background one every ``persist_interval`` seconds; a kill loses only events counted since
the last commit. So per window the report holds at least the events counted before the last
``flush()`` that returned in that life (each life's, summed), and at most every event counted.

Reading a count back from a randomized report: the child's randomness source answers 0 to
every draw, so k-ary randomized response (``if random() < p: report the value``) reports the
true bucket. That changes what is sent, not how windows are kept, closed and committed, which
is what this test is about; the metric is a histogram with one bucket per count (krr), whose
report is the window's count. Reports stay in the outbox (uploads are refused), where they
are counted per window label.

The child writes a journal with one unbuffered ``write`` per line: ``E t`` before each
``event()`` (so a kill between the two counts an event that may not exist: only the upper
bound grows), ``F`` after each ``flush()`` returns (a kill before it only lowers the lower
bound) and ``S t`` when it starts.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from deniable.client.calendar import period_label
from deniable.client.windows import day_date
from deniable.client.wire import split_reports

KILLS = 25
STEP = 300
"""Simulated seconds between two events: 288 events a day."""
LIMIT = 400
"""The histogram's buckets: counts 0..LIMIT-1, each its own bucket (a day holds at most 288)."""
START = 20_400 * 86400 + 3600
"""The first event's simulated time (2025-11-08, 01:00 UTC)."""

CHILD = """
import datetime as dt, os, sys, time
import httpx
from deniable.client import Client, MetricSpec

class Truthful:
    # Every draw 0: krr reports the true bucket (see the test's docstring).
    def random(self): return 0.0
    def randbelow(self, n): return 0
    def token_bytes(self, n): return os.urandom(n)

state_dir, journal, start, step, limit, mode = sys.argv[1:7]
now = [int(start)]
spec = MetricSpec.histogram(
    "crashes", tuple(range(int(limit) + 1)), epsilon=1.0, mechanism="krr"
).with_events("count")
client = Client(
    "http://127.0.0.1:9", state_dir=state_dir, metrics=[spec],
    clock=lambda: dt.datetime.fromtimestamp(now[0], dt.UTC), randomness=Truthful(),
    transport=httpx.MockTransport(lambda request: httpx.Response(503)),
    persist_interval=0.05, flush_interval=3600.0, backoff_base=3600.0, backoff_cap=3600.0,
)
fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, f"S {now[0]}\\n".encode())
if mode == "finish":
    client.close(timeout=0.05)
    sys.exit(0)
count = 0
while True:
    now[0] += int(step)
    os.write(fd, f"E {now[0]}\\n".encode())
    client.event("crashes")
    count += 1
    if count % 50 == 0:
        client.flush(timeout=0.01)
        os.write(fd, b"F\\n")
    time.sleep(0.0003)
"""


def launch(state_dir: Path, journal: Path, start: int, mode: str) -> subprocess.Popen[bytes]:
    """Start the child at simulated time ``start`` (``run``: count events until killed;
    ``finish``: commit and close)."""
    arguments = [str(state_dir), str(journal), str(start), str(STEP), str(LIMIT), mode]
    return subprocess.Popen([sys.executable, "-c", CHILD, *arguments])


def journal_lines(journal: Path) -> list[str]:
    """The journal's complete lines."""
    if not journal.exists():
        return []
    text = journal.read_text()
    return text.split("\n")[:-1]


def bounds(lines: list[str]) -> tuple[Counter[int], Counter[int]]:
    """Per day: the events committed by a flush that returned in their life (summed over
    lives), and every event counted."""
    committed: Counter[int] = Counter()
    counted: Counter[int] = Counter()
    pending: Counter[int] = Counter()
    for line in lines:
        kind, _, value = line.partition(" ")
        if kind == "S":
            pending = Counter()  # a new life: what the last one did not flush may be lost
        elif kind == "E":
            day = int(value) // 86400
            counted[day] += 1
            pending[day] += 1
        elif kind == "F":
            committed.update(pending)
            pending = Counter()
    return committed, counted


def outbox_reports(state_dir: Path) -> list[dict[str, Any]]:
    """Every report waiting in the child's outbox."""
    with sqlite3.connect(state_dir / "deniable-client.sqlite3") as connection:
        rows = connection.execute("SELECT reports FROM outbox ORDER BY seq").fetchall()
    return [json.loads(text) for (run,) in rows for text in split_reports(run)]


@pytest.mark.slow
def test_each_window_is_reported_once_with_its_durable_events_across_kill_9(
    tmp_path: Path,
) -> None:
    rng = random.Random(40)
    state_dir, journal = tmp_path / "state", tmp_path / "journal"
    start, killed_on, killed_at = START, [], []
    install = launch(state_dir, journal, START - 86400, "finish")  # windows start the next day
    assert install.wait(timeout=60) == 0
    for _ in range(KILLS):
        before = len(journal_lines(journal))
        child = launch(state_dir, journal, start, "run")
        deadline = time.monotonic() + 30
        while len(journal_lines(journal)) < before + 20:  # started and counting
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 0.35))
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
        last = int(next(line for line in reversed(journal_lines(journal)) if line[0] == "E")[2:])
        killed_on.append(last // 86400)
        killed_at.append(last)
        start = last  # the next life goes on from the clock's last reading
    # After the last kill the app starts again on the same day, as every life above did (a
    # day counts as active once a client commits on it: the kill may have come before the
    # first commit of that day), then on the next day, when that day's window is due.
    for moment in (start, (killed_on[-1] + 1) * 86400 + 60):
        finish = launch(state_dir, journal, moment, "finish")
        assert finish.wait(timeout=60) == 0

    committed, counted = bounds(journal_lines(journal))
    days = range(START // 86400, killed_on[-1] + 1)
    assert sorted(counted) == list(days)
    assert len(set(killed_on)) >= 5  # kills fall in several windows
    mid_window = sum(start // 86400 == (start + STEP) // 86400 for start in killed_at)
    assert mid_window >= 20  # the killed life's window went on in the next life
    reports = outbox_reports(state_dir)
    labels = Counter(report["period"] for report in reports)
    expected = [period_label("day", day_date(day)) for day in days]
    assert sorted(labels) == expected
    assert set(labels.values()) == {1}  # each window exactly once
    for report in reports:
        day = next(d for d in days if period_label("day", day_date(d)) == report["period"])
        assert committed[day] <= report["payload"] <= counted[day], (day, report)
    lost = sum(counted.values()) - sum(r["payload"] for r in reports)
    assert 0 <= lost <= sum(counted.values()) - sum(committed.values())
