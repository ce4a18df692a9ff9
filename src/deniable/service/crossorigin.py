"""Cross-origin access for the routes devices call from a web page, and for nothing else.

A browser page on another origin (the app's) may call a device route only if the server answers
its preflight and its request with CORS headers naming that origin. :class:`DeviceCORS` runs
Starlette's ``CORSMiddleware`` for the listed device paths and the configured origins only; every
other route (admin, reads, the dashboard) stays same-origin, and with no origin configured
nothing changes. No credentials (cookies) are allowed: devices send their key as a bearer header.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

DEVICE_HEADERS = ("Authorization", "Content-Type", "If-None-Match")
"""The request headers the SDKs send: the ingest or upload key, JSON, the specs' ETag."""
EXPOSED_HEADERS = ("ETag", "Retry-After")
"""The answer headers a page's SDK reads."""
PREFLIGHT_MAX_AGE = 600
"""Seconds a browser may reuse a preflight's answer."""


class DeviceCORS(CORSMiddleware):
    """ASGI middleware: CORS for ``paths`` from ``origins``; other paths pass through untouched.
    Its only reference to the app it wraps is ``app``, so a shallow copy with another ``app``
    (a thin path of the collector) answers CORS the same around that app."""

    def __init__(self, app: ASGIApp, origins: Sequence[str], paths: Collection[str]) -> None:
        super().__init__(
            app,
            allow_origins=list(origins),
            allow_methods=["GET", "POST"],
            allow_headers=list(DEVICE_HEADERS),
            expose_headers=list(EXPOSED_HEADERS),
            allow_credentials=False,
            max_age=PREFLIGHT_MAX_AGE,
        )
        self.paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.paths:
            await super().__call__(scope, receive, send)
        else:
            await self.app(scope, receive, send)
