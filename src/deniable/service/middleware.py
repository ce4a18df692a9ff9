"""The base of the ASGI middleware that acts on HTTP requests only.

Every other scope (the lifespan, a websocket the server refuses anyway) passes through to the
wrapped app untouched, so a middleware states only what it does to a request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from starlette.types import ASGIApp, Receive, Scope, Send


class HttpMiddleware(ABC):
    """ASGI middleware around ``app`` whose :meth:`http` handles each HTTP request; any other
    scope goes to ``app`` as it came."""

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``, the rest of the stack."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An HTTP request to :meth:`http`; any other scope straight to ``app``."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    @abstractmethod
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request, calling ``self.app`` for the rest of the stack."""
