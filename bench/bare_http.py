"""The HTTP floors: bare ASGI apps on deniable's hardened uvicorn launch.

``bench.estimate_speed --route`` runs one answering every request with the same bytes, beside
the collector, as the cost of an HTTP GET through this server with no application work at
all: what any route answered over uvicorn pays before it reads a row. ``bench.ingest
--versus`` runs one that reads each upload whole and decodes it with orjson (the collector's
decoder), then answers 202 with the count of its reports: what any upload route pays before it
checks or stores a report.

    .venv/bin/python -m bench.bare_http PORT BODY_FILE
    .venv/bin/python -m bench.bare_http PORT --decode
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from deniable.service.launch import run_server, server_config
from testkit.ports import LOOPBACK, spare_port


async def _lifespan(receive: Any, send: Any) -> None:
    """Answer the lifespan protocol until shutdown."""
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})


def fixed_answer(body: bytes) -> Any:
    """An ASGI app answering 200 with ``body`` as JSON to every HTTP request."""
    start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    message = {"type": "http.response.body", "body": body}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        await send(start)
        await send(message)

    return app


def decoded_upload() -> Any:
    """An ASGI app reading every request's body whole, decoding it with orjson and answering
    202 with ``{"accepted": <its reports>}``, as the collector answers an upload."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        answer = orjson.dumps({"accepted": len(orjson.loads(b"".join(chunks))["reports"])})
        await send(
            {
                "type": "http.response.start",
                "status": 202,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(answer)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer})

    return app


@dataclass(frozen=True)
class BareServer:
    """A running bare server: its port and process id."""

    port: int
    pid: int


@contextlib.contextmanager
def serving(what: str) -> Iterator[BareServer]:
    """This module run in a process of its own on a spare loopback port (``what``: a body
    file's path, or ``--decode``), once it accepts connections; stopped on exit."""
    port = spare_port()
    child = subprocess.Popen([sys.executable, "-m", "bench.bare_http", str(port), what])
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), 0.1):
                break
            time.sleep(0.05)
        yield BareServer(port, child.pid)
    finally:
        child.terminate()
        child.wait(10)


def main() -> None:
    """Serve the file's bytes (or, with ``--decode``, decode uploads) on loopback at the given
    port until stopped."""
    port, what = int(sys.argv[1]), sys.argv[2]
    app = decoded_upload() if what == "--decode" else fixed_answer(Path(what).read_bytes())
    config = server_config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        header_timeout=10.0,
        max_connections=100,
        shutdown_timeout=5,
    )
    run_server(config)


if __name__ == "__main__":
    main()
