"""Where and how a collector listens unless told otherwise: address, port, worker processes
and log level.

``deniable serve``, ``python -m deniable.collector``, the CLI's default collector URL, the
container image and the manifests agree on these. The address and log levels are every
server's (:mod:`deniable.service.listening`); the port and workers are the collector's. The
module needs only the standard library, so the CLI can show the defaults in its help without
importing the server.
"""

from __future__ import annotations

from dataclasses import dataclass

from deniable.service.listening import DEFAULT_HOST, DEFAULT_LOG_LEVEL

DEFAULT_PORT = 8000
"""The TCP port a collector listens on unless told otherwise (CLI, image and manifests agree)."""

DEFAULT_WORKERS = 1
"""Worker processes unless told otherwise: one, serving the app in the server's own process."""


@dataclass(frozen=True)
class Listening:
    """Where a collector listens (``host``, ``port``), with how many worker processes and at
    which log level; each field defaults to its constant above and is the keyword of the same
    name of :func:`deniable.service.launch.server_config`, which gets them all as they are."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = DEFAULT_WORKERS
    log_level: str = DEFAULT_LOG_LEVEL


DEFAULT_LISTENING = Listening()
"""Every default at once: loopback, :data:`DEFAULT_PORT`, one worker, ``info``."""
