"""A throwaway collector in a child process on a free loopback port, for ``deniable demo``.

It runs ``deniable serve`` on a temporary SQLite database with a random admin token and is
stopped (and its files removed) when the context ends. A child process, not a thread, so that
the collector and the simulated devices use separate cores and separate interpreters.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx

from .errors import CliError

STARTUP_SECONDS = 20.0
"""How long the child may take to answer /healthz."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalCollector:
    """``with LocalCollector() as c:`` gives ``c.url`` and ``c.token`` of a running collector.

    Its database is a temporary SQLite file unless ``database_url`` names another; uploads
    need ``ingest_key`` (or the admin token) if one is given.
    """

    def __init__(self, database_url: str | None = None, ingest_key: str | None = None) -> None:
        self.token = secrets.token_urlsafe(24)
        self.ingest_key = ingest_key
        self._tmp = tempfile.TemporaryDirectory(prefix="deniable-demo-")
        self.directory = Path(self._tmp.name)
        self.database_url = database_url or f"sqlite:///{self.directory / 'demo.db'}"
        self.port = 0
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log = self.directory / "collector.log"

    def __enter__(self) -> LocalCollector:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the child and wait until it answers; retry once on a port taken meanwhile."""
        for _ in range(3):
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            env = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
            command = [
                sys.executable,
                "-m",
                "deniable.cli.main",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--database",
                self.database_url,
                "--admin-token",
                self.token,
                "--log-level",
                "warning",
                *(("--ingest-key", self.ingest_key) if self.ingest_key else ()),
            ]
            with self._log.open("wb") as log:
                self._process = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
                )
            if self._wait_ready():
                return
            self.stop_process()
        raise CliError(f"the demo collector did not start: {self._last_log_line()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + STARTUP_SECONDS
        with httpx.Client(timeout=1.0, trust_env=False) as http:
            while time.monotonic() < deadline:
                if self._process is not None and self._process.poll() is not None:
                    return False
                try:
                    if http.get(f"{self.url}/healthz").status_code == 200:
                        return self._is_ours(http)
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        return False

    def _is_ours(self, http: httpx.Client) -> bool:
        """Whether the server on the port is our child: it accepts our token (another would not)."""
        if self._process is None or self._process.poll() is not None:
            return False
        probe = http.get(
            f"{self.url}/v1/metrics/no-such-metric/estimate",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        return probe.status_code == 404

    def _last_log_line(self) -> str:
        try:
            lines = [ln for ln in self._log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    def stop_process(self) -> None:
        """Terminate the child (then kill it if it lingers)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def stop(self) -> None:
        """Stop the child and remove the temporary database."""
        self.stop_process()
        self._tmp.cleanup()
