"""The HTTP floor: a bare ASGI app on deniable's hardened uvicorn launch, answering every
request with the same bytes.

``bench.estimate_speed --route`` runs it beside the collector as the cost of an HTTP GET
through this server with no application work at all: what any route answered over uvicorn
pays before it reads a row.

    .venv/bin/python -m bench.bare_http PORT BODY_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from deniable.service.launch import run_server, server_config


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
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send(start)
        await send(message)

    return app


def main() -> None:
    """Serve the file's bytes on loopback at the given port until stopped."""
    port, body_file = int(sys.argv[1]), Path(sys.argv[2])
    config = server_config(
        fixed_answer(body_file.read_bytes()),
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
