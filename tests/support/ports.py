"""Loopback ports and URLs for servers the tests and benches start (or leave down)."""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"
"""The only address test servers listen on."""


def free_port() -> int:
    """A loopback TCP port nothing listens on right now (for a server, or for one that is down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def loopback_url(port: int) -> str:
    """The base URL of an HTTP server on loopback ``port``."""
    return f"http://{LOOPBACK}:{port}"
