"""Loopback ports and URLs for servers the tests and benches start (or leave down).

``DENIABLE_TEST_PORTS`` (``20000-20999``) confines every port testkit hands out, and every
server it starts, to that range, for a machine whose firewall opens only some ports; unset,
the OS picks any free port.
"""

from __future__ import annotations

import os
import socket

from deniable.service.listening import DEFAULT_HOST, bind_free, free_port

LOOPBACK = DEFAULT_HOST
"""The only address test servers listen on."""

PORTS_VARIABLE = "DENIABLE_TEST_PORTS"
"""The environment variable confining test ports to a range, ``LOW-HIGH`` (both included)."""

__all__ = [
    "LOOPBACK",
    "PORTS_VARIABLE",
    "bind_spare",
    "listen_port",
    "loopback_url",
    "port_range",
    "spare_port",
]


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


def bind_spare(sock: socket.socket, host: str = LOOPBACK) -> int:
    """Bind ``sock`` to a free port on ``host``, within ``DENIABLE_TEST_PORTS`` when it is
    set (the service's :func:`~deniable.service.listening.bind_free`); the port."""
    return bind_free(sock, host, port_range())


def spare_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on right now, within
    ``DENIABLE_TEST_PORTS`` when it is set (the service's
    :func:`~deniable.service.listening.free_port`)."""
    return free_port(host, port_range())


def listen_port() -> int:
    """The port to give a server that binds its own socket: 0 (the OS picks) when no range
    is set, else a free port of the range."""
    return 0 if port_range() is None else spare_port()


def loopback_url(port: int) -> str:
    """The base URL of an HTTP server on loopback ``port``."""
    return f"http://{LOOPBACK}:{port}"
