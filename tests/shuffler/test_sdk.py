"""``Client(shuffler=URL)``: reports go sealed to the shuffler with its upload key (specs from
the collector, keys from the shuffler only), a key served under another key's id is refused:
nothing is sent, and a 409 from the shuffler (a key it no longer takes) makes the device fetch
the shuffler's keys again and reseal."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from deniable.client import Client, MetricSpec
from deniable.client.sealing import Header, decode_sealed, key_id, open_sealed, padded_size

SPEC = MetricSpec.categorical("browser", ["a", "b", "c"], epsilon=1.0)
UPLOAD_KEY = "shuffler-upload-key-in-the-app-3b7e"


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
        self.authorizations: list[str | None] = []
        self.refuse_key: str | None = None
        """Answer 409 to envelopes sealed to this key id, as a shuffler that dropped it."""

    def rotate(self) -> None:
        """Serve a new key from now on."""
        self.private = X25519PrivateKey.generate()
        self.public = self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.served_id = key_id(self.public)

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
            self.authorizations.append(request.headers.get("authorization"))
            if any(e["key"] == self.refuse_key for e in body["envelopes"]):
                self.refuse_key = None
                self.rotate()
                return httpx.Response(409, json={"detail": "sealed to a key not served"})
            self.uploads.append(body)
            return httpx.Response(202, json={"accepted": len(body["envelopes"]), "duplicates": 0})
        return httpx.Response(404, json={"detail": "not found"})


def client(tmp_path: Path, servers: Servers) -> Client:
    return Client(
        "http://collector.test",
        shuffler="http://shuffler.test",
        shuffler_key=UPLOAD_KEY,
        ingest_key="ingest-key-for-the-collector-only",
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
    assert "collector.test/v1/keys" not in servers.paths  # keys come from the shuffler only
    assert "shuffler.test/v1/keys" in servers.paths
    assert servers.authorizations == [f"Bearer {UPLOAD_KEY}"]


def test_a_key_the_shuffler_refuses_is_fetched_again_and_the_report_resealed(
    tmp_path: Path,
) -> None:
    servers = Servers()
    servers.refuse_key = servers.served_id
    with client(tmp_path, servers) as device:
        assert device.record("browser", "b")
        assert device.flush(timeout=10)
        assert device.stats.delivered == 1
    (upload,) = servers.uploads
    assert upload["envelopes"][0]["key"] == servers.served_id
    assert servers.paths.count("shuffler.test/v1/keys") == 2


def test_a_key_served_under_another_id_is_refused_and_nothing_is_sent(tmp_path: Path) -> None:
    servers = Servers(served_id="0123456789abcdef")
    with client(tmp_path, servers) as device:
        assert device.record("browser", "b")
        assert not device.flush(timeout=1)
        # the refusal is a problem; on a loaded machine the last attempt of the flush may
        # instead be cut by its deadline, so wait for the background uploader's next one
        deadline = time.monotonic() + 30
        while not any("sealing keys" in problem for problem in device.problems()):
            assert time.monotonic() < deadline, device.problems()
            time.sleep(0.05)
        assert device.stats.queued == 1
    assert servers.uploads == []
