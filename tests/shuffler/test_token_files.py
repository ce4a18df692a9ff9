"""The shuffler reads its token and upload key from files as the collector reads its tokens:
one reader (``deniable.service.tokens.read_token_file``), so a secret written on Windows or by
a tool that ends lines in ``\\r\\n`` works for both servers alike."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from deniable.collector.settings import Settings
from deniable.shuffler import ShufflerSettings, create_app
from testkit.key_server import KeyServer
from testkit.shuffler_process import SHUFFLER_TOKEN, SHUFFLER_UPLOAD_KEY

ENDINGS = ("", "\n", "\r\n")
"""How a mounted secret's file may end: nothing, a newline, a Windows line ending."""


def secret_file(directory: Path, name: str, secret: str, ending: str) -> Path:
    """A file holding ``secret`` followed by ``ending``, written byte for byte."""
    path = directory / name
    path.write_bytes((secret + ending).encode("utf-8"))
    return path


@pytest.mark.parametrize("ending", ENDINGS)
def test_the_shuffler_reads_a_token_file_ending_in_any_line_ending(
    tmp_path: Path, ending: str
) -> None:
    settings = ShufflerSettings(
        store=tmp_path / "s.db",
        token_file=secret_file(tmp_path, "token", SHUFFLER_TOKEN, ending),
        upload_key_file=secret_file(tmp_path, "upload", SHUFFLER_UPLOAD_KEY, ending),
    )
    assert settings.token_secret() == SHUFFLER_TOKEN
    assert settings.upload_keys() == [SHUFFLER_UPLOAD_KEY]


@pytest.mark.parametrize("ending", ENDINGS)
def test_both_servers_read_one_token_file_alike(tmp_path: Path, ending: str) -> None:
    """The collector's ``DENIABLE_SHUFFLER_TOKEN_FILE`` and the shuffler's
    ``DENIABLE_SHUFFLER_TOKEN_FILE`` may be the one mounted secret: they read one token."""
    path = secret_file(tmp_path, "shared", SHUFFLER_TOKEN, ending)
    collector = Settings(shuffler_token_file=path)
    shuffler = ShufflerSettings(store=tmp_path / "s.db", token_file=path)
    assert collector.shuffler_tokens() == [shuffler.token_secret()] == [SHUFFLER_TOKEN]


def test_an_upload_key_read_from_a_crlf_file_lets_a_device_upload(tmp_path: Path) -> None:
    """The key devices send is the key without its line ending (the ``\\r`` kept, the
    shuffler would have refused to start: a token holds no control character)."""
    collector = KeyServer([])
    envelope = {
        "id": secrets.token_hex(16),
        "metric": "browser",
        "mechanism": "krr",
        "epsilon": 1.0,
        "fingerprint": "0123456789abcdef",
        "sealed": base64.b64encode(secrets.token_bytes(240)).decode(),
    }
    with collector:
        settings = ShufflerSettings(
            store=tmp_path / "s.db",
            collector_url=collector.url,
            token=SHUFFLER_TOKEN,
            upload_key_file=secret_file(tmp_path, "upload", SHUFFLER_UPLOAD_KEY, "\r\n"),
        )
        body = {
            "device": secrets.token_hex(16),
            "envelopes": [envelope | {"key": collector.key_id}],
        }
        with TestClient(create_app(settings, release=False)) as client:
            accepted = client.post(
                "/v1/sealed", json=body, headers={"Authorization": f"Bearer {SHUFFLER_UPLOAD_KEY}"}
            )
            assert accepted.status_code == 202, accepted.text
