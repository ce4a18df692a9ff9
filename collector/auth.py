"""Bearer-token checks for admin calls and uploads, compared in constant time.

Every protected route declares its role once, in its decorator: ``dependencies=[ADMIN]`` or
``dependencies=[INGEST]``. FastAPI solves dependencies before it validates query parameters,
and the routes that take a body read it themselves afterwards (``routes.body``), so a caller
without the token gets its 401 before anything it sent is read, parsed or echoed in a 422.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Literal

from fastapi import Depends, HTTPException, Request

from .context import collector

Role = Literal["admin", "ingest"]

_SCHEME = "bearer "


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    header = request.headers.get("authorization")
    if header is None or header[: len(_SCHEME)].lower() != _SCHEME:
        return None
    return header[len(_SCHEME) :].strip()


def tokens_match(given: str | None, expected: str) -> bool:
    """Whether ``given`` equals ``expected``, in time independent of where they differ."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def require(request: Request, accepted: list[str], role: Role) -> None:
    """Raise 401 unless the request's bearer token equals one of ``accepted``.

    An empty ``accepted`` means the role is open (no token configured for it).
    """
    if not accepted:
        return
    given = bearer_token(request)
    matched = False
    for secret in accepted:
        matched |= tokens_match(given, secret)
    if not matched:
        raise HTTPException(
            status_code=401,
            detail=f"{role} token missing or wrong: send 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )


def authorize(role: Role) -> Callable[[Request], Awaitable[None]]:
    """The dependency that lets a request through only with a token of ``role``.

    A refused upload is counted in ``deniable_batches_rejected{reason="unauthorized"}``.
    """

    async def check(request: Request) -> None:
        state = collector(request)
        settings = state.settings
        accepted = settings.admin_tokens() if role == "admin" else settings.ingest_tokens()
        try:
            require(request, accepted, role)
        except HTTPException:
            if role == "ingest":
                state.telemetry.batches_rejected.labels("unauthorized").inc()
            raise

    return check


ADMIN = Depends(authorize("admin"))
"""Declared by every admin route: registering metrics, estimates, series, export, retention."""
INGEST = Depends(authorize("ingest"))
"""Declared by the upload route: the ingest key (or an admin token) when one is configured."""
