"""Redirects that never name a host: a ``Location`` is a path on the server that answered.

Starlette builds the redirect of a path with a trailing slash (``/dashboard/plan/`` to
``/dashboard/plan``) as an absolute URL from the request's ``Host`` header, which the client
chooses: a forged ``Host`` would send the browser, or a cache keyed on the path, to another
site. :class:`RelativeRedirects` cuts every absolute ``Location`` back to its path and query,
so no answer of the collector points off the server that sent it.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from starlette.types import Message, Receive, Scope, Send

from deniable.service.middleware import HttpMiddleware


def relative(location: str) -> str:
    """``location``'s path, query and fragment, without scheme and host (``/`` if empty)."""
    parts = urlsplit(location)
    if not parts.scheme and not parts.netloc:
        return location
    path = "/" + parts.path.lstrip("/\\")
    return urlunsplit(("", "", path, parts.query, parts.fragment))


class RelativeRedirects(HttpMiddleware):
    """Rewrite an absolute ``Location`` header of any response to a path on this server."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, its answer's ``Location`` cut to a path."""

        async def send_relative(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    (name, relative(value.decode("latin-1")).encode("latin-1"))
                    if name.lower() == b"location"
                    else (name, value)
                    for name, value in message.get("headers", [])
                ]
            await send(message)

        await self.app(scope, receive, send_relative)
