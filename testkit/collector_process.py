"""The collector as ``deniable serve`` in a child process, for tests that kill or signal it.

The child is configured the way a deployment configures it: every setting as a
``DENIABLE_*`` environment variable (the test runner's own ``DENIABLE_*`` variables are not
passed on), the address and worker count as ``serve``'s options. Its output goes to a log
file the tests read (``log_tail``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx
from deniable.client import MetricSpec
from deniable.collector import Settings
from deniable.collector.serve import settings_environment

from .configuration import collector_settings
from .metrics import register_all
from .ports import LOOPBACK, free_port, loopback_url

DENIABLE = (sys.executable, "-m", "deniable.cli.main")
"""The ``deniable`` command the container image runs, from this interpreter."""

START_TIMEOUT = 60.0
"""Seconds a collector process gets to answer ``/healthz``."""


def child_environment(settings: Settings, extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without its ``DENIABLE_*`` variables, plus ``settings``
    as ``DENIABLE_*`` variables and then ``extra`` (which wins)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
    return {**inherited, **settings_environment(settings), **extra}


class CollectorProcess:
    """One ``deniable serve`` process on a free loopback port; start it again after a kill."""

    def __init__(
        self,
        settings: Settings,
        log_dir: Path,
        *,
        workers: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.workers = workers
        self.env = dict(env or {})
        self.port = 0
        self.log_path = log_dir / "collector.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The running (or last) server process."""
        assert self._process is not None, "the collector was never launched"
        return self._process

    @property
    def url(self) -> str:
        """The collector's base URL."""
        return loopback_url(self.port)

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def launch(self, port: int | None = None) -> CollectorProcess:
        """Start the process on ``port`` (a new free port if none) without waiting for it to
        be ready."""
        self.port = port or free_port()
        self.log_path = self.log_dir / f"collector-{self.port}.log"
        options = ["--host", LOOPBACK, "--port", str(self.port), "--workers", str(self.workers)]
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [*DENIABLE, "serve", *options, "--log-level", "info"],
                env=child_environment(self.settings, self.env),
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
        raise RuntimeError(f"collector on port {self.port} did not start:\n{self.log_tail()}")

    def start(self, port: int | None = None) -> CollectorProcess:
        """Launch (on ``port`` if given), and return once the collector answers; stop it again
        if it never does."""
        self.launch(port)
        try:
            self.wait_ready()
        except RuntimeError:
            self.stop()
            raise
        return self

    def accepts_connections(self) -> bool:
        """Whether a TCP connection to the port succeeds."""
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, self.port), 0.5):
            return True
        return False

    def signal(self, signum: int) -> None:
        """Send ``signum`` (SIGTERM, SIGKILL) to the server process if it still runs."""
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL the server, as a crash would, and wait for it to be gone."""
        self.signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def shut_down_gracefully(self, timeout: float = 15.0) -> bool:
        """Wait for the exit that follows SIGTERM; whether uvicorn finished its shutdown.

        uvicorn re-raises the captured SIGTERM once its shutdown is complete, so the exit
        status is -SIGTERM (or 0); its log says the application shutdown completed.
        """
        code = self.process.wait(timeout)
        return code in (0, -signal.SIGTERM) and "Application shutdown complete" in self.log_tail()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``; the exit code."""
        if self._process is None:
            return None
        self.signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines the server wrote."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> CollectorProcess:
        """Start the collector for the ``with`` block."""
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the collector at the end of the ``with`` block."""
        self.stop()


@contextlib.contextmanager
def real_collector(
    metrics: Sequence[MetricSpec], directory: Path, *, ingest_key: str | None = None
) -> Iterator[str]:
    """The real collector (``deniable serve`` on SQLite in ``directory``) with ``metrics``
    registered; yields its URL. Admin calls use ``ADMIN_TOKEN``; uploads need ``ingest_key``
    when one is given and nothing otherwise."""
    settings = collector_settings(f"sqlite:///{directory}/collector.db", ingest_key=ingest_key)
    with CollectorProcess(settings, directory) as server:
        register_all(server.url, metrics)
        yield server.url
