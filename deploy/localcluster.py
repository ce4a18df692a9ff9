"""Several collector processes on loopback sharing one fresh PostgreSQL database.

The scale-out tests and ``bench/scale.py`` both stand up this small cluster: a database made
for the run and dropped after, the schema migrated once, and N ``deniable serve`` processes
on free loopback ports, each its own OS process so they can be killed independently.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from psycopg import sql

ADMIN_DATABASE_URL = os.environ.get(
    "DENIABLE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
"""A database the cluster may connect to in order to create and drop its own."""

DENIABLE = (sys.executable, "-m", "deniable.cli.main")
"""The ``deniable`` command the container image runs, from this interpreter."""

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(name: str, admin_url: str = ADMIN_DATABASE_URL) -> str:
    """The URL of database ``name`` on the server of ``admin_url``."""
    return admin_url.rsplit("/", 1)[0] + "/" + name


@contextlib.contextmanager
def fresh_database(prefix: str = "deniable_cluster") -> Iterator[str]:
    """Create an empty database, yield its URL, and drop it (with its connections) after."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_DATABASE_URL, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield database_url(name)
    finally:
        with psycopg.connect(ADMIN_DATABASE_URL, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def run_migrations(url: str, processes: int) -> list[int]:
    """Run ``deniable migrate`` from ``processes`` processes at once; their exit codes."""
    env = {**os.environ, "DENIABLE_DATABASE_URL": url}
    runs = [
        subprocess.Popen(
            [*DENIABLE, "migrate"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(processes)
    ]
    codes = []
    for run in runs:
        _, err = run.communicate(timeout=60)
        if run.returncode != 0:
            sys.stderr.write(err.decode(errors="replace"))
        codes.append(run.returncode)
    return codes


@dataclass
class CollectorProcess:
    """One ``deniable serve`` process listening on a loopback port."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        """The collector's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until ``/healthz`` answers 200; raise with the log tail if it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"collector on port {self.port} did not start:\n{self.log_tail()}")

    def accepts_connections(self) -> bool:
        """Whether a TCP connection to the port succeeds."""
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
            return True
        return False

    def signal(self, signum: int) -> None:
        """Send ``signum`` (SIGTERM, SIGKILL) to the server process."""
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def shut_down_gracefully(self, timeout: float = 15.0) -> bool:
        """Wait for the exit that follows SIGTERM; whether uvicorn finished its shutdown.

        uvicorn re-raises the captured SIGTERM once its shutdown is complete, so the exit
        status is -SIGTERM (or 0); its log says the application shutdown completed.
        """
        code = self.process.wait(timeout)
        return code in (0, -signal.SIGTERM) and "Application shutdown complete" in self.log_tail()

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``; the exit code."""
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines the server wrote."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def start_collector(
    url: str,
    admin_token: str,
    log_dir: Path,
    extra_env: dict[str, str] | None = None,
    workers: int = 1,
) -> CollectorProcess:
    """Start ``deniable serve`` (``workers`` uvicorn workers) for ``url`` on a free port."""
    port = free_port()
    env = {
        **os.environ,
        "DENIABLE_DATABASE_URL": url,
        "DENIABLE_ADMIN_TOKEN": admin_token,
        "DENIABLE_MIGRATE_ON_START": "false",
        **(extra_env or {}),
    }
    options = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    log_path = log_dir / f"collector-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*DENIABLE, "serve", *options, "--log-level", "info"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return CollectorProcess(port, process, log_path)


@dataclass
class Cluster:
    """N collectors on one database; stops every process still running on exit."""

    database_url: str
    collectors: list[CollectorProcess] = field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        """Base URLs of every collector, in start order."""
        return [c.url for c in self.collectors]

    def stop(self) -> None:
        """Stop every collector (SIGTERM, then SIGKILL)."""
        for collector in self.collectors:
            collector.stop()


@contextlib.contextmanager
def cluster(
    url: str,
    replicas: int,
    admin_token: str,
    extra_env: dict[str, str] | None = None,
    workers: int = 1,
) -> Iterator[Cluster]:
    """Start ``replicas`` collectors (each with ``workers`` workers) on the migrated ``url``."""
    with tempfile.TemporaryDirectory(prefix="deniable-cluster-") as logs:
        running = Cluster(url)
        try:
            for _ in range(replicas):
                running.collectors.append(
                    start_collector(url, admin_token, Path(logs), extra_env, workers)
                )
            for collector in running.collectors:
                collector.wait_ready()
            yield running
        finally:
            running.stop()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def total_cpu(pids: Sequence[int]) -> dict[int, float]:
    """CPU seconds of each process in ``pids``."""
    return {pid: cpu_seconds(pid) for pid in pids}
