"""The collector as ``deniable serve`` in a child process, for tests that kill or signal it.

The child is configured the way a deployment configures it: every setting as a
``DENIABLE_*`` environment variable (the test runner's own ``DENIABLE_*`` variables are not
passed on), the address and worker count as ``serve``'s options. Its output goes to a log
file the tests read (``log_tail``).
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from deniable.client import MetricSpec
from deniable.collector import Settings
from deniable.collector.serve import settings_environment

from .configuration import collector_settings
from .metrics import register_all
from .ports import LOOPBACK
from .service_process import ServiceProcess, inherited_environment


def child_environment(settings: Settings, extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without its ``DENIABLE_*`` variables, plus ``settings``
    as ``DENIABLE_*`` variables and then ``extra`` (which wins)."""
    return {**inherited_environment(), **settings_environment(settings), **extra}


class CollectorProcess(ServiceProcess):
    """One ``deniable serve`` process on a free loopback port; start it again after a kill
    (on a new free port unless one is given)."""

    name = "collector"

    def __init__(
        self,
        settings: Settings,
        log_dir: Path,
        *,
        workers: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(log_dir)
        self.settings = settings
        self.workers = workers
        self.env = dict(env or {})

    def arguments(self) -> list[str]:
        """``serve`` on this port with this many workers."""
        options = ["--host", LOOPBACK, "--port", str(self.port), "--workers", str(self.workers)]
        return ["serve", *options, "--log-level", "info"]

    def environment(self) -> dict[str, str]:
        """The settings as ``DENIABLE_*`` variables, then ``env``."""
        return child_environment(self.settings, self.env)

    def accepts_connections(self) -> bool:
        """Whether a TCP connection to the port succeeds."""
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, self.port), 0.5):
            return True
        return False

    def shut_down_gracefully(self, timeout: float = 15.0) -> bool:
        """Wait for the exit that follows SIGTERM; whether uvicorn finished its shutdown.

        uvicorn re-raises the captured SIGTERM once its shutdown is complete, so the exit
        status is -SIGTERM (or 0); its log says the application shutdown completed.
        """
        code = self.process.wait(timeout)
        return code in (0, -signal.SIGTERM) and "Application shutdown complete" in self.log_tail()


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
