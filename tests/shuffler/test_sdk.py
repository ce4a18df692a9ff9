"""``Client(shuffler=URL)``: reports go sealed to the shuffler (specs and keys from the
collector), and a key served under another key's id is refused: nothing is sent."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from deniable.client import Client, MetricSpec
from deniable.client.sealing import Header, decode_sealed, key_id, open_sealed, padded_size

SPEC = MetricSpec.categorical("browser", ["a", "b", "c"], epsilon=1.0)


class Servers:
    """The collector's key route and the shuffler's upload route, as functions."""

    def __init__(self, served_id: str | None = None) -> None:
        self.private = X25519PrivateKey.generate()
        public = self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.public = public
        self.served_id = served_id or key_id(public)
        self.uploads: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(f"{request.url.host}{request.url.path}")
        if request.url.path == "/v1/keys":
            entry = {"id": self.served_id, "public": base64.b64encode(self.public).decode()}
            return httpx.Response(200, json={"keys": [{**entry, "current": True}]})
        if request.url.path == "/v1/metrics":
            return httpx.Response(
                200,
                json={"metrics": [{**SPEC.fingerprint_fields(), "fingerprint": SPEC.fingerprint}]},
            )
        if request.url.path == "/v1/sealed":
            body = json.loads(request.content)
            self.uploads.append(body)
            return httpx.Response(202, json={"accepted": len(body["envelopes"]), "duplicates": 0})
        return httpx.Response(404, json={"detail": "not found"})


def client(tmp_path: Path, servers: Servers) -> Client:
    return Client(
        "http://collector.test",
        shuffler="http://shuffler.test",
        state_dir=tmp_path / "device",
        metrics=[SPEC],
        transport=httpx.MockTransport(servers),
        backoff_base=0.01,
        backoff_cap=0.02,
    )


def test_reports_go_sealed_to_the_shuffler_with_the_device_pseudonym(tmp_path: Path) -> None:
    servers = Servers()
    with client(tmp_path, servers) as device:
        assert device.record("browser", "b")
        assert device.flush(timeout=10)
    (upload,) = servers.uploads
    assert set(upload) == {"device", "envelopes"}
    (sealed,) = upload["envelopes"]
    header = Header(
        sealed["metric"],
        sealed["mechanism"],
        sealed["epsilon"],
        sealed["fingerprint"],
        sealed["key"],
    )
    report = json.loads(
        open_sealed(header, decode_sealed(sealed["sealed"]), servers.private, padded_size(SPEC))
    )
    assert report["metric"] == "browser" and report["fingerprint"] == SPEC.fingerprint
    assert sealed["id"] != report["id"]
    assert "collector.test/v1/reports" not in servers.paths
    assert "collector.test/v1/keys" in servers.paths


def test_a_key_served_under_another_id_is_refused_and_nothing_is_sent(tmp_path: Path) -> None:
    servers = Servers(served_id="0123456789abcdef")
    with client(tmp_path, servers) as device:
        assert device.record("browser", "b")
        assert not device.flush(timeout=1)
        assert any("sealing keys" in problem for problem in device.problems())
        assert device.stats.queued == 1
    assert servers.uploads == []
