"""The SDK over HTTPS: it delivers to a collector whose certificate it trusts and refuses,
without losing a report, one whose certificate it cannot verify."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from deniable.client import MetricSpec, transport
from testkit.stub_collector import fast_client, running

SPECS = [MetricSpec.boolean("dark_mode", epsilon=1.0)]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (made with the openssl command)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "1"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def server_tls(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return context


@pytest.fixture
def fresh_trust() -> Iterator[None]:
    """The shared client TLS context is built once per process: rebuild it around a test."""
    transport._tls_context.cache_clear()
    yield
    transport._tls_context.cache_clear()


def test_an_unverifiable_certificate_is_refused_and_the_reports_kept(
    server_tls: ssl.SSLContext, tmp_path: Path, fresh_trust: None
) -> None:
    with running(SPECS, tls=server_tls) as stub:
        client = fast_client(stub.url, tmp_path, metrics=SPECS)
        assert client.record("dark_mode", True)
        assert not client.flush(timeout=1.0)
        stats = client.stats
        client.close(timeout=0.1)
        assert stub.bodies == [], "nothing reached the server through an unverified connection"
    assert stats.delivered == 0 and stats.retries >= 1
    assert stats.queued == 1, "the report stays queued for a collector the client can trust"


def test_a_trusted_certificate_delivers(
    server_tls: ssl.SSLContext,
    certificate: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_trust: None,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with running(SPECS, tls=server_tls) as stub:
        with fast_client(stub.url, tmp_path, metrics=SPECS) as client:
            assert client.record("dark_mode", True)
            assert client.flush(timeout=5.0)
            assert client.stats.delivered == 1
        assert len(stub.stored) == 1
