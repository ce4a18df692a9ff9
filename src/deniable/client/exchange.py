"""One HTTP exchange with the collector, bounded as a whole in time and in answer size.

httpx's timeout bounds each read, not the exchange: a server that sends one byte a second
never trips it, in the headers or in the body. :func:`exchange` enforces a monotonic deadline
on connect, send, headers and body together: a watchdog shuts the connection's socket down
when the deadline passes (the blocked read then fails at once), and the body is streamed,
checking the deadline and the byte cap between chunks, so a huge answer is refused before it
is held in memory. Each exchange opens its own connection (the transport asks for
``Connection: close``, whatever httpx transport it is given), so the watchdog always knows the
socket: httpx's ``trace`` extension names it when it connects.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import DeniableError

if TYPE_CHECKING:
    import httpx


class AnswerTooLarge(DeniableError):
    """The answer's body exceeds the cap set for it; it was not read further."""


class DeadlineExceeded(DeniableError, TimeoutError):
    """The exchange did not complete before its deadline."""


@dataclass(frozen=True)
class Answer:
    """A complete answer: its status, headers and (capped) body."""

    status: int
    headers: httpx.Headers
    body: bytes

    @property
    def media_type(self) -> str:
        """The ``Content-Type`` without parameters, lowercased (``""`` if none)."""
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


class _Watchdog:
    """Shuts down the socket of one exchange when its deadline passes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = deadline = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._expired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()
        with self._lock:
            sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's ``trace`` extension: note the socket of the connection just opened (a
        duplicate descriptor, so shutting it down reaches the connection even after TLS)."""
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        watched = sock.dup()
        with self._lock:
            if not self._expired:
                self._socket, watched = watched, None
        if watched is not None:  # the deadline passed while connecting
            _shut(watched)
            watched.close()

    def _expire(self) -> None:
        """The deadline passed: make the blocked read or write fail now."""
        with self._lock:
            self._expired = True
            if self._socket is not None:
                _shut(self._socket)

    def check(self) -> None:
        """Raise :class:`DeadlineExceeded` if the deadline has passed."""
        if self._expired or time.monotonic() >= self.deadline:
            raise DeadlineExceeded(f"no complete answer within {self.seconds:.1f} s")


def _shut(sock: socket.socket) -> None:
    """Shut a socket down both ways (it may be closed already)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def exchange(
    http: httpx.Client,
    method: str,
    url: str,
    *,
    seconds: float,
    limit: int,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """Send one request and read its whole answer within ``seconds`` and ``limit`` body bytes.

    Raises :class:`DeadlineExceeded` past the deadline, :class:`AnswerTooLarge` past the cap
    (declared in ``Content-Length`` or counted while streaming), or an ``httpx.HTTPError``.
    """
    import httpx

    with _Watchdog(seconds) as watchdog:
        try:
            with http.stream(
                method,
                url,
                content=content,
                headers=headers,
                timeout=seconds,
                extensions={"trace": watchdog.trace},
            ) as response:
                declared = response.headers.get("content-length", "")
                if declared.isascii() and declared.isdigit() and int(declared) > limit:
                    raise AnswerTooLarge(
                        f"the answer declares {declared} bytes, over the cap of {limit:,} bytes"
                    )
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise AnswerTooLarge(f"the answer exceeds the cap of {limit:,} bytes")
                    chunks.append(chunk)
                    watchdog.check()
        except httpx.HTTPError:
            watchdog.check()  # a read the watchdog cut short is the deadline's doing
            raise
    return Answer(response.status_code, response.headers, b"".join(chunks))
