"""Releases formed batches to the collector, part by part, until each part is acknowledged.

A part is ``POST /v1/shuffled`` with the batch's id, key and size and its sealed reports in the
batch's shuffled order. Only the collector's acknowledgement (202 with its three counts) moves
a part to forwarded; anything else (a network error, 5xx, 401, 403, 429) is retried with capped,
jittered backoff, for as long as it takes. A refusal of the part itself (400, 413, 422: a header
that is not its metric's registered spec, a metric not registered, a batch below the minimum)
would be the same every time, so it is logged as an ERROR and the part dropped: one batch the
collector will never take does not hold up every batch behind it. The collector dedupes a part sent again by the
report ids inside, so a crash between its commit and our acknowledgement doubles nothing.
"""

from __future__ import annotations

import logging
import secrets
import threading
from typing import Any

import httpx
from deniable.client.sealing import SHUFFLED_PATH

from .store import Batch, Store

log = logging.getLogger("deniable.shuffler")

_RANDOM = secrets.SystemRandom()

FINAL_REFUSALS = frozenset({400, 413, 422})
"""The collector's answers that refuse a part for what it is: sent again, it is refused again."""


def part_body(batch: Batch, part: int, sealed: list[tuple[str, str]]) -> dict[str, Any]:
    """The JSON body of one forwarded part."""
    return {
        "batch": batch.id,
        "part": part,
        "parts": batch.parts,
        "n": batch.n,
        "metric": batch.key.metric,
        "mechanism": batch.key.mechanism,
        "epsilon": batch.key.epsilon,
        "fingerprint": batch.key.fingerprint,
        "envelopes": [{"key": key, "sealed": text} for key, text in sealed],
    }


def _acknowledged(answer: httpx.Response) -> bool:
    """Whether ``answer`` is the collector's acknowledgement of a part."""
    if answer.status_code != 202:
        return False
    try:
        document = answer.json()
    except ValueError:
        return False
    return isinstance(document, dict) and all(
        type(document.get(name)) is int for name in ("accepted", "duplicates", "refused")
    )


class Forwarder:
    """Sends parts to the collector with retries (one HTTP client, the shuffler's token)."""

    def __init__(
        self, store: Store, collector_url: str, token: str | None, retry_cap: float
    ) -> None:
        self.store = store
        self.url = collector_url + SHUFFLED_PATH
        self.retry_cap = retry_cap
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(headers=headers, timeout=60.0, trust_env=False)

    def forward(self, batch: Batch, stop: threading.Event) -> bool:
        """Forward ``batch``'s unacknowledged parts in order; False if ``stop`` came first."""
        for part in range(batch.forwarded, batch.parts):
            body = part_body(batch, part, self.store.part(batch, part))
            failures = 0
            while not self._send(body, batch.key.metric):
                failures += 1
                if stop.wait(_RANDOM.uniform(0, min(self.retry_cap, 0.1 * 2**failures))):
                    return False
            self.store.acknowledged(batch, part)
        log.info("released a batch of %d reports of %s", batch.n, batch.key.metric)
        return True

    def _send(self, body: dict[str, Any], metric: str) -> bool:
        """Whether the part is done with: acknowledged, or refused for good (dropped)."""
        try:
            answer = self._http.post(self.url, json=body)
        except httpx.HTTPError as exc:
            log.warning("forwarding a part failed (%s); retrying", type(exc).__name__)
            return False
        if _acknowledged(answer):
            return True
        if answer.status_code in FINAL_REFUSALS:
            log.error(
                "the collector refused a part of a batch of %s for good (HTTP %d: %s); its %d"
                " sealed reports are dropped",
                metric,
                answer.status_code,
                answer.text[:300],
                len(body["envelopes"]),
            )
            return True
        log.warning("the collector answered a part with HTTP %d; retrying", answer.status_code)
        return False

    def close(self) -> None:
        self._http.close()
