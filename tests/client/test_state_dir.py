"""One client per ``state_dir``: a second one (same process, another process) is refused, so two
clients can never each spend the same privacy budget or draw their own memoized answers."""

from __future__ import annotations

import asyncio
import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deniable.client import AsyncClient, Client, MetricSpec, StateDirInUseError
from testkit import spare_port
from testkit.folders import files_in
from testkit.stub_collector import fast_client

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the lock needs fcntl")

SPECS = [MetricSpec.boolean("dark_mode", epsilon=0.5)]
MOMENT = dt.datetime(2026, 11, 1, 12, tzinfo=dt.UTC)

HOLDER = """
import datetime as dt, sys, time
from deniable.client import Client, MetricSpec
client = Client(
    sys.argv[1],
    state_dir=sys.argv[2],
    metrics=[MetricSpec.boolean("dark_mode", epsilon=0.5)],
    clock=lambda: dt.datetime(2026, 11, 1, 12, tzinfo=dt.UTC),
)
assert client.record("dark_mode", True)
client.flush(timeout=0.05)  # commits the report and its budget count; the upload fails
print("ready", flush=True)
time.sleep(60)
"""


def dead_url() -> str:
    return f"http://127.0.0.1:{spare_port()}"


def make_client(state_dir: Path, **kwargs: Any) -> Client:
    options = {"metrics": SPECS, "clock": lambda: MOMENT, "memoize": True, **kwargs}
    return fast_client(dead_url(), state_dir, **options)


def test_a_second_client_in_the_process_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    first = make_client(tmp_path)
    assert first.record("dark_mode", True)
    assert first.flush(timeout=0.05) is False
    before = files_in(tmp_path)
    with pytest.raises(StateDirInUseError) as refused:
        make_client(tmp_path)
    assert str(refused.value) == f"state_dir {tmp_path} is in use by another client"
    assert isinstance(refused.value, RuntimeError)
    assert files_in(tmp_path) == before
    assert first.stats.queued == 1
    first.close(timeout=0.1)
    second = make_client(tmp_path)
    assert second.stats.queued == 1
    assert second.record("dark_mode", False) is False
    assert second.stats.over_budget == 1
    second.close(timeout=0.1)


def test_a_constructor_that_fails_frees_the_state_dir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="distinct"):
        make_client(tmp_path, metrics=SPECS * 2)
    make_client(tmp_path).close(timeout=0.1)


def test_an_async_client_holds_its_state_dir_too(tmp_path: Path) -> None:
    async def scenario() -> None:
        held = await AsyncClient.create(dead_url(), state_dir=tmp_path, metrics=SPECS)
        with pytest.raises(StateDirInUseError):
            await AsyncClient.create(dead_url(), state_dir=tmp_path, metrics=SPECS)
        with pytest.raises(StateDirInUseError):
            make_client(tmp_path)
        await held.aclose(timeout=0.1)

    asyncio.run(scenario())
    make_client(tmp_path).close(timeout=0.1)


def test_a_client_in_another_process_is_refused_and_kill_9_frees_the_dir_not_the_budget(
    tmp_path: Path,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, dead_url(), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StateDirInUseError, match="in use by another client"):
            make_client(tmp_path, memoize=False)
        holder.kill()
        holder.wait(timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
    client = make_client(tmp_path, memoize=False)
    assert client.stats.queued == 1
    assert client.record("dark_mode", False) is False
    assert client.stats.over_budget == 1
    assert client.privacy_spent()["dark_mode"].period_epsilon == 0.5
    client.close(timeout=0.1)
