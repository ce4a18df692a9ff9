"""Upload to the collector over HTTP: one attempt at a time, failover between URLs, backoff.

The transport sends bodies the :mod:`.wire` module builds to its two endpoints
(``POST /v1/reports``, ``GET /v1/metrics``) and classifies each answer:

- accepted (2xx);
- refused for good: only a 400 or 422 that carries the collector's own problem document
  (JSON ``{"detail": ...}``) judges the batch itself (the client drops only the reports a
  422 names, when it names them); a 413, from the collector or a proxy, says the batch is
  too large (the client splits it rather than dropping it);
- worth a retry on the next URL: network errors, 5xx, 408 and 429 (honouring
  ``Retry-After``), and every other 4xx. A 401, 403, 404 or 405 says the endpoint or the
  credential is wrong *now* (a wrong path, a misrouting proxy, an ingest key rotated before
  the app caught up), not that the reports are: they are kept (:attr:`SendResult.refused`).
  So is a 400 or 422 without the problem document, such as a proxy's HTML page ("plain HTTP
  request sent to HTTPS port"): it says nothing about the reports, and dropping them would
  waste the privacy budget that made them.

Retry pacing uses exponential backoff with full jitter. It never raises a network error to
its caller.

A collector URL is the server's base (``https://telemetry.example.com``): the API's ``/v1``
is added here. A URL that ends in ``/v1`` (a common slip when copying an endpoint) is taken
without it, with a warning that names it.
"""

from __future__ import annotations

import email.utils
import functools
import logging
import random
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .errors import InvalidInput
from .wire import METRICS_PATH, REPORTS_PATH

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("deniable.client")

MAX_RETRY_AFTER = 3600.0
"""The longest ``Retry-After`` the client obeys, in seconds."""
FINAL_STATUSES = frozenset({400, 413, 422})
"""The answers that may judge the batch itself (400 and 422 only with the collector's problem
document); any other 4xx keeps the reports for a retry."""
_TRANSIENT_4XX = frozenset({408, 429})


@dataclass(frozen=True)
class SendResult:
    """What became of one upload attempt."""

    kind: Literal["accepted", "rejected", "retry"]
    accepted: int = 0
    duplicates: int = 0
    status: int | None = None
    reason: str = ""
    retry_after: float | None = None
    bad_indices: frozenset[int] | None = None
    """For a 422 that names the bad reports (by index in the batch): which they are."""
    url: str = ""
    """The collector URL the attempt went to."""

    @property
    def refused(self) -> bool:
        """A retry after a 4xx that blames the endpoint or the credential (401, 403, 404...)."""
        return (
            self.kind == "retry"
            and self.status is not None
            and 400 <= self.status < 500
            and self.status not in _TRANSIENT_4XX
        )


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every client of the process.

    Loading the CA bundle takes tens of milliseconds; a context is safe to share between
    threads, so an app (or a simulation) creating many clients pays for it once.
    """
    import httpx

    return httpx.create_ssl_context()


def _problem_document(response: httpx.Response) -> dict[str, Any] | None:
    """The collector's own problem document (a JSON object with ``detail``), or ``None``.

    The collector answers every refusal this way; anything else (a proxy's HTML page, a
    captive portal's text) did not come from it and judges nothing about the reports.
    """
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return None
    try:
        document = response.json()
    except ValueError:
        return None
    return document if isinstance(document, dict) and "detail" in document else None


def _bad_indices(detail: Any) -> frozenset[int] | None:
    """The report indices a 422 names (``[{"index": i, "reason": ...}, ...]``), if it names them."""
    if not isinstance(detail, list) or not detail:
        return None
    indices = [item.get("index") if isinstance(item, dict) else None for item in detail]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        return None
    return frozenset(indices)  # type: ignore[arg-type]


def base_url(url: str) -> str:
    """The collector's base URL: without a trailing slash, and without a ``/v1`` the API adds
    itself (warned about, naming the URL)."""
    base = url.rstrip("/")
    if base.endswith("/v1"):
        log.warning(
            "collector URL %s ends in /v1, which the SDK adds itself; using %s", url, base[:-3]
        )
        base = base[:-3]
    return base


class Transport:
    """Talks to one of several collector URLs; a failed attempt moves to the next URL.

    ``transport`` is an httpx transport handed to the ``httpx.Client`` inside, as httpx itself
    takes one: ``httpx.MockTransport(handler)`` answers with a function instead of a server.
    Without it, requests go over the network with TLS verified by the system's CA bundle.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        ingest_key: str | None,
        timeout: float,
        backoff_base: float = 0.5,
        backoff_cap: float = 300.0,
        jitter: random.Random | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not urls:
            raise InvalidInput("at least one collector URL is needed")
        import httpx  # deferred: httpx imports its CLI's click and rich when installed

        self._httpx = httpx
        for url in urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise InvalidInput("collector URLs must start with http:// or https://")
        self.urls = [base_url(u) for u in urls]
        self.fetch_failure = ""
        """Why the last ``GET /v1/metrics`` found no specs, naming the URLs it tried."""
        self._registry: dict[str, tuple[str, list[Any]]] = {}
        """Per collector URL, the ETag and the spec list it last served."""
        self.timeout = timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._current = 0
        self._jitter = jitter or random.Random()
        headers = {"Content-Type": "application/json", "User-Agent": "deniable-client"}
        if ingest_key:
            headers["Authorization"] = f"Bearer {ingest_key}"
        self._http = httpx.Client(
            headers=headers,
            timeout=timeout,
            trust_env=False,
            verify=_tls_context() if transport is None else True,
            transport=transport,
        )

    @property
    def url(self) -> str:
        """The collector URL the next attempt goes to."""
        return self.urls[self._current]

    def _fail_over(self) -> None:
        """Send the next attempt to the next URL (round robin)."""
        self._current = (self._current + 1) % len(self.urls)

    def send(self, body: bytes, count: int, timeout: float | None = None) -> SendResult:
        """One attempt to deliver a batch of ``count`` reports encoded as ``body``."""
        url = self.url
        try:
            response = self._http.post(
                f"{url}{REPORTS_PATH}", content=body, timeout=timeout or self.timeout
            )
        except self._httpx.HTTPError as exc:
            self._fail_over()
            return SendResult("retry", reason=type(exc).__name__, url=url)
        status = response.status_code
        if 200 <= status < 300:
            try:
                answer = response.json()
                accepted = int(answer.get("accepted", count))
                duplicates = int(answer.get("duplicates", 0))
            except (ValueError, TypeError, AttributeError):
                accepted, duplicates = count, 0
            return SendResult("accepted", accepted, duplicates, status, url=url)
        document = _problem_document(response) if status in FINAL_STATUSES else None
        if document is not None or status == 413:
            detail = document["detail"] if document is not None else "too large"
            return SendResult(
                "rejected",
                status=status,
                reason=str(detail)[:200],
                bad_indices=_bad_indices(detail) if status == 422 else None,
                url=url,
            )
        self._fail_over()
        foreign = " (not the collector's problem document)" if status in FINAL_STATUSES else ""
        return SendResult(
            "retry",
            status=status,
            reason=f"HTTP {status}{foreign}",
            retry_after=parse_retry_after(response.headers.get("Retry-After")),
            url=url,
        )

    def backoff(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after ``failures`` consecutive failed attempts.

        Failing over to a URL not yet tried in this round costs nothing; after a full
        round, full jitter: uniform in [0, min(cap, base * 2^rounds)]. ``Retry-After``
        is a floor.
        """
        n = len(self.urls)
        delay = 0.0
        if failures % n == 0:
            rounds = failures // n - 1
            delay = self._jitter.uniform(0, min(self.backoff_cap, self.backoff_base * 2**rounds))
        if retry_after is not None:
            delay = max(delay, retry_after)
        return delay

    def fetch_metrics(
        self, timeout: float | None = None, *, fail_over: bool = True
    ) -> list[dict[str, Any]] | None:
        """The metric specs from the first collector that answers, or ``None`` (and why, in
        :attr:`fetch_failure`). Uploads go on to the URL that answered, unless ``fail_over``
        is false (a look that must not change where uploads go)."""
        failures = []
        start = self._current
        for step in range(len(self.urls)):
            url = self.urls[(start + step) % len(self.urls)]
            try:
                metrics = self._get_metrics(url, timeout or self.timeout)
                if isinstance(metrics, list):
                    if fail_over:
                        self._current = (start + step) % len(self.urls)
                    return metrics
                why = f"HTTP {metrics}"
            except (self._httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                why = type(exc).__name__
            failures.append(f"GET {url}{METRICS_PATH}: {why}")
            log.warning("could not fetch metric specs with GET %s%s: %s", url, METRICS_PATH, why)
        self.fetch_failure = "; ".join(failures)
        return None

    def _get_metrics(self, url: str, timeout: float) -> list[Any] | int:
        """``GET /v1/metrics`` from ``url``: the served list, or the status of a failed answer.

        The list last served by ``url`` is kept with its ETag and asked for again with
        ``If-None-Match``, so an unchanged registry costs the collector a 304, not a rendering.
        """
        known = self._registry.get(url)
        headers = {"If-None-Match": known[0]} if known else {}
        response = self._http.get(f"{url}{METRICS_PATH}", timeout=timeout, headers=headers)
        if response.status_code == 304 and known:
            return known[1]
        if response.status_code != 200:
            return response.status_code
        metrics = response.json()["metrics"]
        if not isinstance(metrics, list):
            return response.status_code
        etag = response.headers.get("etag")
        if etag:
            self._registry[url] = (etag, metrics)
        return metrics

    def close(self) -> None:
        """Release the HTTP connections."""
        self._http.close()
