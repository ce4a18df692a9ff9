"""The hardened uvicorn launch both servers run: one configuration, one way to run it.

Access logs stay off (they hold client addresses), proxy headers are ignored, no server header
is sent, and the protocol is :class:`~.protocol.HardenedProtocol` with the server's header
deadline and connection cap; after SIGTERM in-flight requests get ``shutdown_timeout`` seconds,
so a stuck one cannot outlast the orchestrator's grace.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import uvicorn
from uvicorn.main import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from .protocol import HardenedConfig, HardenedProtocol

log = logging.getLogger("deniable.service")

RESERVED_DESCRIPTORS = 256
"""File descriptors kept for everything but client connections: listening sockets, database
connections, SQLite and Prometheus files, logs."""

HARDENED: dict[str, Any] = {
    "ws": "none",
    "lifespan": "on",
    "access_log": False,
    "proxy_headers": False,
    "server_header": False,
}
"""The uvicorn settings every deniable server fixes whatever it serves (module docstring)."""


def server_config(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: str,
    header_timeout: float,
    max_connections: int,
    shutdown_timeout: int,
    workers: int = 1,
    date_header: bool = True,
) -> HardenedConfig:
    """The uvicorn configuration of a deniable server listening on ``host:port``.

    ``app`` is an app, or an import string of its factory (``"module:create_app"``) for
    several ``workers``. The connection limits are the server's settings; ``date_header``
    off sends no ``Date`` (the shuffler keeps no time)."""
    return HardenedConfig(
        app,
        **HARDENED,
        header_timeout=header_timeout,
        max_connections=max_connections,
        host=host,
        port=port,
        workers=workers,
        factory=isinstance(app, str),
        http=HardenedProtocol,
        date_header=date_header,
        log_level=log_level,
        timeout_graceful_shutdown=shutdown_timeout,
    )


def run_server(config: HardenedConfig) -> None:
    """Run uvicorn with ``config`` until stopped, as ``uvicorn.run`` does (several workers
    under its supervisor); exit with uvicorn's start-up failure status if the app did not
    start."""
    server = uvicorn.Server(config)
    try:
        if config.workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            server.run()
    except KeyboardInterrupt:
        pass
    if config.workers == 1 and not server.started:
        sys.exit(STARTUP_FAILURE)


def fit_file_limit(connections: int) -> int:
    """Raise this process's soft open-file limit to fit ``connections`` client connections;
    the number of connections that fit (fewer, with a warning, if the hard limit is lower)."""
    try:
        import resource
    except ImportError:
        return connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = connections + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return connections
    fitting = max(1, soft - RESERVED_DESCRIPTORS)
    log.warning(
        "the open-file limit (%d) fits %d connections, not DENIABLE_MAX_CONNECTIONS=%d:"
        " serving at most %d (raise `ulimit -n` to serve more)",
        soft,
        fitting,
        connections,
        fitting,
    )
    return fitting
