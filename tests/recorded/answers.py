"""Asking the recorded reads of a running scenario and writing down what it answers: the
method, path and query, status, content type and exact body of each (no other header)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testkit import ADMIN_TOKEN, VIEWER_TOKEN, RunningCollector

from .reads import READS, Read

ANSWERS = Path(__file__).with_name("answers.json")
"""Where the recorded answers live."""

NON_DETERMINISTIC: dict[str, str] = {}
"""Fields of an answer that differ between two builds of the same state, each with why; they
alone would be normalized before comparing. None: the server clock is fixed (``TEST_NOW``),
report ids and draws are seeded, and headers other than content-type (date, ETag, server)
are not recorded at all. Two recordings were checked byte-identical before committing."""

TOKENS = {"viewer": VIEWER_TOKEN, "admin": ADMIN_TOKEN, "none": None}
"""The token each role asks with."""


def answer(server: RunningCollector, read: Read) -> dict[str, Any]:
    """The recorded form of ``server``'s answer to ``read``."""
    with server.client(TOKENS[read.role]) as client:
        response = client.request(read.method, read.path)
    return {
        "method": read.method,
        "path": read.path,
        "role": read.role,
        "status": response.status_code,
        "content_type": response.headers.get("content-type"),
        "body": response.content.decode("utf-8"),
    }


def answers(server: RunningCollector) -> list[dict[str, Any]]:
    """Every recorded read's answer, asked in order."""
    return [answer(server, read) for read in READS]


def dump(recorded: list[dict[str, Any]]) -> str:
    """The answers file's text: one JSON document, stable key order, ASCII only."""
    return json.dumps(recorded, indent=1, ensure_ascii=True) + "\n"


def load() -> list[dict[str, Any]]:
    """The recorded answers."""
    recorded: list[dict[str, Any]] = json.loads(ANSWERS.read_text(encoding="utf-8"))
    return recorded
