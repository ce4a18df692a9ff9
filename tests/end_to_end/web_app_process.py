"""``examples/web_app.py`` as a child process, for the tests that drive it like a user would."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from testkit import loopback_url, spare_port

WEB_APP = Path(__file__).resolve().parents[2] / "examples" / "web_app.py"
"""The example app these tests run."""


class WebApp:
    """The example web app on a free loopback port, its output kept in a log file."""

    def __init__(self, collector_url: str, state_dir: Path, *extra: str) -> None:
        self.port = spare_port()
        self.url = loopback_url(self.port)
        self.log_path = state_dir.with_suffix(".log")
        arguments = ["--collector", collector_url, "--state-dir", str(state_dir)]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(WEB_APP), *arguments, "--port", str(self.port), *extra],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_until(lambda: self._answers(), "the web app did not start")

    def _answers(self) -> bool:
        """Whether the app answers ``/telemetry``."""
        try:
            self.telemetry()
        except httpx.HTTPError:
            return False
        return True

    def visit(self, path: str) -> None:
        """One page view (one recorded value)."""
        httpx.get(self.url + path, timeout=5).raise_for_status()

    def telemetry(self) -> dict[str, Any]:
        """The app's ``/telemetry`` answer: the SDK's stats and problems."""
        answer: dict[str, Any] = httpx.get(self.url + "/telemetry", timeout=5).json()
        return answer

    def wait_until(self, condition: Callable[[], bool], why: str, timeout: float = 60.0) -> None:
        """Poll ``condition``; fail with ``why`` and the app's output if it never holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if condition():
                return
            time.sleep(0.1)
        raise AssertionError(f"{why}:\n{self.output()}")

    def close(self) -> str:
        """Interrupt the app (it closes its client) and return its output."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.output()

    def output(self) -> str:
        """What the app has written so far."""
        return self.log_path.read_text(errors="replace")


def metrics_file(path: Path, specs: list[dict[str, Any]]) -> Path:
    """Write specs in their JSON form for the app's ``--metrics``."""
    path.write_text(json.dumps(specs))
    return path
