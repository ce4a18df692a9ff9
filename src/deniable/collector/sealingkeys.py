"""The collector's sealing keys: a JSON file of mode 0600 that ``deniable keys`` writes and the
collector reads (its current public key served to devices, its keys opening sealed reports).

The file is ``{"keys": [{"id", "public", "private", "created_at", "retired_at"}]}``: raw X25519
keys in standard base64, the id being the public key's (``client.sealing.key_id``), times in
ISO 8601 UTC. The current key is the newest one not retired; a rotation retires it and adds a
new one. A retired key is still served (``GET /v1/keys``, not current) for
``DENIABLE_SEALING_KEY_GRACE_DAYS`` after its retirement, and it opens the reports sealed to it
for as long as it stays in the file: a report the shuffler acknowledged may wait for its batch
longer than any grace period (up to the shuffler's ``MAX_WAIT_HOURS``, then its forwarding),
and refusing it then would lose it.

The file is written whole to a new file of mode 0600 and renamed into place, so a reader never
sees half of it; one with any permission for the group or others is refused.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from deniable.client.errors import DeniableError
from deniable.client.sealing import key_id


class KeyFileError(DeniableError):
    """The sealing keys file is missing, unreadable, too open, or not what ``deniable keys``
    writes."""


@dataclass(frozen=True)
class SealingKey:
    """One key pair of the file."""

    id: str
    public: bytes
    private: X25519PrivateKey = field(repr=False)
    created_at: dt.datetime
    retired_at: dt.datetime | None

    def opens_at(self, now: dt.datetime, grace: dt.timedelta) -> bool:
        """Whether this key is still served at ``now`` (current, or retired within the grace
        period)."""
        return self.retired_at is None or now <= self.retired_at + grace

    def status(self, now: dt.datetime, grace: dt.timedelta) -> str:
        """``current``, ``retiring`` (still served) or ``retired`` (no longer served; it still
        opens the reports sealed to it while it is in the file)."""
        if self.retired_at is None:
            return "current"
        return "retiring" if self.opens_at(now, grace) else "retired"


def _raw_public(private: X25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def new_key(now: dt.datetime) -> SealingKey:
    """A new key pair from the OS CSPRNG."""
    private = X25519PrivateKey.generate()
    public = _raw_public(private)
    return SealingKey(key_id(public), public, private, now, None)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _time(text: Any, what: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise KeyFileError(f"{what} is not an ISO 8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _key_of(entry: Any) -> SealingKey:
    if not isinstance(entry, dict):
        raise KeyFileError("each key is an object")
    try:
        raw = base64.b64decode(entry["private"], validate=True)
        private = X25519PrivateKey.from_private_bytes(raw)
    except (KeyError, TypeError, ValueError):
        raise KeyFileError("a key's 'private' is not 32 bytes of standard base64") from None
    public = _raw_public(private)
    if entry.get("id") != key_id(public) or entry.get("public") != _b64(public):
        raise KeyFileError("a key's id or public key does not match its private key")
    retired = entry.get("retired_at")
    return SealingKey(
        entry["id"],
        public,
        private,
        _time(entry.get("created_at"), "created_at"),
        None if retired is None else _time(retired, "retired_at"),
    )


def read_keys(path: Path) -> list[SealingKey]:
    """Every key of the file, oldest first; :class:`KeyFileError` if it cannot be used."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KeyFileError(f"cannot read the sealing keys file {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(
            f"the sealing keys file {path} is readable by others (mode {stat.S_IMODE(mode):o}):"
            " chmod 600 it"
        )
    try:
        document = json.loads(text)
        entries = document["keys"]
    except (ValueError, KeyError, TypeError):
        raise KeyFileError(
            f"{path} is not a sealing keys file (written by deniable keys)"
        ) from None
    if not isinstance(entries, list) or not entries:
        raise KeyFileError(f"{path} holds no key")
    return [_key_of(entry) for entry in entries]


def write_keys(path: Path, keys: list[SealingKey], *, new_file: bool) -> None:
    """Write ``keys`` to ``path`` (mode 0600), whole or not at all; ``new_file`` refuses to
    replace an existing file."""
    document = {
        "keys": [
            {
                "id": key.id,
                "public": _b64(key.public),
                "private": _b64(
                    key.private.private_bytes(
                        serialization.Encoding.Raw,
                        serialization.PrivateFormat.Raw,
                        serialization.NoEncryption(),
                    )
                ),
                "created_at": key.created_at.isoformat(),
                "retired_at": None if key.retired_at is None else key.retired_at.isoformat(),
            }
            for key in keys
        ]
    }
    if new_file and path.exists():
        raise KeyFileError(f"{path} exists already: rotate its keys instead (deniable keys rotate)")
    partial = path.with_name(path.name + ".partial")
    try:
        partial.unlink(missing_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=1)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        if new_file:
            os.link(partial, path)
            partial.unlink()
        else:
            os.replace(partial, path)
    except FileExistsError:
        raise KeyFileError(f"{path} exists already: rotate its keys instead") from None
    except OSError as exc:
        raise KeyFileError(f"cannot write the sealing keys file {path}: {exc.strerror}") from None


def generate(path: Path, now: dt.datetime) -> SealingKey:
    """Create the keys file with one new key; refuses to replace an existing file."""
    key = new_key(now)
    write_keys(path, [key], new_file=True)
    return key


def rotate(path: Path, now: dt.datetime) -> SealingKey:
    """Retire the current key (served for the grace period, opening what was sealed to it
    while it stays in the file) and add a new current one; returns the new key."""
    keys = read_keys(path)
    retired = [
        k if k.retired_at is not None else SealingKey(k.id, k.public, k.private, k.created_at, now)
        for k in keys
    ]
    key = new_key(now)
    write_keys(path, [*retired, key], new_file=False)
    return key


def current_key(keys: list[SealingKey]) -> SealingKey:
    """The newest key that is not retired."""
    live = [key for key in keys if key.retired_at is None]
    if not live:
        raise KeyFileError("the sealing keys file has no current key: rotate to make one")
    return live[-1]


def public_document(
    keys: list[SealingKey], now: dt.datetime, grace: dt.timedelta
) -> dict[str, Any]:
    """What ``GET /v1/keys`` serves: the current key and the keys retired within the grace
    period, public halves only, the one devices seal to marked ``current``."""
    current = current_key(keys).id
    return {
        "keys": [
            {"id": key.id, "public": _b64(key.public), "current": key.id == current}
            for key in keys
            if key.opens_at(now, grace)
        ]
    }


class KeyRing:
    """The collector's view of its keys file, read again whenever the file changes (a
    rotation takes effect without a restart)."""

    def __init__(self, path: Path, grace: dt.timedelta) -> None:
        self.path = path
        self.grace = grace
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._keys: list[SealingKey] = []

    def keys(self) -> list[SealingKey]:
        """Every key of the file, as it is now."""
        try:
            info = self.path.stat()
        except OSError as exc:
            raise KeyFileError(
                f"cannot read the sealing keys file {self.path}: {exc.strerror}"
            ) from None
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._keys = read_keys(self.path)
                self._stamp = stamp
            return self._keys

    def opener(self) -> dict[str, X25519PrivateKey]:
        """The private keys that open reports, by id: every key of the file, retired ones
        past their grace period included (the shuffler may still hold reports sealed to
        them)."""
        return {key.id: key.private for key in self.keys()}

    def public(self, now: dt.datetime) -> dict[str, Any]:
        """The ``GET /v1/keys`` document."""
        return public_document(self.keys(), now, self.grace)


_KEYRINGS: dict[tuple[Path, int], KeyRing] = {}
_KEYRINGS_LOCK = threading.Lock()


def keyring_of(path: Path | None, grace_days: int) -> KeyRing:
    """The one :class:`KeyRing` of the keys file ``path`` (``DENIABLE_SEALING_KEYS_FILE``);
    :class:`KeyFileError` naming the setting when none is configured."""
    if path is None:
        raise KeyFileError(
            "no sealing keys: set DENIABLE_SEALING_KEYS_FILE (made by deniable keys generate)"
        )
    with _KEYRINGS_LOCK:
        found = _KEYRINGS.get((path, grace_days))
        if found is None:
            found = _KEYRINGS[(path, grace_days)] = KeyRing(path, dt.timedelta(days=grace_days))
        return found
