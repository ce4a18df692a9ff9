"""docs/operations.md's "Try it locally" recipe for the archive (issue 41), run as written: its
collector in the background (its own terminal), then its commands in bash, with only the port
and the /tmp folder changed; the archive holds the simulated reports and the estimate read from
it alone is the collector's. Real processes, real HTTP."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from testkit import loopback_url, spare_port
from testkit.service_process import DENIABLE

ROOT = Path(__file__).resolve().parents[2]
OWN_TERMINAL = "# in a terminal of its own"
PORT, FOLDER = "8001", "/tmp/archive-demo"


def recipe() -> tuple[str, str]:
    """The recipe's two sh blocks: the collector's, then the commands'."""
    guide = (ROOT / "docs" / "operations.md").read_text()
    start = guide.index("#### Try it locally")
    section = guide[start : guide.index("\n### ", start)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2 and blocks[0].startswith(OWN_TERMINAL), blocks
    return blocks[0], blocks[1]


def bash(script: str, port: int, folder: Path) -> str:
    """``script`` with the recipe's port and folder replaced, ``deniable`` being this
    interpreter's CLI (and its sources)."""
    script = script.replace(PORT, str(port)).replace(FOLDER, str(folder))
    deniable = f"{shlex.quote(sys.executable)} -m deniable.cli.main"
    return f'set -euo pipefail\ndeniable() {{ {deniable} "$@"; }}\n{script}'


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}


@pytest.mark.slow
def test_the_archive_recipe_runs_as_written(tmp_path: Path) -> None:
    serve, commands = recipe()
    assert "simulate" in commands and "--date" in commands
    assert "DENIABLE_RETENTION_DAYS=1 deniable retention --archive-to" in commands
    port, folder = spare_port(), tmp_path / "archive-demo"
    collector = subprocess.Popen(
        ["bash", "-c", bash(serve, port, folder)],
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(loopback_url(port) + "/healthz", trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert collector.poll() is None and time.monotonic() < deadline, "no collector"
            time.sleep(0.1)
        run = subprocess.run(
            ["bash", "-c", bash(commands, port, folder)],
            env=environment(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        out = " ".join(run.stdout.split())
        live = subprocess.run(
            [*DENIABLE, "--collector", loopback_url(port), "estimate", "dark_mode", "--last", "3"],
            env=environment(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        if collector.poll() is None:  # Ctrl-C, as the recipe says: its whole process group
            os.killpg(collector.pid, signal.SIGINT)
        collector.wait(timeout=30)
    assert "registered dark_mode" in out
    assert "2,000 randomized report(s) of dark_mode delivered" in out
    assert (
        f"archived 2,000 raw report(s) of 1 (metric, period) to {folder}/archive and dropped"
        " 2,000 from the database" in out
    )
    assert list((folder / "archive").rglob("*.parquet")), "the archive holds Parquet files"
    estimated = run.stdout[run.stdout.index("dropped 2,000") :]
    archived = re.findall(r"│ (false|true)\s*│\s*([\d.]+)%", estimated)
    assert len(archived) == 2, run.stdout
    assert live.returncode == 0, live.stderr
    served = re.findall(r"│ (false|true)\s*│\s*([\d.]+)%", live.stdout)
    assert served == archived, (served, archived)
