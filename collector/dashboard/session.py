"""The dashboard's sign-in session: a signed, expiring cookie that never holds the token.

The cookie's value is ``EXPIRY.MAC``: the expiry (Unix seconds) and an HMAC-SHA256 of it under
a key derived from the token that signed in and a random secret of this process (or of the
server, shared by its workers through :data:`SECRET_VARIABLE`). Each request checks the MAC
against the keys of the tokens accepted now, so rotating a token out also ends its sessions,
and a restart ends them all. The cookie is HttpOnly, SameSite=Strict, scoped to /dashboard,
and Secure over https.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time

COOKIE_NAME = "deniable_session"
"""The session cookie's name."""

SESSION_SECONDS = 12 * 3600
"""How long a sign-in lasts."""

SECRET_VARIABLE = "DENIABLE_SESSION_SECRET"
"""Environment variable through which ``serve`` gives its workers one session secret (hex), so a
cookie signed by one worker is valid on the others; absent, each process draws its own."""


def _process_secret() -> bytes:
    """The secret the session keys are derived from: the server's, else a random one."""
    shared = os.environ.get(SECRET_VARIABLE, "")
    try:
        if len(shared) >= 64:
            return bytes.fromhex(shared)
    except ValueError:
        pass
    return secrets.token_bytes(32)


_SECRET = _process_secret()


def _key(token: str) -> bytes:
    """The MAC key of sessions signed in with ``token``."""
    return hmac.new(_SECRET, b"deniable-dashboard\x00" + token.encode("utf-8"), "sha256").digest()


def _mac(token: str, expiry: int) -> str:
    """The MAC of a session expiring at ``expiry`` signed in with ``token``."""
    return hmac.new(_key(token), str(expiry).encode("ascii"), hashlib.sha256).hexdigest()


def issue(token: str, now: float | None = None) -> str:
    """A cookie value for a session signed in with ``token``, valid for :data:`SESSION_SECONDS`."""
    expiry = int(now if now is not None else time.time()) + SESSION_SECONDS
    return f"{expiry}.{_mac(token, expiry)}"


def valid(value: str | None, accepted: list[str], now: float | None = None) -> bool:
    """Whether the cookie ``value`` is an unexpired session of one of the ``accepted`` tokens."""
    if not value or value.count(".") != 1:
        return False
    expiry_text, mac = value.split(".")
    if not expiry_text.isdigit() or len(expiry_text) > 12:
        return False
    expiry = int(expiry_text)
    if expiry <= (now if now is not None else time.time()):
        return False
    matched = False
    for token in accepted:
        matched |= hmac.compare_digest(mac.encode("ascii", "replace"), _mac(token, expiry).encode())
    return matched


def cookie_header(value: str, *, secure: bool, max_age: int = SESSION_SECONDS) -> str:
    """The ``Set-Cookie`` header setting the session (``max_age`` 0 clears it)."""
    parts = [
        f"{COOKIE_NAME}={value}",
        "Path=/dashboard",
        f"Max-Age={max_age}",
        "HttpOnly",
        "SameSite=Strict",
    ]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)
