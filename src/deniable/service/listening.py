"""Where a deniable server listens unless told otherwise, and the guard on anything else.

Both servers listen on loopback by default, log at uvicorn's levels and give in-flight requests
the same grace after SIGTERM. Standard library only, so the CLI shows these defaults in its help
without importing a server.
"""

from __future__ import annotations

import ipaddress
import socket

DEFAULT_HOST = "127.0.0.1"
"""Where a server listens unless told otherwise: loopback, reachable from this host only."""

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
"""uvicorn's log levels, quietest first."""

DEFAULT_LOG_LEVEL = "info"
"""The log level a server runs at unless told otherwise."""

DEFAULT_SHUTDOWN_TIMEOUT = 25
"""Seconds in-flight requests get after SIGTERM: inside Kubernetes' default 30 s grace period."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it), for a
    server started in the background such as the demo's collector."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
