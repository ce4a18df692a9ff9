"""The shuffler's key set (``shuffler/keyset.py``): what it accepts from the collector, and
which key ids it takes uploads for, on a simulated clock."""

from __future__ import annotations

import base64
import json
import secrets

import pytest

from deniable.client.sealing import key_id
from deniable.shuffler.keyset import KeySet, KeysUnavailable, served_document


def entry(current: bool = False, raw: bytes | None = None) -> dict[str, object]:
    public = raw or secrets.token_bytes(32)
    return {"id": key_id(public), "public": base64.b64encode(public).decode(), "current": current}


def body(*entries: dict[str, object]) -> bytes:
    return json.dumps({"keys": list(entries)}).encode()


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        (b"<html>", 'not {"keys": [...]}'),
        (body(), "serves no key"),
        (body(entry(), entry()), "no key, or more than one, current"),
        (body(entry(True), entry(True)), "no key, or more than one, current"),
        (body({**entry(True), "id": "0123456789abcdef"}), "not the SHA-256 of its public key"),
    ],
)
def test_a_bad_key_document_from_the_collector_is_refused_naming_why(
    answer: bytes, named: str
) -> None:
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace("[", r"\[")):
        served_document(answer)


def test_every_device_gets_the_same_document_and_a_dropped_key_is_kept_for_keep_seconds() -> None:
    now = [0.0]
    keys = KeySet("http://127.0.0.1:9", refresh=60, keep=100, clock=lambda: now[0])
    with pytest.raises(KeysUnavailable):
        keys.document()
    first, second = entry(True), entry(True)
    keys.adopt(*served_document(body(first)))
    served = keys.document()
    assert json.loads(served) == {"keys": [first]} and keys.document() == served
    assert keys.refused([first["id"], second["id"]]) == [second["id"]]
    now[0] = 10.0
    keys.adopt(*served_document(body(second)))  # the collector dropped the first key
    assert keys.refused([first["id"], second["id"]]) == []
    now[0] = 110.0
    assert keys.refused([first["id"]]) == []
    now[0] = 110.5
    assert keys.refused([first["id"]]) == [first["id"]]
    keys.adopt(*served_document(body(second)))  # pruned at the next refresh too
    assert keys.refused([first["id"], second["id"]]) == [first["id"]]
