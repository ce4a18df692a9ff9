"""Delivery: uploads committed reports in batches and removes them only once the collector answers.

The rules for each answer (the transport classifies them):

- accepted: the batch leaves the outbox (``delivered``; ``duplicates`` the collector held);
- 413 (too large, from the collector or a proxy): split, not dropped (:meth:`Uploader._split_after_413`);
- 400 or 422 that is the collector's own refusal: dropped (``dropped_rejected``), only
  the reports a 422 names when it names them;
- anything else (network errors, an attempt past its deadline, 5xx, 408, 429, every other
  4xx, a 400 or 422 with another body, a 2xx that is not the collector's acknowledgement):
  the reports stay and are retried on the next URL with backoff (``retries``; ``refused`` for
  an answer that blames the URL, the ingest key or a proxy).

A batch in flight is never trimmed for a full outbox (:meth:`.Outbox.fly`): the collector may
be storing it, and a report it acknowledges is ``delivered``, never dropped.

Network trouble is never raised to the caller.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator

from .outbox import Chunk, Outbox
from .problems import Problems
from .stats import Counters
from .transport import SendResult, Transport
from .wire import batch_body, join_reports, split_reports

log = logging.getLogger("deniable.client")

MAX_BODY_BYTES = 900_000
"""Upload bodies stay below the collector's 1 MiB limit."""
MAX_BATCH = 1000
"""The most reports one upload may hold (the collector's limit)."""


class UploadOutcome(enum.Enum):
    """What one upload attempt left behind."""

    EMPTY = "empty"
    """The outbox is empty now."""
    MORE = "more"
    """Reports remain, and the next attempt may go at once."""
    FAILED = "failed"
    """The attempt failed (wait out the backoff), or another upload held on past the deadline."""


class Uploader:
    """Sends the outbox's oldest reports, one batch at a time (serialized by a lock).

    ``batch_size`` is the most reports per upload; a 413 lowers the cap for the life of the
    process. :meth:`nudge` wakes the background thread (:meth:`run`) when a full batch waits
    or ``flush_interval`` seconds have passed. ``problems`` hears of reports the collector
    refused (dropped), of answers that blame the URL or the ingest key (kept), and of a
    collector that cannot be reached (kept): since when, by ``now`` (the client's clock), and
    when an upload last succeeded.
    """

    def __init__(
        self,
        outbox: Outbox,
        transport: Transport,
        counters: Counters,
        problems: Problems,
        *,
        batch_size: int,
        flush_interval: float,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self._outbox = outbox
        self._transport = transport
        self._counters = counters
        self._problems = problems
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._batch_cap = batch_size
        self._largest_accepted = 0
        self._failures = 0
        self._warned_refused = False
        self._not_before = 0.0
        self._now = now or (lambda: dt.datetime.now(dt.UTC))
        self._down_since: dt.datetime | None = None
        self._last_delivery: dt.datetime | None = None
        self._last_nudge = time.monotonic()
        self._lock = threading.Lock()
        self._wake = threading.Event()

    @property
    def batch_cap(self) -> int:
        """The most reports an upload holds now (``batch_size``, or less after a 413)."""
        return self._batch_cap

    # -- one attempt -----------------------------------------------------------------------

    def upload_once(self, deadline: float | None) -> UploadOutcome:
        """One upload attempt of the oldest batch (``deadline`` on the monotonic clock)."""
        wait = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._lock.acquire(timeout=wait):
            return UploadOutcome.FAILED
        try:
            return self._upload_batch(deadline)
        finally:
            self._lock.release()

    def _upload_batch(self, deadline: float | None) -> UploadOutcome:
        """The body of :meth:`upload_once`, under the upload lock: the oldest chunks up to the
        batch cap fly (no trim for a full outbox takes them meanwhile) until the answer is
        dealt with; a trim that waited for them then drops them if they are still there."""
        batch = self._outbox.peek(self._batch_cap, MAX_BODY_BYTES)
        if not batch:
            return UploadOutcome.EMPTY
        self._outbox.fly(batch)
        try:
            return self._send_batch(batch, deadline)
        finally:
            dropped = self._outbox.land()
            if dropped:
                with self._counters.lock:
                    self._counters.dropped_queue_full += dropped
                log.warning("outbox full: dropped the %d oldest reports", dropped)

    def _send_batch(self, batch: list[Chunk], deadline: float | None) -> UploadOutcome:
        """Send a peeked batch and act on the answer. A chunk stored before the cap shrank is
        sent a leading slice at a time (its reports keep their ids and order)."""
        sent = batch
        if batch[0].count > self._batch_cap:
            head = split_reports(batch[0].reports)[: self._batch_cap]
            sent = [Chunk(batch[0].seq, len(head), join_reports(head))]
        timeout = None
        if deadline is not None:
            timeout = max(0.05, min(self._transport.timeout, deadline - time.monotonic()))
        count = sum(c.count for c in sent)
        result = self._transport.send(batch_body(c.reports for c in sent), count, timeout)
        if result.kind == "retry":
            self._retry_later(result, count)
            return UploadOutcome.FAILED
        self._failures = 0
        self._warned_refused = False
        self._down_since = None
        self._problems.clear("refused")
        self._problems.clear("unreachable")
        if result.kind == "rejected" and result.status == 413:
            return self._split_after_413(batch, count)
        bad = (result.bad_indices or frozenset()) & frozenset(range(count))
        if result.kind == "rejected" and 0 < len(bad) < count:
            return self._drop_named(batch, bad, count, result)
        removed = self._forget(batch, count)
        counters = self._counters
        if result.kind == "accepted":
            self._last_delivery = self._now()
        with counters.lock:
            if result.kind == "accepted":
                self._largest_accepted = max(self._largest_accepted, count)
                counters.delivered += removed
                counters.duplicates += min(result.duplicates, removed)
            else:
                counters.dropped_rejected += removed
        if result.kind == "rejected":
            self._note_dropped(result)
            log.warning(
                "collector refused a batch of %d reports (HTTP %s): %s; dropped it",
                count,
                result.status,
                result.reason,
            )
        return self._what_remains()

    def _note_dropped(self, result: SendResult) -> None:
        """List the reports dropped so far, and the last reason, among the problems."""
        with self._counters.lock:
            dropped = self._counters.dropped_rejected
        self._problems.note(
            "rejected",
            f"the collector at {result.url} refused {dropped} reports so far, which were"
            f" dropped (last: HTTP {result.status}: {result.reason})",
        )

    def _note_unreachable(self, result: SendResult, delay: float) -> None:
        """List a collector that is down, busy or out of reach among the problems: since when
        (the first failure of this streak), why, when an upload last succeeded, and when the
        next attempt goes."""
        now = self._now()
        if self._down_since is None:
            self._down_since = now
        cause = (
            f"could not be reached ({result.reason})"
            if result.status is None
            else f"answered {result.reason}"
        )
        last = (
            f"at {_moment(self._last_delivery)}"
            if self._last_delivery is not None
            else "none since this client started"
        )
        self._problems.note(
            "unreachable",
            f"collector unreachable since {_moment(self._down_since)}: {result.url} {cause}"
            f" ({self._failures} attempts failed in a row); last successful upload: {last};"
            f" reports kept for a retry: {len(self._outbox):,}; next attempt at about"
            f" {_moment(now + dt.timedelta(seconds=delay))}",
        )

    def _what_remains(self) -> UploadOutcome:
        """:attr:`UploadOutcome.MORE` if reports still wait, else :attr:`UploadOutcome.EMPTY`."""
        return UploadOutcome.MORE if len(self._outbox) else UploadOutcome.EMPTY

    def _drop_named(
        self, batch: list[Chunk], bad: frozenset[int], count: int, result: SendResult
    ) -> UploadOutcome:
        """A 422 named some of the ``count`` reports: drop those, keep the rest for a resend."""
        dropped = self._outbox.drop_reports(batch, bad)
        with self._counters.lock:
            self._counters.dropped_rejected += dropped
        self._note_dropped(result)
        log.warning(
            "collector refused %d of a batch of %d reports (HTTP %s): %s;"
            " dropped those, resending the rest",
            dropped,
            count,
            result.status,
            result.reason,
        )
        return UploadOutcome.MORE

    def _retry_later(self, result: SendResult, count: int) -> None:
        """After a failed attempt: back off, count it, and say why (a refusal once a streak)."""
        self._failures += 1
        delay = self._transport.backoff(self._failures, result.retry_after)
        self._not_before = time.monotonic() + delay
        with self._counters.lock:
            self._counters.retries += 1
            self._counters.refused += int(result.refused)
        if result.refused:
            self._down_since = None
            self._problems.clear("unreachable")
            self._problems.note(
                "refused",
                f"the collector at {result.url} answers uploads with {result.reason}, which"
                " blames the URL, the ingest key or a proxy; reports are kept and retried",
            )
        else:
            self._note_unreachable(result, delay)
        if result.refused and not self._warned_refused:
            self._warned_refused = True
            log.warning(
                "collector answered %s, which blames the URL, the ingest key or a proxy on the"
                " way rather than the reports; keeping a batch of %d reports and retrying with"
                " backoff",
                result.reason,
                count,
            )
            return
        log.info("upload failed (%s); retrying in %.2f s", result.reason or result.status, delay)

    def _forget(self, batch: list[Chunk], count: int) -> int:
        """Remove the first ``count`` reports of a peeked batch (all of it, or a leading slice
        of its one chunk); returns how many were removed (all of them: no trim takes reports
        in flight)."""
        if count == sum(c.count for c in batch):
            return self._outbox.remove(c.seq for c in batch)
        return self._outbox.drop_reports(batch, frozenset(range(count)))

    def _split_after_413(self, batch: list[Chunk], count: int) -> UploadOutcome:
        """The collector (or a proxy before it) found ``count`` reports too large: halve.

        The batch cap drops to half the refused batch, so the same reports go again in
        halves (ids unchanged: resends stay idempotent) and halving goes on while 413s do.
        The cap then stays reduced for the life of the process, and new reports are stored
        in chunks of that size, so later uploads do not pay a 413 each; a new process starts
        again from ``batch_size``. A single report refused on its own is dropped; its size
        says little about batches, so the cap goes back to the largest batch accepted so far
        (one huge report does not leave the client sending one report per request, and a
        limit no report fits does not cost a new round of halving per report).
        """
        if count > 1:
            self._batch_cap = max(1, count // 2)
            log.info(
                "collector refused %d reports as too large (HTTP 413); sending at most %d"
                " per batch from now on",
                count,
                self._batch_cap,
            )
            return UploadOutcome.MORE
        dropped = self._forget(batch, 1)
        self._batch_cap = max(1, self._largest_accepted)
        with self._counters.lock:
            self._counters.dropped_rejected += dropped
        log.warning("collector refused a single report as too large (HTTP 413); dropped it")
        return self._what_remains()

    # -- until done ------------------------------------------------------------------------

    def upload_all(self, deadline: float | None) -> bool:
        """Upload until the outbox is empty (``True``) or ``deadline`` passes (``False``),
        respecting the retry backoff; never raises."""
        try:
            while True:
                wait = self._not_before - time.monotonic()
                if wait > 0:
                    if deadline is not None and time.monotonic() + wait >= deadline:
                        return False
                    time.sleep(wait)
                if deadline is not None and time.monotonic() >= deadline:
                    return len(self._outbox) == 0
                if self.upload_once(deadline) is UploadOutcome.EMPTY:
                    return True
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        except Exception as exc:
            log.warning("flush failed (%s)", type(exc).__name__)
            return False

    def nudge(self) -> None:
        """After a commit: wake :meth:`run` if a full batch waits or ``flush_interval`` seconds
        have passed since the last wake-up with reports waiting."""
        waiting = len(self._outbox)
        now = time.monotonic()
        if waiting and (
            waiting >= self._batch_size or now - self._last_nudge >= self._flush_interval
        ):
            self._last_nudge = now
            self._wake.set()

    def wake(self) -> None:
        """Wake :meth:`run` now (to see that it must stop)."""
        self._wake.set()

    def run(self, stop: threading.Event, before_round: Callable[[], None]) -> None:
        """The background thread: each wake-up (or ``flush_interval``), call ``before_round``
        (the spec source's refresh), then upload until the outbox is empty or an attempt
        fails; until ``stop``."""
        while not stop.is_set():
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            try:
                before_round()
                while not stop.is_set():
                    wait = self._not_before - time.monotonic()
                    if wait > 0 and stop.wait(wait):
                        return
                    if self.upload_once(None) is UploadOutcome.EMPTY:
                        break
            except Exception as exc:
                if stop.is_set():
                    return  # closing cut the round short: nothing went wrong
                log.warning("upload loop error (%s); continuing", type(exc).__name__)

    @contextlib.contextmanager
    def paused(self, timeout: float) -> Iterator[None]:
        """No upload runs inside the block (waiting at most ``timeout`` seconds for one in
        flight to end), so the outbox and transport can be closed under it."""
        idle = self._lock.acquire(timeout=timeout)
        try:
            yield
        finally:
            if idle:
                self._lock.release()


def _moment(moment: dt.datetime) -> str:
    """A moment as problems show it: UTC, to the second (``2026-03-01T12:00:05Z``)."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
