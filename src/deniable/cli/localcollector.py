"""A throwaway collector in a child process on a free loopback port, for ``deniable demo``.

The child is ``python -m deniable.collector``, which serves through
:func:`deniable.collector.serve.serve` like every collector, on a temporary SQLite database with
a random admin token (and a viewer token when asked, for the dashboard); its settings reach it as the ``DENIABLE_*`` environment the collector's
``Settings`` reads (never as arguments, which any user of the host could see). It is stopped (and its files
removed) when the context ends. A child process, not a thread, so that the collector and the
simulated devices use separate cores and separate interpreters.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx

from deniable.client.errors import CollectorUnavailable
from deniable.collector.listening import DEFAULT_HOST, Listening
from deniable.collector.startup import port_problem
from deniable.service.listening import free_port

STARTUP_SECONDS = 20.0
"""How long the child may take to answer /healthz."""


class LocalCollector:
    """``with LocalCollector() as c:`` gives ``c.url`` and ``c.token`` of a running collector.

    Its database is a temporary SQLite file unless ``database_url`` names another; uploads
    need ``ingest_key`` (or the admin token) if one is given.
    """

    def __init__(
        self,
        database_url: str | None = None,
        ingest_key: str | None = None,
        viewer_token: str | None = None,
        port: int | None = None,
    ) -> None:
        """Prepare (not start) a collector on ``database_url`` or a temporary SQLite file, on
        ``port`` or (``None``) a free one."""
        self.token = secrets.token_urlsafe(24)
        self.ingest_key = ingest_key
        self.viewer_token = viewer_token
        self._tmp = tempfile.TemporaryDirectory(prefix="deniable-demo-")
        self.directory = Path(self._tmp.name)
        self.database_url = database_url or f"sqlite:///{self.directory / 'demo.db'}"
        self.port = 0
        self._fixed_port = port
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log = self.directory / "collector.log"

    def __enter__(self) -> LocalCollector:
        """Start the collector; stop it and clean up if it does not come up."""
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
        """Stop the collector and remove its files."""
        self.stop()

    def start(self) -> None:
        """Start the child and wait until it answers; on a free port taken meanwhile, try
        another (twice); a port that was asked for is tried once, after checking that it is
        free (a port in use fails at once, in one line naming it)."""
        if self._fixed_port:
            problem = port_problem(Listening(DEFAULT_HOST, self._fixed_port))
            if problem is not None:
                raise CollectorUnavailable(f"the demo collector cannot start: {problem}")
        for _ in range(1 if self._fixed_port else 3):
            self.port = self._fixed_port or free_port()
            self.url = f"http://{DEFAULT_HOST}:{self.port}"
            command = [
                sys.executable,
                "-m",
                "deniable.collector",
                "--host",
                DEFAULT_HOST,
                "--port",
                str(self.port),
            ]
            env = self._environment()
            with self._log.open("wb") as log:
                self._process = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
                )
            if self._wait_ready():
                return
            self.stop_process()
        where = f" on port {self.port}" if self._fixed_port else ""
        raise CollectorUnavailable(
            f"the demo collector did not start{where}: {self._last_log_line()}"
        )

    def _environment(self) -> dict[str, str]:
        """This process's environment without its ``DENIABLE_*`` variables (the demo must not
        pick up an operator's settings), plus the variables setting this collector's database,
        admin token and ingest key."""
        from .settings_options import environment_variable

        inherited = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
        values = {
            "database_url": self.database_url,
            "admin_token": self.token,
            "ingest_key": self.ingest_key,
            "viewer_token": self.viewer_token,
        }
        own = {environment_variable(k): v for k, v in values.items() if v is not None}
        return {**inherited, **own}

    def _wait_ready(self) -> bool:
        """Whether the child answers /healthz (and is ours) within ``STARTUP_SECONDS``."""
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

    def running(self) -> bool:
        """Whether the child is still up."""
        return self._process is not None and self._process.poll() is None

    def _last_log_line(self) -> str:
        """The child's last non-empty line of output, to say why it did not start."""
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
