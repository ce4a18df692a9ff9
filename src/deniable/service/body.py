"""Reading a request body the way every route must: after the token check, within a byte
budget and a deadline, and treating a client that hangs up as the client's error.

Routes that take a body declare no body parameter (FastAPI would read and parse it before
any dependency ran, the token check included) and call :func:`read_body` instead.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import HTTPException, Request
from starlette.requests import ClientDisconnect

CLIENT_CLOSED_REQUEST = 499
"""The status recorded when the client hung up before sending its whole body (nginx's code):
a client error, never counted as a server fault; the client never receives it."""


class Refused(HTTPException):
    """A request refused as a whole, with the reason code telemetry counts it under."""

    def __init__(
        self, status: int, code: str, detail: Any, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(status_code=status, detail=detail, headers=headers)
        self.code = code


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body: 413 as soon as it exceeds ``limit`` bytes, 408 if it is not all in
    within ``timeout`` seconds, 499 if the client disconnects first."""
    too_large = Refused(413, "too_large", f"request body exceeds {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            raise Refused(400, "bad_length", "Content-Length is not a number")
        if int(declared) > limit:
            raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise too_large
                chunks.append(chunk)
    except TimeoutError:
        raise Refused(
            408,
            "body_timeout",
            f"request body not received within {timeout:g} s",
            headers={"Connection": "close"},
        ) from None
    except ClientDisconnect:
        raise Refused(
            CLIENT_CLOSED_REQUEST,
            "client_disconnected",
            "the client closed the connection before sending the whole body",
        ) from None
    return b"".join(chunks)


class _DuplicateKey(ValueError):
    """An object of a JSON body holds ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen.add(key)


def refuse_duplicate_keys(body: bytes) -> None:
    """422 naming the key if an object of the JSON ``body`` holds one key twice: parsers
    disagree on which value counts (ours keeps the last), so the body is ambiguous. A body
    that is not JSON passes: the schema's parser refuses it in its own words."""
    try:
        json.loads(body, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as exc:
        raise Refused(
            422, "duplicate_key", f"the JSON body repeats the key {exc.key[:64]!r} in one object"
        ) from None
    except (ValueError, RecursionError):
        return
