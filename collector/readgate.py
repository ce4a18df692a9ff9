"""At most a few heavy reads at once per process, so their bounded memory adds up to a bound.

Each estimate, series, privacy account, estimates scrape or dashboard page is bounded on its own (the cells
limits), but fifty at once are fifty times that: past the pod's memory. :class:`ReadGate` lets
``max_concurrent_reads`` of them run at a time; the others wait their turn, and one that waits
longer than ``read_queue_timeout`` seconds is answered 503 with ``Retry-After``. Uploads,
registration, health checks and the SDK's spec list never wait here.
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Receive, Scope, Send

HEAVY_API_ENDS = ("/estimate", "/series")
"""Ends of the API paths (``/v1/metrics/{name}/...``) that read stored counts and estimate."""
LIGHT_DASHBOARD_PATHS = frozenset(
    {"/dashboard/sign-in", "/dashboard/sign-out", "/dashboard/static/dashboard.css"}
)
"""Dashboard paths that read nothing stored."""


def is_heavy_read(method: str, path: str) -> bool:
    """Whether a request reads and estimates stored data (and so waits at the gate)."""
    if method not in ("GET", "HEAD"):
        return False
    if path.startswith("/v1/metrics/") and path.endswith(HEAVY_API_ENDS):
        return True
    if path in ("/v1/privacy", "/v1/estimates/metrics"):
        return True
    return path.startswith("/dashboard") and path not in LIGHT_DASHBOARD_PATHS


class ReadGate:
    """Admit ``limit`` heavy reads at once; answer 503 to one kept waiting over ``wait`` s."""

    def __init__(self, app: ASGIApp, *, limit: int, wait: float) -> None:
        self.app = app
        self.limit = limit
        self.wait = wait
        self._slots: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_heavy_read(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        try:
            await asyncio.wait_for(self._slots.acquire(), self.wait)
        except TimeoutError:
            await self._busy(send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self._slots.release()

    async def _busy(self, send: Send) -> None:
        """503: the reads now running are at the limit; the message names the setting."""
        detail = (
            f"the collector is answering its limit of {self.limit} reads at once"
            " (DENIABLE_MAX_CONCURRENT_READS); try again shortly"
        )
        body = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", b"1"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})
