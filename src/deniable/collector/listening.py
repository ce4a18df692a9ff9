"""Where and how a collector listens unless told otherwise: address, port, worker processes
and log level.

``deniable serve``, ``python -m deniable.collector``, the CLI's default collector URL, the
container image and the manifests agree on these. The module needs only the standard library,
so the CLI can show the defaults in its help without importing the server.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
"""Where the collector listens unless told otherwise: loopback, reachable from this host only."""

DEFAULT_PORT = 8000
"""The TCP port a collector listens on unless told otherwise (CLI, image and manifests agree)."""

DEFAULT_WORKERS = 1
"""Worker processes unless told otherwise: one, serving the app in the server's own process."""

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
"""uvicorn's log levels, quietest first."""

DEFAULT_LOG_LEVEL = "info"
"""The log level the collector runs at unless told otherwise."""


@dataclass(frozen=True)
class Listening:
    """Where a collector listens (``host``, ``port``), with how many worker processes and at
    which log level; each field defaults to its constant above."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = DEFAULT_WORKERS
    log_level: str = DEFAULT_LOG_LEVEL


DEFAULT_LISTENING = Listening()
"""Every default at once: loopback, :data:`DEFAULT_PORT`, one worker, ``info``."""


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it), for a
    collector started in the background such as the demo's."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
