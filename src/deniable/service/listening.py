"""Where a deniable server listens unless told otherwise, and the guard on anything else.

Both servers listen on loopback by default, log at uvicorn's levels and give in-flight requests
the same grace after SIGTERM. Standard library only, so the CLI shows these defaults in its help
without importing a server.
"""

from __future__ import annotations

import ipaddress
import random
import socket

DEFAULT_HOST = "127.0.0.1"
"""Where a server listens unless told otherwise: loopback, reachable from this host only."""

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
"""uvicorn's log levels, quietest first."""

DEFAULT_LOG_LEVEL = "info"
"""The log level a server runs at unless told otherwise."""

DEFAULT_SHUTDOWN_TIMEOUT = 25
"""Seconds in-flight requests get after SIGTERM: inside Kubernetes' default 30 s grace period."""


_PLACES = random.Random()
"""Where :func:`bind_free` starts in a range of ports (not a secret)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_free(sock: socket.socket, host: str = DEFAULT_HOST, ports: range | None = None) -> int:
    """Bind ``sock`` to a port on ``host`` that nothing listens on: the OS's pick, or one of
    ``ports`` (tried from a random place in it, so parallel binders rarely collide, for a host
    whose firewall opens only some ports); the port."""
    if ports is None:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
    start = _PLACES.randrange(len(ports))
    for offset in range(len(ports)):
        port = ports[(start + offset) % len(ports)]
        try:
            sock.bind((host, port))
        except OSError:
            continue
        return port
    raise OSError(f"no free port on {host} in {ports.start}-{ports.stop - 1}")


def free_port(host: str = DEFAULT_HOST, ports: range | None = None) -> int:
    """A TCP port on ``host`` (one of ``ports`` when given) that nothing listens on right now,
    for a server started in the background such as the demo's collector."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return bind_free(sock, host, ports)
