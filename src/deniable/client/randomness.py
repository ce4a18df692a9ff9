"""Sources of randomness for the randomizers.

Production draws come from the operating system's CSPRNG (``os.urandom``), read in
large blocks so that a draw costs a slice of a buffer instead of a system call.
A buffer copied into a child by ``os.fork()`` would hand parent and child the same "random"
numbers (correlated randomization) and the same report ids (the collector would drop one
as a duplicate), so every buffer here is discarded in the child right after a fork.
A seeded source exists for tests only: it makes statistical tests deterministic, and a fork
leaves it alone.
"""

from __future__ import annotations

import os
import random as _random
import struct
import threading
import weakref
from typing import Protocol, runtime_checkable

_BLOCK_WORDS = 4096
_UNPACK = struct.Struct(f"<{_BLOCK_WORDS}Q").unpack
_TWO_POW_MINUS_53 = 2.0**-53


@runtime_checkable
class Randomness(Protocol):
    """What a randomizer needs: uniform floats, uniform integers and raw bytes."""

    def random(self) -> float:
        """A uniform float in [0, 1) with 53 random bits."""
        ...

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), without modulo bias."""
        ...

    def token_bytes(self, n: int) -> bytes:
        """``n`` uniform random bytes."""
        ...


class _ForkSafe:
    """Something that buffers random output: registered so a forked child discards it."""

    def __init__(self) -> None:
        self._discard()
        _LIVE.add(self)

    def _discard(self) -> None:
        """Forget every buffered draw (in a child just after ``os.fork()``)."""
        raise NotImplementedError


_LIVE: weakref.WeakSet[_ForkSafe] = weakref.WeakSet()


def _discard_after_fork() -> None:
    """In a forked child: drop what every live source buffered before the fork."""
    for source in list(_LIVE):
        source._discard()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_discard_after_fork)


class _BufferedRandomness(_ForkSafe):
    """The OS CSPRNG read in blocks of 32 KiB: unlocked buffer draws shared by both sources.

    ``_next_word`` and ``_take_bytes`` touch the buffers without a lock; a subclass that is
    shared across threads wraps them in its lock (``_word`` and ``token_bytes``).
    """

    def _discard(self) -> None:
        self._words: list[int] = []
        self._bytes = b""
        self._byte_pos = 0

    def _next_word(self) -> int:
        try:
            return self._words.pop()
        except IndexError:
            self._words = list(_UNPACK(os.urandom(8 * _BLOCK_WORDS)))
            return self._words.pop()

    def _take_bytes(self, n: int) -> bytes:
        if self._byte_pos + n > len(self._bytes):
            self._bytes = os.urandom(max(n, 8 * _BLOCK_WORDS))
            self._byte_pos = 0
        chunk = self._bytes[self._byte_pos : self._byte_pos + n]
        self._byte_pos += n
        return chunk

    _word = _next_word
    token_bytes = _take_bytes

    def randbelow(self, n: int) -> int:
        if n <= 0:
            raise ValueError("randbelow needs a positive bound")
        if n > 1 << 64:
            return int.from_bytes(self.token_bytes((n.bit_length() + 7) // 8 + 8)) % n
        bits = (n - 1).bit_length()
        while True:
            candidate = self._word() >> (64 - bits) if bits else 0
            if candidate < n:
                return candidate


class SystemRandomness(_BufferedRandomness):
    """The operating system's CSPRNG, buffered in blocks of 32 KiB; safe across threads."""

    def _discard(self) -> None:
        super()._discard()
        # a thread that held the lock at the fork does not exist in the child
        self._lock = threading.Lock()

    def _word(self) -> int:
        with self._lock:
            return self._next_word()

    def random(self) -> float:
        return (self._word() >> 11) * _TWO_POW_MINUS_53

    def token_bytes(self, n: int) -> bytes:
        with self._lock:
            return self._take_bytes(n)


class SeededRandomness:
    """A reproducible generator for tests; never use it to protect real users."""

    def __init__(self, seed: int) -> None:
        self._rng = _random.Random(seed)

    def random(self) -> float:
        return self._rng.random()

    def randbelow(self, n: int) -> int:
        if n <= 0:
            raise ValueError("randbelow needs a positive bound")
        return self._rng.randrange(n)

    def token_bytes(self, n: int) -> bytes:
        return self._rng.randbytes(n)


system_randomness = SystemRandomness()
"""The process-wide default source: the OS CSPRNG."""


class LocalRandomness(_BufferedRandomness):
    """The OS CSPRNG buffered without a lock, for one owner that already serializes its calls.

    Same draws as :class:`SystemRandomness` (floats with 53 bits from 64-bit words of
    ``os.urandom``), converted a block at a time; the client uses one under its record lock
    so that a draw costs a list pop.
    """

    def _discard(self) -> None:
        super()._discard()
        self._floats: list[float] = []

    def random(self) -> float:
        try:
            return self._floats.pop()
        except IndexError:
            scale = _TWO_POW_MINUS_53
            self._floats = [(w >> 11) * scale for w in _UNPACK(os.urandom(8 * _BLOCK_WORDS))]
            return self._floats.pop()


_UUID_HEX_DEST = [i + (i >= 8) + (i >= 12) + (i >= 16) + (i >= 20) for i in range(32)]
_UUID_DASHES = (8, 13, 18, 23)
_UUID_VARIANT = bytes.maketrans(b"0123456789abcdef", b"89ab89ab89ab89ab")


def uuid4_texts(count: int, rng: Randomness = system_randomness) -> list[str]:
    """``count`` random (version 4) UUIDs in canonical text form, built in bulk from ``rng``.

    Equivalent to ``str(uuid.uuid4())`` but drawing from a buffered source and formatting
    with a handful of C-level slice operations, so a UUID costs a fraction of a microsecond.
    """
    if count <= 0:
        return []
    hexed = rng.token_bytes(16 * count).hex().encode("ascii")
    out = bytearray(37 * count)
    for i, dest in enumerate(_UUID_HEX_DEST):
        out[dest::37] = hexed[i::32]
    for dash in _UUID_DASHES:
        out[dash::37] = b"-" * count
    out[14::37] = b"4" * count
    out[19::37] = hexed[16::32].translate(_UUID_VARIANT)
    out[36::37] = b"\n" * count
    return out.decode("ascii").split("\n")[:count]


class ReportIds(_ForkSafe):
    """Random (version 4) UUID texts made a block at a time, handed out one per call.

    For one owner that serializes its calls (the client, under its record lock). A forked
    child discards the ids made before the fork, so parent and child never share one.
    """

    def __init__(self, block: int = 4096) -> None:
        self._block = block
        self._rng = LocalRandomness()
        super().__init__()

    def _discard(self) -> None:
        self._ids: list[str] = []

    def take(self) -> str:
        """A fresh id."""
        try:
            return self._ids.pop()
        except IndexError:
            self._ids = uuid4_texts(self._block, self._rng)
            return self._ids.pop()
