"""Upload to the collector over HTTP: one attempt at a time, failover between URLs, backoff.

The transport sends bodies the :mod:`.wire` module builds to its two endpoints
(``POST /v1/reports``, ``GET /v1/metrics``) and classifies each answer:

- accepted: a 2xx whose body is the collector's acknowledgement, ``{"accepted": a,
  "duplicates": d}`` with whole numbers 0 <= a, d <= the batch's size;
- refused for good: only a 400 or 422 that is the collector's own refusal judges the batch
  itself (the client drops only the reports a 422 names, when it names them); a 413, from the
  collector or a proxy, says the batch is too large (the client splits it rather than
  dropping it). The collector's refusal is recognised by its structure
  (:func:`collector_refusal`): served as ``application/json``, a JSON object whose only
  member is ``detail``, a non-empty string or a non-empty list of ``{"index", "reason"}``
  objects. A gateway's RFC 9457 document (``application/problem+json``, with ``type``,
  ``title`` or ``status`` beside its ``detail``) is not it, whatever its text says;
- worth a retry on the next URL: network errors, an answer past the deadline or the size cap,
  5xx, 408 and 429 (honouring ``Retry-After``), and every other answer. A 401, 403, 404 or 405
  says the endpoint or the credential is wrong *now* (a wrong path, a misrouting proxy, an
  ingest key rotated before the app caught up), not that the reports are: they are kept
  (:attr:`SendResult.refused`). So is a 400 or 422 that is not the collector's refusal, such
  as a proxy's HTML page ("plain HTTP request sent to HTTPS port"), and a 2xx that is not its
  acknowledgement (a captive portal's page, negative counts): it says nothing about the
  reports, and dropping them would waste the privacy budget that made them.

Every exchange is bounded as a whole, not per read (:mod:`.exchange`): one upload attempt by
its ``timeout``, one fetch of the specs by its ``timeout`` over all URLs, and the answers by
size (:data:`MAX_SPECS_BYTES`, :data:`MAX_UPLOAD_ANSWER_BYTES`).

Retry pacing uses exponential backoff with full jitter. It never raises a network error to
its caller.

A collector URL is the server's base (``https://telemetry.example.com``): the API's ``/v1``
is added here. A URL that ends in ``/v1`` (a common slip when copying an endpoint) is taken
without it, with a warning that names it.
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import random
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from .errors import InvalidInput
from .exchange import Answer, AnswerTooLarge, DeadlineExceeded, exchange
from .wire import METRICS_PATH, REPORTS_PATH

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("deniable.client")

BACKOFF_BASE = 0.5
"""The default first backoff window, in seconds (``Client(backoff_base=...)``)."""
BACKOFF_CAP = 30.0
"""The default widest backoff window, in seconds (``Client(backoff_cap=...)``): once the
collector is back, reports go within this long (half of it on average), while a fleet of
devices still spreads its retries over it rather than arriving at once."""
MAX_RETRY_AFTER = 3600.0
"""The longest ``Retry-After`` the client obeys, in seconds."""
FINAL_STATUSES = frozenset({400, 413, 422})
"""The answers that may judge the batch itself (400 and 422 only when they are the collector's
refusal); any other 4xx keeps the reports for a retry."""
MAX_SPECS_BYTES = 4 * 1024 * 1024
"""The largest ``GET /v1/metrics`` answer the client reads (4 MiB, thousands of specs); a
larger one is refused and the specs already accepted stay in use."""
MAX_UPLOAD_ANSWER_BYTES = 1024 * 1024
"""The largest answer to an upload the client reads (a 422 naming 1000 reports is far less)."""
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
        """A retry after an answer that blames the endpoint, the credential or something on the
        way (a 401, 403, 404..., a 400 that is not the collector's, a 2xx that is not its
        acknowledgement), rather than the collector being busy or down."""
        return (
            self.kind == "retry"
            and self.status is not None
            and self.status < 500
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


def collector_refusal(answer: Answer) -> str | list[Any] | None:
    """The ``detail`` of the collector's own refusal, or ``None`` if ``answer`` is not one.

    The collector answers every refusal as ``application/json`` with one member, ``detail``:
    a message, or (a 422 about reports) a list of ``{"index": i, "reason": ...}``. Anything
    else did not come from it (a proxy's HTML page, a gateway's ``application/problem+json``
    with ``type`` and ``title``) and judges nothing about the reports. Recognised by structure,
    never by the message's text.
    """
    if answer.media_type != "application/json":
        return None
    try:
        document = json.loads(answer.body)
    except ValueError:
        return None
    if not isinstance(document, dict) or set(document) != {"detail"}:
        return None
    detail = document["detail"]
    if isinstance(detail, str) and detail:
        return detail
    if isinstance(detail, list) and detail and all(_is_report_problem(i) for i in detail):
        return detail
    return None


def _is_report_problem(item: Any) -> bool:
    """Whether ``item`` has the shape of one entry of the collector's 422 list."""
    return (
        isinstance(item, dict)
        and set(item) == {"index", "reason"}
        and (item["index"] is None or _is_count(item["index"]))
        and isinstance(item["reason"], str)
    )


def _is_count(value: object) -> TypeGuard[int]:
    """A whole number >= 0 (a JSON ``true`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def acknowledgement(answer: Answer, count: int) -> tuple[int, int] | None:
    """``(accepted, duplicates)`` from the collector's 2xx answer to a batch of ``count``
    reports, or ``None`` if the body is not that acknowledgement (a captive portal's page,
    negative or fractional counts, counts above the batch's size)."""
    try:
        document = json.loads(answer.body)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    accepted, duplicates = document.get("accepted"), document.get("duplicates")
    if not (_is_count(accepted) and _is_count(duplicates)):
        return None
    if accepted > count or duplicates > count:
        return None
    return accepted, duplicates


def _bad_indices(detail: Any) -> frozenset[int] | None:
    """The report indices a 422 names (``[{"index": i, "reason": ...}, ...]``), if it names them."""
    if not isinstance(detail, list) or not detail:
        return None
    indices: list[int] = []
    for item in detail:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool):
            return None
        indices.append(index)
    return frozenset(indices)


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
        backoff_base: float = BACKOFF_BASE,
        backoff_cap: float = BACKOFF_CAP,
        jitter: random.Random | None = None,
        transport: httpx.BaseTransport | None = None,
        upload_path: str = REPORTS_PATH,
    ) -> None:
        if not urls:
            raise InvalidInput("at least one collector URL is needed")
        import httpx  # deferred: httpx imports its CLI's click and rich when installed

        self._httpx = httpx
        for url in urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise InvalidInput("collector URLs must start with http:// or https://")
        self.urls = [base_url(u) for u in urls]
        self.upload_path = upload_path
        """Where :meth:`send` posts (the collector's reports route, or the shuffler's)."""
        self.fetch_failure = ""
        """Why the last ``GET /v1/metrics`` found no specs, naming the URLs it tried."""
        self.closed = False
        """Whether :meth:`close` ran: an exchange it cut short is no failure to report."""
        self._registry: dict[str, tuple[str, list[Any]]] = {}
        """Per collector URL, the ETag and the spec list it last served."""
        self.timeout = timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._current = 0
        self._jitter = jitter or random.Random()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "deniable-client",
            "Accept-Encoding": "identity",
            "Connection": "close",  # one connection per exchange, for its watchdog (.exchange)
        }
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
        """One attempt to deliver a batch of ``count`` reports encoded as ``body``, over in at
        most ``timeout`` seconds (default :attr:`timeout`) whatever the server does."""
        url = self.url
        try:
            answer = exchange(
                self._http,
                "POST",
                f"{url}{self.upload_path}",
                seconds=timeout or self.timeout,
                limit=MAX_UPLOAD_ANSWER_BYTES,
                content=body,
            )
        except (self._httpx.HTTPError, AnswerTooLarge, DeadlineExceeded) as exc:
            self._fail_over()
            return SendResult("retry", reason=_why(exc), url=url)
        status = answer.status
        if 200 <= status < 300:
            counts = acknowledgement(answer, count)
            if counts is not None:
                return SendResult("accepted", *counts, status=status, url=url)
        detail = collector_refusal(answer) if status in FINAL_STATUSES else None
        if detail is not None or status == 413:
            return SendResult(
                "rejected",
                status=status,
                reason=str(detail if detail is not None else "too large")[:200],
                bad_indices=_bad_indices(detail) if status == 422 else None,
                url=url,
            )
        self._fail_over()
        foreign = ""
        if status in FINAL_STATUSES:
            foreign = " (not the collector's problem document)"
        elif status < 300:
            foreign = " (not the collector's acknowledgement)"
        return SendResult(
            "retry",
            status=status,
            reason=f"HTTP {status}{foreign}",
            retry_after=parse_retry_after(answer.headers.get("Retry-After")),
            url=url,
        )

    def backoff(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after ``failures`` consecutive failed attempts.

        Failing over to a URL not yet tried in this round costs nothing; after the r-th
        full round (r = 1, 2, ...), full jitter: uniform in [0, min(cap, base * 2^(r-1))],
        windows of 0.5, 1, 2, 4, 8, 16, then 30 s with the defaults. ``Retry-After`` is a
        floor.
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
        self, deadline: float | None = None, *, fail_over: bool = True
    ) -> list[dict[str, Any]] | None:
        """The metric specs from the first collector that answers, or ``None`` (and why, in
        :attr:`fetch_failure`). Over by ``deadline`` (monotonic; default :attr:`timeout`
        from now) whatever the servers do: each URL not yet tried gets an equal share of the
        time left. Uploads go on to the URL that answered, unless ``fail_over`` is false (a
        look that must not change where uploads go)."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        failures = []
        start = self._current
        for step in range(len(self.urls)):
            url = self.urls[(start + step) % len(self.urls)]
            share = (deadline - time.monotonic()) / (len(self.urls) - step)
            try:
                if share <= 0:
                    raise DeadlineExceeded("no time left")
                metrics = self._get_metrics(url, share)
                if isinstance(metrics, list):
                    if fail_over:
                        self._current = (start + step) % len(self.urls)
                    return metrics
                why = f"HTTP {metrics}"
            except (
                self._httpx.HTTPError,
                AnswerTooLarge,
                DeadlineExceeded,
                ValueError,
                KeyError,
                TypeError,
            ) as exc:
                why = _why(exc)
            if self.closed:
                self.fetch_failure = "the client closed"
                return None
            failures.append(f"GET {url}{METRICS_PATH}: {why}")
            log.warning("could not fetch metric specs with GET %s%s: %s", url, METRICS_PATH, why)
        self.fetch_failure = "; ".join(failures)
        return None

    def _get_metrics(self, url: str, seconds: float) -> list[Any] | int:
        """``GET /v1/metrics`` from ``url`` within ``seconds``: the served list, or the status
        of a failed answer.

        The list last served by ``url`` is kept with its ETag and asked for again with
        ``If-None-Match``, so an unchanged registry costs the collector a 304, not a rendering.
        """
        known = self._registry.get(url)
        headers = {"If-None-Match": known[0]} if known else {}
        answer = exchange(
            self._http,
            "GET",
            f"{url}{METRICS_PATH}",
            seconds=seconds,
            limit=MAX_SPECS_BYTES,
            headers=headers,
        )
        if answer.status == 304 and known:
            return known[1]
        if answer.status != 200:
            return answer.status
        metrics = json.loads(answer.body)["metrics"]
        if not isinstance(metrics, list):
            return answer.status
        etag = answer.headers.get("etag")
        if etag:
            self._registry[url] = (etag, metrics)
        return metrics

    def get(self, path: str, seconds: float, limit: int) -> Answer:
        """``GET path`` from the current URL within ``seconds``, its answer capped at ``limit``
        bytes (raises httpx errors, :class:`AnswerTooLarge`, :class:`DeadlineExceeded`)."""
        return exchange(self._http, "GET", f"{self.url}{path}", seconds=seconds, limit=limit)

    def close(self) -> None:
        """Release the HTTP connections (an exchange under way in another thread fails)."""
        self.closed = True
        self._http.close()


def _why(exc: Exception) -> str:
    """A failed exchange in a few words: the deadline or the cap it broke, or the error's type."""
    if isinstance(exc, DeadlineExceeded | AnswerTooLarge):
        return str(exc)
    return type(exc).__name__
