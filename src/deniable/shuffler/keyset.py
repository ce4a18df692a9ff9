"""The one key set the shuffler serves every device, fetched from the collector by the shuffler.

A collector that answered each device's ``GET /v1/keys`` with a key of its own could open each
shuffled report with the one key that fits and so name its sender. So devices never ask the
collector: the shuffler fetches the collector's ``GET /v1/keys`` every ``keys_refresh`` seconds,
checks every key's id is its own (the SHA-256 of the key) and exactly one is ``current``, and
serves that one document, byte for byte the same, to every device at its own ``GET /v1/keys``.
It accepts an envelope only if it is sealed to a key id it serves (or served within
``keys_keep`` seconds), and batches by key id (:class:`~.store.BatchKey`), so every report of a
batch is sealed to one key that every device asking at that time was given.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Collection

import httpx

from deniable.client.exchange import exchange
from deniable.client.sealing import KEYS_PATH, SealingError, public_key_of

log = logging.getLogger("deniable.shuffler")

MAX_KEYS_BYTES = 64 * 1024
"""The largest ``GET /v1/keys`` answer read from the collector."""
MAX_KEYS = 64
"""The most keys one served document may hold."""
FETCH_SECONDS = 10.0
"""The deadline of one fetch of the collector's keys."""


class KeysUnavailable(Exception):
    """The shuffler holds no key set yet (the collector's ``GET /v1/keys`` never answered)."""


def served_document(body: bytes) -> tuple[bytes, frozenset[str]]:
    """The document to serve devices (canonical JSON of ``{"keys": [{"id", "public",
    "current"}]}``) and its key ids, from the collector's answer; ValueError naming the problem."""
    try:
        served = json.loads(body)["keys"]
    except (ValueError, KeyError, TypeError):
        raise ValueError('the answer is not {"keys": [...]}') from None
    if not isinstance(served, list) or not 0 < len(served) <= MAX_KEYS:
        raise ValueError(f"it serves no key or more than {MAX_KEYS}")
    keys = []
    try:
        for entry in served:
            kid, _ = public_key_of(entry)
            keys.append(
                {"id": kid, "public": entry["public"], "current": entry.get("current") is True}
            )
    except SealingError as exc:
        raise ValueError(str(exc)) from None
    if sum(key["current"] for key in keys) != 1:
        raise ValueError("it marks no key, or more than one, current")
    ids = frozenset(key["id"] for key in keys)
    if len(ids) != len(keys):
        raise ValueError("it serves one key twice")
    return json.dumps({"keys": keys}, separators=(",", ":")).encode(), ids


class KeySet:
    """The key set served to devices, refreshed from the collector in a background thread."""

    def __init__(
        self,
        collector_url: str,
        refresh: float,
        keep: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = collector_url + KEYS_PATH
        self.refresh_seconds = refresh
        self.keep = keep
        self._clock = clock
        self._lock = threading.Lock()
        self._document: bytes | None = None
        self._ids: frozenset[str] = frozenset()
        self._last_served: dict[str, float] = {}
        """Key ids served before the current document, with when they stopped being served."""
        self.problem = "the collector's keys were not fetched yet"
        """Why the last fetch failed ("" when it did not)."""
        self._http = httpx.Client(timeout=FETCH_SECONDS, trust_env=False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deniable-keys", daemon=True)

    def start(self) -> None:
        """Fetch once now (so a shuffler whose collector answers serves keys from its first
        request on), then every ``refresh`` seconds in the background."""
        self.refresh()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=FETCH_SECONDS + 5)
        self._http.close()

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_seconds):
            self.refresh()

    def refresh(self) -> None:
        """Fetch the collector's keys once and adopt them; on failure keep serving the last set."""
        try:
            answer = exchange(
                self._http, "GET", self.url, seconds=FETCH_SECONDS, limit=MAX_KEYS_BYTES
            )
            if answer.status != 200:
                raise ValueError(f"it answered HTTP {answer.status}")
            document, ids = served_document(answer.body)
        except Exception as exc:  # a network error, a deadline, a cap, a bad document
            why = str(exc) if isinstance(exc, ValueError) else type(exc).__name__
            self.problem = f"GET {self.url} refused: {why}"[:300]
            log.warning("kept the last key set: %s", self.problem)
            return
        self.adopt(document, ids)

    def adopt(self, document: bytes, ids: frozenset[str]) -> None:
        """Serve ``document`` from now on; the ids it drops stay accepted for ``keep`` seconds."""
        now = self._clock()
        with self._lock:
            if document != self._document:
                for kid in self._ids - ids:
                    self._last_served[kid] = now
                for kid in ids:
                    self._last_served.pop(kid, None)
                self._document, self._ids = document, ids
            self._last_served = {
                kid: at for kid, at in self._last_served.items() if now - at <= self.keep
            }
            self.problem = ""

    def loaded(self) -> str:
        """The key set held, as the start-up log states it: how many keys, which is current
        and where they came from (public ids only)."""
        with self._lock:
            if self._document is None:
                return "none"
            keys = json.loads(self._document)["keys"]
        (current,) = [key["id"] for key in keys if key["current"]]
        return f"{len(keys)} from {self.url} (current {current})"

    def document(self) -> bytes:
        """The document every device is served; :class:`KeysUnavailable` before the first."""
        with self._lock:
            if self._document is None:
                raise KeysUnavailable(self.problem)
            return self._document

    def refused(self, key_ids: Collection[str]) -> list[str]:
        """Those of ``key_ids`` this shuffler does not accept (never served, or dropped by the
        collector more than ``keep`` seconds ago); :class:`KeysUnavailable` before the first
        key set."""
        now = self._clock()
        with self._lock:
            if self._document is None:
                raise KeysUnavailable(self.problem)
            return sorted(
                {
                    kid
                    for kid in key_ids
                    if kid not in self._ids and now - self._last_served.get(kid, -1e18) > self.keep
                }
            )
