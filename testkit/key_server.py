"""A collector-shaped loopback server for the shuffler's key tests, honest or partitioning.

It serves ``GET /v1/metrics`` (the test's specs), ``GET /v1/keys`` and ``POST /v1/shuffled``
(recording every part, acknowledging it as the collector does). Honest, it serves one key to
everyone. Partitioning (``partition=True``) is the attack of issue 37: each ``GET /v1/keys``
gets a fresh X25519 key marked current, remembered with the number of the fetch, so the
server can later try every key it handed out on each shuffled report and say which fetch (which
device, were devices asking it) a report came from.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from deniable.client import MetricSpec
from deniable.client.sealing import (
    Header,
    SealingError,
    decode_sealed,
    key_id,
    open_sealed,
    padded_size,
)

from .ports import listen_port


def raw_public(private: X25519PrivateKey) -> bytes:
    """The raw 32 bytes of ``private``'s public key."""
    return private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


class KeyServer:
    """The server; ``handed_out`` lists every key it served, in order, and ``parts`` every
    shuffled part it received."""

    def __init__(self, metrics: Sequence[MetricSpec], *, partition: bool = False) -> None:
        self.specs = {spec.name: spec for spec in metrics}
        self.partition = partition
        self.handed_out: list[X25519PrivateKey] = [X25519PrivateKey.generate()]
        self.fetches = 0
        self.parts: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def key_id(self) -> str:
        """The id of the key served first (the only one when honest)."""
        return key_id(raw_public(self.handed_out[0]))

    def keys_document(self) -> dict[str, Any]:
        """What this fetch of ``GET /v1/keys`` is served."""
        with self._lock:
            self.fetches += 1
            if self.partition and self.fetches > 1:
                self.handed_out.append(X25519PrivateKey.generate())
            public = raw_public(self.handed_out[-1])
        entry = {"id": key_id(public), "public": base64.b64encode(public).decode()}
        return {"keys": [{**entry, "current": True}]}

    def open(self, envelope: dict[str, Any], part: dict[str, Any]) -> tuple[int, str] | None:
        """(index of the handed-out key that opens it, its report id), or None if none does."""
        spec = self.specs[part["metric"]]
        header = Header(
            part["metric"], part["mechanism"], part["epsilon"], part["fingerprint"], envelope["key"]
        )
        sealed = decode_sealed(envelope["sealed"])
        for index, private in enumerate(self.handed_out):
            try:
                text = open_sealed(header, sealed, private, padded_size(spec))
            except SealingError:
                continue
            return index, json.loads(text)["id"]
        return None

    def start(self) -> KeyServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._server = ThreadingHTTPServer(("127.0.0.1", listen_port()), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> KeyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    owner: KeyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read the server's attributes."""

    def _answer(self, status: int, document: Any) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/keys":
            self._answer(200, self.owner.keys_document())
        elif self.path == "/v1/metrics":
            specs = [spec.to_dict() for spec in self.owner.specs.values()]
            self._answer(200, {"metrics": specs})
        else:
            self._answer(404, {"detail": "not found"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v1/shuffled":
            self._answer(404, {"detail": "not found"})
            return
        part = json.loads(body)
        with self.owner._lock:
            self.owner.parts.append(part)
        self._answer(202, {"accepted": len(part["envelopes"]), "duplicates": 0, "refused": 0})
