"""Uploads through a shuffler: each batch's reports sealed to the collector's key, sent to the
shuffler with this device's pseudonym, answered as the collector answers.

:class:`SealingTransport` stands where the uploader's :class:`~.transport.Transport` stands
(the same ``send``, ``backoff`` and ``timeout``), so the outbox, the budget, the 413 split,
the 422 drops and the retries are unchanged. The collector's public keys come from
``GET /v1/keys`` on the shuffler, never on the collector: the shuffler fetches them from the
collector and serves every device the same set, so a collector cannot hand each device a key
of its own and tell the shuffled reports apart by the key that opens them (docs/security.md).
Each key is checked against its id (the SHA-256 of the key: a key re-served under another's
id is refused) and kept; devices seal to the key marked ``current``, and fetch again after
:data:`KEY_REFRESH` seconds (a rotation) or at once when the shuffler answers 409 (it no
longer takes that key). Until a key arrives, uploads wait and are retried like any failed
attempt.

The pseudonym (:func:`device_pseudonym`) goes to the shuffler only, which uses it to put at
most one report per device in a batch and drops it once the report is batched; the collector
never sees it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .sealing import KEYS_PATH, SealingError, envelope, public_key_of
from .spec import MetricSpec
from .transport import SendResult, Transport
from .wire import split_reports

log = logging.getLogger("deniable.client")

KEY_REFRESH = 600.0
"""Seconds a fetched key is used before the key list is fetched again."""
MAX_KEYS_BYTES = 64 * 1024
"""The largest ``GET /v1/keys`` answer read."""
KEY_REFUSED = 409
"""The shuffler's answer to reports sealed to a key it does not serve (any more)."""
_BODY_HEAD = b'{"reports":['
_BODY_TAIL = b"]}"


def device_pseudonym(secret: bytes) -> str:
    """This device's pseudonym for the shuffler: an HMAC of a fixed label under the device's
    local secret (stable across restarts, unlinkable to anything else it sends)."""
    return hmac.new(secret, b"deniable.shuffler.device.v1", hashlib.sha256).hexdigest()[:32]


class SealingTransport:
    """Seals each batch to the current key the shuffler serves and posts it to the shuffler."""

    def __init__(
        self,
        shuffler: Transport,
        specs: Callable[[], dict[str, MetricSpec]],
        device: str,
    ) -> None:
        self._shuffler = shuffler
        self._specs = specs
        self._device = device
        self._pinned: dict[str, bytes] = {}
        self._current: str | None = None
        self._fetched_at = -KEY_REFRESH
        self._lock = threading.Lock()

    @property
    def timeout(self) -> float:
        return self._shuffler.timeout

    @property
    def url(self) -> str:
        return self._shuffler.url

    def backoff(self, failures: int, retry_after: float | None = None) -> float:
        return self._shuffler.backoff(failures, retry_after)

    def _key(self, seconds: float) -> tuple[str, bytes] | str:
        """The current key (id, raw public), fetched if none or stale; else why there is none."""
        with self._lock:
            if self._current is not None and time.monotonic() - self._fetched_at < KEY_REFRESH:
                return self._current, self._pinned[self._current]
            why = self._fetch(seconds)
            if self._current is None:
                return why or "the shuffler serves no current sealing key"
            return self._current, self._pinned[self._current]

    def _fetch(self, seconds: float) -> str:
        """Fetch ``GET /v1/keys`` from the shuffler and adopt its current key; why it failed
        ("" if it did not)."""
        try:
            answer = self._shuffler.get(KEYS_PATH, seconds, MAX_KEYS_BYTES)
            if answer.status != 200:
                return f"GET {KEYS_PATH} answered HTTP {answer.status}"
            served = json.loads(answer.body)["keys"]
            current = None
            for entry in served:
                kid, public = public_key_of(entry)
                if self._pinned.setdefault(kid, public) != public:
                    raise SealingError("a served key differs from the one pinned under its id")
                if entry.get("current") is True:
                    current = kid
        except (SealingError, ValueError, KeyError, TypeError) as exc:
            log.error("refused the collector's sealing keys: %s", exc)
            return f"refused the collector's sealing keys: {exc}"
        except Exception as exc:  # httpx errors (imported lazily), a deadline, a cap
            return f"GET {KEYS_PATH} failed ({type(exc).__name__})"
        self._fetched_at = time.monotonic()
        if current is not None:
            self._current = current
        return ""

    def send(self, body: bytes, count: int, timeout: float | None = None) -> SendResult:
        """Seal the batch ``body`` (``{"reports": [...]}``) report by report and post it to
        the shuffler; a report whose metric is no longer known is refused like a 422."""
        key = self._key(timeout or self.timeout)
        if isinstance(key, str):
            return SendResult("retry", reason=key[:200], url=self._shuffler.url)
        _, public = key
        texts = split_reports(body[len(_BODY_HEAD) : -len(_BODY_TAIL)].decode())
        specs = self._specs()
        envelopes: list[dict[str, Any]] = []
        unknown: set[int] = set()
        for index, text in enumerate(texts):
            spec = specs.get(json.loads(text)["metric"])
            if spec is None:
                unknown.add(index)
                continue
            try:
                envelopes.append(envelope(text, spec, public))
            except SealingError:
                unknown.add(index)
        if unknown:
            return SendResult(
                "rejected",
                status=422,
                reason="reports of metrics whose spec is no longer known cannot be sealed",
                bad_indices=frozenset(unknown),
                url=self.url,
            )
        sealed = json.dumps({"device": self._device, "envelopes": envelopes}, separators=(",", ":"))
        result = self._shuffler.send(sealed.encode(), count, timeout)
        if result.status == KEY_REFUSED:
            with self._lock:
                self._current = None  # the shuffler no longer takes it: fetch its keys again
        return result

    def close(self) -> None:
        self._shuffler.close()
