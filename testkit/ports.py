"""Loopback ports and URLs for servers the tests and benches start (or leave down)."""

from __future__ import annotations

from deniable.service.listening import DEFAULT_HOST, free_port

LOOPBACK = DEFAULT_HOST
"""The only address test servers listen on."""

__all__ = ["LOOPBACK", "free_port", "loopback_url"]


def loopback_url(port: int) -> str:
    """The base URL of an HTTP server on loopback ``port``."""
    return f"http://{LOOPBACK}:{port}"
