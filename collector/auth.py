"""Bearer-token checks for admin calls and uploads, compared in constant time."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

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


def require(request: Request, accepted: list[str], role: str) -> None:
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
