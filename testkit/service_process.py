"""A deniable service (``deniable serve``, ``deniable shuffle``) in a child process on a loopback
port, for tests that kill or signal it: the launching, waiting, signalling and logging the
collector's and the shuffler's launchers share (``collector_process``, ``shuffler_process``).

A subclass names the service, gives its ``deniable`` command line and its environment; its
output goes to a log file per port (``log_tail``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from .ports import loopback_url, spare_port

DENIABLE = (sys.executable, "-m", "deniable.cli.main")
"""The ``deniable`` command the container image runs, from this interpreter."""

START_TIMEOUT = 60.0
"""Seconds a service process gets to answer ``/healthz``."""


def inherited_environment() -> dict[str, str]:
    """This process's environment without its ``DENIABLE_*`` variables (the test runner's own
    settings are not passed on to a child)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}


class ServiceProcess:
    """One service process on a loopback port; start it again after a kill.

    ``name`` names the service in logs and errors; ``append_log`` keeps one log across restarts
    on a port (else each launch writes its own); ``keep_port`` restarts on the last port when
    none is given (else on a new free one)."""

    name = "service"
    append_log = False
    keep_port = False

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.port = 0
        self.log_path = log_dir / f"{self.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    def arguments(self) -> list[str]:
        """The ``deniable`` command line after the interpreter (``serve --port ...``)."""
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        """The child's environment."""
        return inherited_environment()

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The running (or last) process."""
        assert self._process is not None, f"the {self.name} was never launched"
        return self._process

    @property
    def url(self) -> str:
        """The service's base URL."""
        return loopback_url(self.port)

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def launch(self, port: int | None = None) -> Self:
        """Start the process on ``port`` (else the last port or a new free one, as ``keep_port``
        says) without waiting for it to be ready."""
        self.port = port or (self.port if self.keep_port else 0) or spare_port()
        self.log_path = self.log_dir / f"{self.name}-{self.port}.log"
        with self.log_path.open("ab" if self.append_log else "wb") as log:
            self._process = subprocess.Popen(
                [*DENIABLE, *self.arguments()],
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Block until ``/healthz`` answers 200; raise with the log tail if it never does."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1.0, trust_env=False) as client:
            while time.monotonic() < deadline and self.process.poll() is None:
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.url + "/healthz").status_code == 200:
                        return
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} on port {self.port} did not start:\n{self.log_tail()}")

    def start(self, port: int | None = None) -> Self:
        """Launch (on ``port`` if given), and return once the service answers; stop it again if
        it never does."""
        self.launch(port)
        try:
            self.wait_ready()
        except RuntimeError:
            self.stop()
            raise
        return self

    def signal(self, signum: int) -> None:
        """Send ``signum`` (SIGTERM, SIGKILL) to the process if it still runs."""
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL it, as a crash would, and wait for it to be gone."""
        self.signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``; the exit code."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines it wrote."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        """Start it for the ``with`` block."""
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop it at the end of the ``with`` block."""
        self.stop()
