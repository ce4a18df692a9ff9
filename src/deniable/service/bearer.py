"""Bearer tokens as both servers read and compare them: the ``Authorization: Bearer`` header's
token, checked against the accepted ones in constant time.

Which tokens a route accepts, and what a refusal says, is each server's own (the collector's
roles in ``deniable.collector.auth``, the shuffler's upload key in its app).
"""

from __future__ import annotations

import hmac

from starlette.requests import Request

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


def any_match(given: str | None, accepted: list[str]) -> bool:
    """Whether ``given`` equals one of ``accepted`` (each compared, in constant time)."""
    matched = False
    for secret in accepted:
        matched |= tokens_match(given, secret)
    return matched
