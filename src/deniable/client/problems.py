"""What is wrong right now, in words: the list :meth:`.Client.problems` returns.

Each part of the client (spec source, uploader, holding) notes a problem under a key when it
sees one and clears the key when it is over, so an app (or a health check) can show why
reports are not arriving without reading logs. A message names metrics, URLs, statuses and
counts, never a recorded value.
"""

from __future__ import annotations

import threading


class Problems:
    """The current problems by key; thread-safe, in the order they were first noted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: dict[str, str] = {}

    def note(self, key: str, message: str) -> None:
        """Record (or update) the problem ``key``."""
        with self._lock:
            self._messages[key] = message

    def clear(self, key: str) -> None:
        """The problem ``key`` is over."""
        with self._lock:
            self._messages.pop(key, None)

    def __contains__(self, key: object) -> bool:
        """Whether the problem ``key`` holds now."""
        with self._lock:
            return key in self._messages

    def current(self) -> list[str]:
        """The messages of the problems that hold now."""
        with self._lock:
            return list(self._messages.values())
