"""A loopback HTTP server that answers badly on purpose, at the socket level (client tests).

Each path gets a script: the whole answer at once (:func:`whole`), one byte a second
(:func:`trickled`, from the status line or after the headers), or a body without end
(:func:`endless`). Unknown paths get a 404. It reads each request whole (headers and a
``Content-Length`` body), so the client has sent everything when the answer starts.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any

from .ports import listen_port

Script = Callable[[socket.socket, threading.Event, Callable[[int], None]], None]
"""Writes an answer to a connection until done, the client leaves (``OSError``) or the server
stops, telling the third argument each number of bytes it sent."""


def head(status: int, headers: dict[str, str]) -> bytes:
    """A status line and headers, ending with the blank line."""
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def json_answer(status: int, document: Any, media: str = "application/json") -> bytes:
    """A complete JSON answer (``media`` its ``Content-Type``)."""
    body = json.dumps(document).encode()
    headers = {"Content-Type": media, "Content-Length": str(len(body))}
    return head(status, headers) + body


def whole(data: bytes) -> Script:
    """Send ``data`` at once, then keep the connection open until the client closes it."""

    def play(conn: socket.socket, stop: threading.Event, sent: Callable[[int], None]) -> None:
        conn.sendall(data)
        sent(len(data))
        conn.settimeout(0.2)
        while not stop.is_set():
            try:
                if not conn.recv(4096):
                    break
            except TimeoutError:
                continue

    return play


def trickled(data: bytes, at_once: int = 0, interval: float = 1.0) -> Script:
    """Send the first ``at_once`` bytes of ``data`` at once, then one byte each ``interval``
    seconds (each read the client makes returns a byte in time, so no per-read timeout trips)."""

    def play(conn: socket.socket, stop: threading.Event, sent: Callable[[int], None]) -> None:
        conn.sendall(data[:at_once])
        sent(at_once)
        for i in range(at_once, len(data)):
            if stop.wait(interval):
                return
            conn.sendall(data[i : i + 1])
            sent(1)

    return play


def endless(headers: bytes, chunk: int = 64 * 1024) -> Script:
    """Send ``headers``, then a body of spaces that never ends (no ``Content-Length``)."""

    def play(conn: socket.socket, stop: threading.Event, sent: Callable[[int], None]) -> None:
        conn.sendall(headers)
        sent(len(headers))
        block = b" " * chunk
        while not stop.is_set():
            conn.sendall(block)
            sent(chunk)

    return play


class HostileServer:
    """Serves ``scripts`` by path on loopback; ``requests`` holds the path of each request
    read, and ``sent`` the bytes each answer sent, appended when its connection ends."""

    def __init__(self, scripts: dict[str, Script]) -> None:
        self.scripts = scripts
        self.sent: list[int] = []
        self.requests: list[str] = []
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", listen_port()))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        total = [0]

        def sent(n: int) -> None:
            total[0] += n

        with conn:
            try:
                path = _read_request(conn)
                self.requests.append(path)
                script = self.scripts.get(path, whole(json_answer(404, {"detail": "not found"})))
                script(conn, self._stop, sent)
            except OSError:
                pass  # the client left: what a hostile server expects
        self.sent.append(total[0])

    def stop(self) -> None:
        """Stop accepting and end every answer under way."""
        self._stop.set()
        self._listener.close()


def _read_request(conn: socket.socket) -> str:
    """Read one request whole; its path."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            raise ConnectionError("the client left before its headers")
        data += more
    headers, _, body = data.partition(b"\r\n\r\n")
    lines = headers.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        more = conn.recv(65536)
        if not more:
            raise ConnectionError("the client left before its body")
        body += more
    return lines[0].split(" ")[1]


@contextmanager
def hostile(scripts: dict[str, Script]) -> Iterator[HostileServer]:
    """A started :class:`HostileServer`, stopped afterwards."""
    server = HostileServer(scripts)
    try:
        yield server
    finally:
        server.stop()
