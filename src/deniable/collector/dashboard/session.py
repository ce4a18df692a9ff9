"""The dashboard's sign-in session: a signed, expiring cookie that never holds the token.

The cookie's value is ``ID.EXPIRY.MAC``: a random session id, the expiry (Unix seconds) and an
HMAC-SHA256 of both under a key derived from the token that signed in and a random secret of
this process (or of the server, shared by its workers through :data:`SECRET_VARIABLE`). Each
request checks the MAC against the keys of the tokens accepted now, so rotating a token out
also ends its sessions, and a restart ends them all. Signing out revokes the session on the
server (:class:`Revocations`), so a copy of the cookie replayed afterwards is refused. The
value is parsed strictly (ASCII hex and digits): anything else is no session. The cookie is
HttpOnly, SameSite=Strict, scoped to /dashboard, and Secure over https.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import os
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path

COOKIE_NAME = "deniable_session"
"""The session cookie's name."""

SESSION_SECONDS = 12 * 3600
"""How long a sign-in lasts."""

SECRET_VARIABLE = "DENIABLE_SESSION_SECRET"
"""Environment variable through which ``serve`` gives its workers one session secret (hex), so a
cookie signed by one worker is valid on the others; absent, each process draws its own."""

REVOCATIONS_VARIABLE = "DENIABLE_SESSION_REVOCATIONS"
"""Environment variable naming the directory where ``serve``'s workers record signed-out
sessions, so a sign-out on one worker holds on the others; absent, each process keeps its own
(a private temporary directory). Revocations live as long as the session secret they go with."""

_COOKIE = re.compile(r"([0-9a-f]{32})\.([0-9]{1,12})\.([0-9a-f]{64})")
"""A session cookie's value: id, expiry and MAC, ASCII only (``re``'s ``[0-9]`` is ASCII)."""


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


def _mac(token: str, session_id: str, expiry: int) -> str:
    """The MAC of session ``session_id`` expiring at ``expiry`` signed in with ``token``."""
    message = f"{session_id}.{expiry}".encode("ascii")
    return hmac.new(_key(token), message, hashlib.sha256).hexdigest()


def issue(token: str, now: float | None = None) -> str:
    """A cookie value for a new session signed in with ``token``, valid for
    :data:`SESSION_SECONDS`."""
    expiry = int(now if now is not None else time.time()) + SESSION_SECONDS
    session_id = secrets.token_hex(16)
    return f"{session_id}.{expiry}.{_mac(token, session_id, expiry)}"


def _signed(value: str | None, accepted: list[str], now: float | None) -> tuple[str, int] | None:
    """The id and expiry of the cookie ``value`` if it is well formed, unexpired and signed
    with one of the ``accepted`` tokens (revoked or not); None otherwise."""
    parsed = _COOKIE.fullmatch(value) if value else None
    if parsed is None:
        return None
    session_id, expiry_text, mac = parsed.groups()
    expiry = int(expiry_text)
    if expiry <= (now if now is not None else time.time()):
        return None
    matched = False
    for token in accepted:
        matched |= hmac.compare_digest(
            mac.encode("ascii"), _mac(token, session_id, expiry).encode()
        )
    return (session_id, expiry) if matched else None


def valid(value: str | None, accepted: list[str], now: float | None = None) -> bool:
    """Whether the cookie ``value`` is an unexpired, unrevoked session of one of the
    ``accepted`` tokens."""
    signed = _signed(value, accepted, now)
    return signed is not None and not REVOCATIONS.revoked(*signed)


def revoke(value: str | None, accepted: list[str], now: float | None = None) -> None:
    """End the session of the cookie ``value`` on the server, if it is one (sign-out)."""
    signed = _signed(value, accepted, now)
    if signed is not None:
        REVOCATIONS.revoke(*signed, now=now)


class Revocations:
    """Signed-out sessions, each an empty file ``EXPIRY-ID`` in a directory, kept until the
    session would have expired. A file per session needs no lock between worker processes,
    and a check is one ``stat``."""

    def __init__(self, directory: str | None = None) -> None:
        self._given = directory
        self._made: Path | None = None

    @property
    def directory(self) -> Path:
        """The directory of revocations: the server's, else one made for this process."""
        if self._given:
            return Path(self._given)
        if self._made is None:
            self._made = Path(tempfile.mkdtemp(prefix="deniable-sessions-"))
            atexit.register(shutil.rmtree, self._made, True)
        return self._made

    def revoked(self, session_id: str, expiry: int) -> bool:
        """Whether the session was signed out."""
        return (self.directory / f"{expiry}-{session_id}").exists()

    def revoke(self, session_id: str, expiry: int, now: float | None = None) -> None:
        """Record the session as signed out, and forget sessions that have expired since."""
        directory = self.directory
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        (directory / f"{expiry}-{session_id}").touch()
        moment = now if now is not None else time.time()
        for path in directory.iterdir():
            expiry_text = path.name.split("-", 1)[0]
            if expiry_text.isascii() and expiry_text.isdigit() and int(expiry_text) <= moment:
                path.unlink(missing_ok=True)


REVOCATIONS = Revocations(os.environ.get(REVOCATIONS_VARIABLE) or None)
"""This process's record of signed-out sessions."""


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
