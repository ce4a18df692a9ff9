"""The HTTP/1.1 protocol both servers meet hostile clients with, and the configuration it reads.

A connection must send each request's headers within a deadline and in at most
``MAX_HEADER_BYTES``, and past a cap of open connections a new one gets 503 and is closed at
once, so stalled sockets neither pile up file descriptors nor starve well-formed requests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

log = logging.getLogger("deniable.service")

MAX_HEADER_BYTES = 64 * 1024
"""The most bytes a request's line and headers may hold (tokens and the SDK's headers need
well under 2 KiB); past it, 431 and the connection is closed. httptools itself would buffer
a header line without end, and accept any size that arrives in one read."""


class HeadersTooLarge(Exception):
    """Raised inside the parser's callbacks once a request's headers pass ``MAX_HEADER_BYTES``:
    it stops the parse before the app is called, and the protocol answers 431."""


CAP_WARNING_INTERVAL = 60.0
"""Seconds between two warnings that the connection cap is reached (one line, no address)."""


class HardenedConfig(uvicorn.Config):
    """uvicorn's configuration plus the two limits :class:`HardenedProtocol` enforces."""

    def __init__(self, app: Any, *, header_timeout: float, max_connections: int, **options: Any):
        super().__init__(app, **options)
        self.header_timeout = header_timeout
        self.max_connections = max_connections


def _canned_response(status: int, phrase: str, message: str) -> bytes:
    """A complete HTTP/1.1 answer that closes the connection, for refusals outside the app
    (the API's problem shape, ``{"detail": ...}``)."""
    body = json.dumps({"detail": message}).encode("ascii")
    return (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode("ascii") + body


OVER_CAPACITY = _canned_response(
    503, "Service Unavailable", "too many open connections: retry later"
)
HEADERS_TOO_LARGE = _canned_response(
    431, "Request Header Fields Too Large", f"request headers exceed {MAX_HEADER_BYTES} bytes"
)


class HardenedProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools) with a header deadline, a header size limit
    and a cap on open connections.

    Each request's headers must be complete within ``header_timeout`` seconds of the
    connection opening or of the previous response, else the connection is closed (uvicorn
    only times out idle keep-alive connections, never one that stalls mid-request). A
    connection opened past ``max_connections`` is answered 503 and closed at once, so it holds
    no file descriptor; the connections already open are served as before.
    """

    warned_at: ClassVar[float] = float("-inf")

    def __init__(
        self,
        config: HardenedConfig,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.header_timeout = config.header_timeout
        self.max_connections = config.max_connections
        self.header_deadline: asyncio.TimerHandle | None = None
        self.reading_headers = False
        self.header_bytes = 0
        self.message_began = False
        self.parsed_header_bytes = 0
        self.headers_too_large = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Refuse the connection past the cap; otherwise start the clock for its headers."""
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self._warn_at_cap()
            self._refuse(OVER_CAPACITY)
            return
        self._start_header_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the header clock of a closed connection."""
        self._stop_header_clock()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse ``data``; refuse a request whose headers go on past ``MAX_HEADER_BYTES``."""
        self.message_began = False
        super().data_received(data)
        if not self.reading_headers or self.message_began or self.transport.is_closing():
            return
        self.header_bytes += len(data)
        if self.header_bytes > MAX_HEADER_BYTES:
            self._refuse(HEADERS_TOO_LARGE)

    def on_message_begin(self) -> None:
        """A request line begins: count its header bytes from the next read on, and the
        parsed ones from now."""
        super().on_message_begin()
        self.reading_headers = True
        self.message_began = True
        self.header_bytes = 0
        self.parsed_header_bytes = 0

    def on_url(self, url: bytes) -> None:
        """Count the target's bytes toward the header limit (it may come in pieces)."""
        self._count_parsed(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count a header line (name, value, ``: `` and CRLF) toward the header limit, so
        headers that arrive in one read are held to it too."""
        self._count_parsed(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count_parsed(self, size: int) -> None:
        """Add ``size`` parsed bytes; stop the parse past ``MAX_HEADER_BYTES``."""
        self.parsed_header_bytes += size
        if self.parsed_header_bytes > MAX_HEADER_BYTES:
            self.headers_too_large = True
            raise HeadersTooLarge

    def send_400_response(self, msg: str) -> None:
        """Answer a parse error 400, or 431 when the parse stopped at the header limit."""
        if self.headers_too_large:
            self._refuse(HEADERS_TOO_LARGE)
            return
        super().send_400_response(msg)

    def on_headers_complete(self) -> None:
        """The headers are in: the deadline is met; the app now reads the body on its own."""
        self.reading_headers = False
        self._stop_header_clock()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """After a response, the next request's headers are due within ``header_timeout``."""
        super().on_response_complete()
        idle = self.cycle is None or self.cycle.response_complete
        if idle and not self.transport.is_closing():
            self._start_header_clock()

    def _start_header_clock(self) -> None:
        """Give the connection ``header_timeout`` seconds, from now, to complete its headers."""
        self._stop_header_clock()
        self.header_deadline = self.loop.call_later(self.header_timeout, self._headers_overdue)

    def _stop_header_clock(self) -> None:
        """Cancel the header deadline, if one is running."""
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _headers_overdue(self) -> None:
        """Close a connection whose request headers did not arrive in time."""
        self.header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def _refuse(self, answer: bytes) -> None:
        """Send a canned answer and close the connection."""
        self._stop_header_clock()
        self.transport.write(answer)
        self.transport.close()

    @classmethod
    def _warn_at_cap(cls) -> None:
        """Warn that connections are being refused, at most once per ``CAP_WARNING_INTERVAL``."""
        now = time.monotonic()
        if now - cls.warned_at >= CAP_WARNING_INTERVAL:
            cls.warned_at = now
            log.warning(
                "connection cap reached: new connections get 503 (DENIABLE_MAX_CONNECTIONS)"
            )
