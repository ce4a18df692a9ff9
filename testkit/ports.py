"""Loopback ports and URLs for servers the tests and benches start (or leave down).

``DENIABLE_TEST_PORTS`` (``20000-20999``) confines every port testkit hands out, and every
server it starts, to that range, for a machine whose firewall opens only some ports; unset,
the OS picks any free port.
"""

from __future__ import annotations

import os
import random
import socket

from deniable.service.listening import DEFAULT_HOST

LOOPBACK = DEFAULT_HOST
"""The only address test servers listen on."""

PORTS_VARIABLE = "DENIABLE_TEST_PORTS"
"""The environment variable confining test ports to a range, ``LOW-HIGH`` (both included)."""

__all__ = [
    "LOOPBACK",
    "PORTS_VARIABLE",
    "bind_free",
    "free_port",
    "listen_port",
    "loopback_url",
    "port_range",
]

_RANDOM = random.Random()


def port_range() -> range | None:
    """The ports ``DENIABLE_TEST_PORTS`` allows, or None when it is unset (any port).

    Read at each call, so a test can set it; a malformed value raises ValueError naming it.
    """
    text = os.environ.get(PORTS_VARIABLE, "").strip()
    if not text:
        return None
    low, sep, high = text.partition("-")
    try:
        first, last = int(low), int(high if sep else low)
    except ValueError:
        raise ValueError(f"{PORTS_VARIABLE}={text!r} is not LOW-HIGH, e.g. 20000-20999") from None
    if not 1024 <= first <= last <= 65535:
        raise ValueError(f"{PORTS_VARIABLE}={text!r}: need 1024 <= LOW <= HIGH <= 65535")
    return range(first, last + 1)


def bind_free(sock: socket.socket, host: str = LOOPBACK) -> int:
    """Bind ``sock`` to a free port on ``host`` (in ``DENIABLE_TEST_PORTS``' range when set,
    tried from a random place in it, so parallel workers rarely collide); the port."""
    allowed = port_range()
    if allowed is None:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
    start = _RANDOM.randrange(len(allowed))
    for offset in range(len(allowed)):
        port = allowed[(start + offset) % len(allowed)]
        try:
            sock.bind((host, port))
        except OSError:
            continue
        return port
    raise OSError(f"no free port on {host} in {PORTS_VARIABLE}={allowed.start}-{allowed.stop - 1}")


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on right now, within
    ``DENIABLE_TEST_PORTS`` when it is set."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return bind_free(sock, host)


def listen_port() -> int:
    """The port to give a server that binds its own socket: 0 (the OS picks) when no range
    is set, else a free port of the range."""
    return 0 if port_range() is None else free_port()


def loopback_url(port: int) -> str:
    """The base URL of an HTTP server on loopback ``port``."""
    return f"http://{LOOPBACK}:{port}"
