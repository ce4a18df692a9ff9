"""Releases formed batches to the collector, part by part, until each part is acknowledged.

A part is ``POST /v1/shuffled`` with the batch's id, key and size and its sealed reports in the
batch's shuffled order. Only the collector's acknowledgement (202 with its three counts) moves
a part to forwarded; anything else is retried, for as long as it takes: a network error, 5xx,
401, 403, 408 or 429 (the collector or its configuration, the same for every batch) with
capped, jittered backoff in place; a refusal of this batch (any other 4xx, e.g. a batch below
the collector's minimum) in a later round, so one batch the collector refuses never holds up
the others, until ``max_wait_hours`` after its first refusal: then the store deletes it
(:meth:`~.store.Store.expire_refused`). The collector dedupes a part sent again by the report ids inside, so a crash
between its commit and our acknowledgement doubles nothing.
"""

from __future__ import annotations

import enum
import logging
import secrets
import threading
from typing import Any

import httpx

from deniable.client.sealing import SHUFFLED_PATH

from .store import Batch, Store

log = logging.getLogger("deniable.shuffler")

_RANDOM = secrets.SystemRandom()


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


class Outcome(enum.Enum):
    """How forwarding a batch ended."""

    DONE = "done"
    """Every part acknowledged."""
    STOPPED = "stopped"
    """The shuffler is stopping."""
    REFUSED = "refused"
    """The collector refused a part of this batch: try it again in a later round (until
    ``max_wait_hours`` after the first refusal)."""


_EVERY_BATCH = frozenset({401, 403, 408, 429})
"""4xx answers about the collector or the shuffler's credentials, not about one batch."""
_CREDENTIALS = frozenset({401, 403})
"""Answers refusing the shuffler's token: its DENIABLE_SHUFFLER_TOKEN is not the collector's."""
REFUSALS_UNHEALTHY = 3
"""Refusals of the token in a row after which ``/healthz`` reports the shuffler not ok."""
TOKEN_REFUSED = (
    "the collector refused the shuffler's token (HTTP {status}): set DENIABLE_SHUFFLER_TOKEN"
    " (or _FILE) to the collector's DENIABLE_SHUFFLER_TOKEN"
)
"""What the log and ``/healthz`` say when the collector refuses the token."""


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
        self.token_refusals = 0
        """The collector's refusals of the token in a row (401, 403), 0 after any other answer."""
        self.refused_status = 0
        """The status of the last refusal of the token."""

    def problem(self) -> str | None:
        """Why the shuffler cannot forward (the collector refused its token
        :data:`REFUSALS_UNHEALTHY` times in a row), or None."""
        if self.token_refusals < REFUSALS_UNHEALTHY:
            return None
        return TOKEN_REFUSED.format(status=self.refused_status)

    def forward(self, batch: Batch, stop: threading.Event) -> Outcome:
        """Forward ``batch``'s unacknowledged parts in order, until all are acknowledged,
        ``stop`` comes, or the collector refuses one of them."""
        for part in range(batch.forwarded, batch.parts):
            body = part_body(batch, part, self.store.part(batch, part))
            failures = 0
            while (sent := self._send(body)) is not Outcome.DONE:
                if sent is Outcome.REFUSED:
                    return Outcome.REFUSED
                failures += 1
                if stop.wait(_RANDOM.uniform(0, min(self.retry_cap, 0.1 * 2**failures))):
                    return Outcome.STOPPED
            self.store.acknowledged(batch, part)
        log.info("released a batch of %d reports of %s", batch.n, batch.key.metric)
        return Outcome.DONE

    def _send(self, body: dict[str, Any]) -> Outcome | None:
        """DONE if the part was acknowledged, REFUSED if the collector refused this batch,
        None to retry it in place."""
        try:
            answer = self._http.post(self.url, json=body)
        except httpx.HTTPError as exc:
            log.warning("forwarding a part failed (%s); retrying", type(exc).__name__)
            return None
        status = answer.status_code
        if status in _CREDENTIALS:
            self.token_refusals += 1
            self.refused_status = status
            log.warning(TOKEN_REFUSED.format(status=status) + "; retrying")
            return None
        self.token_refusals = 0
        if _acknowledged(answer):
            return Outcome.DONE
        if 400 <= status < 500 and status not in _EVERY_BATCH:
            log.warning(
                "the collector refused a part of a batch of %s with HTTP %d; trying it again"
                " in a later round",
                body["metric"],
                status,
            )
            return Outcome.REFUSED
        log.warning("the collector answered a part with HTTP %d; retrying", status)
        return None

    def close(self) -> None:
        self._http.close()
