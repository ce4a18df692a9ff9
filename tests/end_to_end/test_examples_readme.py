"""examples/README.md, run as a newcomer runs it (issue 25, item 9): every ``sh`` block, in
order, in bash from the repository root, with the virtualenv's ``deniable`` and ``python``.

A block that starts with ``# in a terminal of its own`` keeps running (the collector, the app):
it is started in the background and waited for; "Ctrl-C" is a SIGINT to it. Only the ports and
``/tmp`` paths differ from the page (free ports and the test's directory), so parallel runs do
not collide. A block's last command is polled until its output shows what the page says it
shows (generous deadlines: nothing here depends on how fast a loaded machine is).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from testkit import loopback_url, spare_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "examples" / "README.md"
LONG_RUNNING = "# in a terminal of its own"
"""How the page marks a command that keeps running until Ctrl-C."""
DEADLINE = 90.0
"""Seconds a server gets to start, or a polled command to show what the page says."""


class Newcomer:
    """Runs the page's commands with its own ports and directory, as one user at one desk."""

    def __init__(self, tmp_path: Path) -> None:
        self.collector_port, self.app_port = spare_port(), spare_port()
        self.tmp_path = tmp_path
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
        self.env = {
            **inherited,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{inherited.get('PATH', '')}",
            "DENIABLE_PORT": str(self.collector_port),
            "DENIABLE_COLLECTOR_URL": loopback_url(self.collector_port),
        }
        self.logs: list[Path] = []

    def localize(self, command: str) -> str:
        """The command with this run's ports and directory."""
        command = command.replace("127.0.0.1:8000", f"127.0.0.1:{self.collector_port}")
        command = command.replace("8080", str(self.app_port))
        return command.replace("/tmp/", f"{self.tmp_path}/")

    def run(self, command: str) -> str:
        """Run one command to its end; its output (it must succeed)."""
        done = subprocess.run(
            ["bash", "-c", self.localize(command)],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def run_until(self, block: str, shows: Callable[[str], bool]) -> str:
        """Run a block's commands; poll its last until its output ``shows`` what it should."""
        *first, last = commands(block)
        for command in first:
            self.run(command)
        deadline = time.monotonic() + DEADLINE
        output = self.run(last)
        while not shows(output) and time.monotonic() < deadline:
            time.sleep(0.2)
            output = self.run(last)
        assert shows(output), f"{last}\n{output}\n{self.server_logs()}"
        return output

    @contextlib.contextmanager
    def serving(self, block: str, ready_url: str) -> Iterator[subprocess.Popen[bytes]]:
        """Start a block that keeps running and wait until ``ready_url`` answers; Ctrl-C (a
        SIGINT to its process group) stops it at the end unless the test did already."""
        assert block.startswith(LONG_RUNNING), block
        (command,) = commands(block)
        log = self.tmp_path / f"server-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", self.localize(command)],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            deadline = time.monotonic() + DEADLINE
            while not answers(self.localize(ready_url)):
                assert process.poll() is None and time.monotonic() < deadline, self.server_logs()
                time.sleep(0.2)
            yield process
        finally:
            ctrl_c(process)

    def server_logs(self) -> str:
        """What the servers started so far have written."""
        return "\n".join(log.read_text(errors="replace") for log in self.logs if log.exists())


def sh_blocks(text: str) -> list[str]:
    """The page's ``sh`` code blocks, in order, without their indentation."""
    blocks = re.findall(r"^( *)```sh\n(.*?)^\1```", text, flags=re.S | re.M)
    return ["\n".join(ln[len(indent) :] for ln in body.splitlines()) for indent, body in blocks]


def commands(block: str) -> list[str]:
    """A block's commands: its lines that are not comments."""
    return [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def answers(url: str) -> bool:
    """Whether an HTTP server answers ``url``."""
    try:
        httpx.get(url, timeout=2.0)
    except httpx.HTTPError:
        return False
    return True


def ctrl_c(process: subprocess.Popen[bytes]) -> None:
    """Ctrl-C in the process's terminal: SIGINT to its process group, and wait for it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def telemetry(output: str) -> dict[str, Any]:
    """The app's ``/telemetry`` answer, from a block's last output."""
    document: dict[str, Any] = json.loads(output)
    return document


def test_every_command_of_the_examples_readme_works_as_written(tmp_path: Path) -> None:
    blocks = sh_blocks(README.read_text())
    assert len(blocks) == 7, blocks
    serve, create, app, visits, estimate, while_down, after = blocks
    me = Newcomer(tmp_path)
    healthz = "http://127.0.0.1:8000/healthz"
    with me.serving(serve, healthz) as collector:
        me.run(create)
        with me.serving(app, "http://127.0.0.1:8080/telemetry"):
            delivered = me.run_until(visits, lambda out: telemetry(out)["stats"]["delivered"] == 3)
            assert telemetry(delivered)["problems"] == []
            assert "3 reports" in me.run(estimate)
            ctrl_c(collector)
            down = me.run_until(
                while_down,
                lambda out: any("unreachable" in p for p in telemetry(out)["problems"]),
            )
            assert telemetry(down)["stats"]["queued"] == 1
            with me.serving(serve, healthz):
                back = me.run_until(after, lambda out: telemetry(out)["stats"]["delivered"] == 4)
                assert telemetry(back)["problems"] == []
