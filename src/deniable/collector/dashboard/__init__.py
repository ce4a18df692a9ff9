"""The dashboard the collector serves at ``/dashboard/``: every metric, its trend and its
uncertainty, drawn on the server as SVG (no script, no third-party request, works offline).

``routes`` (the pages, sign-in, CSVs), ``session`` (the signed cookie), ``data`` (the API's
documents for a page), ``charts`` (SVG), ``pages`` (HTML), ``style`` (the stylesheet).
:class:`DashboardHeaders` gives every dashboard response its strict headers.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .routes import router

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""The dashboard's CSP: its own stylesheet, no inline style or script, no other origin."""

HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)
"""Headers added to every response under ``/dashboard``."""


class DashboardHeaders:
    """Add :data:`HEADERS` to every response whose path is under ``/dashboard`` (pages,
    redirects, errors and the stylesheet alike)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/dashboard" or path.startswith("/dashboard/")):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in HEADERS if n not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)


__all__ = ["CONTENT_SECURITY_POLICY", "DashboardHeaders", "router"]
