"""The SDK's entry point: :class:`Client` records values, randomizes them at once, and delivers.

``record()`` validates, checks the privacy budget, randomizes and queues in memory, with no
I/O. A background thread commits the queue with its ledger changes to SQLite in
``state_dir`` at least once a second; another uploads committed reports in batches and
removes them only when the collector acknowledges them. Network trouble is never raised to
the host application.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from .ledger import Ledger, PrivacySpent
from .mechanisms import MAX_EPSILON, MIN_EPSILON, Payload
from .outbox import Chunk, Outbox, Report, split_reports
from .randomness import LocalRandomness, Randomness, ReportIds
from .spec import MetricSpec, period_label
from .transport import SendResult, Transport, encode_batch

log = logging.getLogger("deniable.client")

SPECS_FILE = "metrics.json"
MAX_BODY_BYTES = 900_000
"""Upload bodies stay below the collector's 1 MiB limit."""
MAX_BATCH = 1000
SPEC_REFRESH_SECONDS = 60.0
"""How often, at most, collector-served specs are fetched again (after an unknown metric)."""
SPEC_RETRY_SECONDS = 5.0
"""How often a client with no specs at all tries to fetch them."""
_UUID_BLOCK = 4096
DEFAULT_MAX_EPSILON = 4.0
"""The highest eps a client adopts from a collector unless the app sets ``max_epsilon``.

At eps 4 binary randomized response still lies 1.8% of the time; much above it a report is
all but the true value, so a collector serving such a spec could nearly read its users'
answers. An app that means a higher eps says so with ``max_epsilon`` (up to 20)."""


@dataclass(frozen=True)
class ClientStats:
    """A snapshot of the client's counters (counts of reports or ``record()`` calls, and of
    refused specs).

    Every admitted report ends in exactly one of ``delivered``, ``dropped_queue_full`` and
    ``dropped_rejected``, or is still ``queued``; ``duplicates`` is the part of ``delivered``
    the collector already held (a resend after a lost acknowledgement).
    """

    recorded: int
    admitted: int
    over_budget: int
    unknown_metric: int
    queued: int
    delivered: int
    duplicates: int
    dropped_queue_full: int
    dropped_rejected: int
    retries: int
    refused: int
    """Upload attempts answered 401, 403, 404 or another 4xx that blames the URL, the ingest
    key or a proxy rather than the reports (a 400 or 422 counts here when it is not the
    collector's JSON problem document): they are kept and retried (each also counts in
    ``retries``)."""
    specs_refused: int = 0
    """Specs a collector served that this client refused (each name and fingerprint once): a
    change to a spec it had accepted, or an eps above ``max_epsilon``."""

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return asdict(self)


class _Metric:
    """Per-metric state precomputed once, so ``record()`` does dictionary lookups only."""

    __slots__ = (
        "epsilon",
        "fingerprint",
        "index",
        "kind",
        "memo_keys",
        "memoized",
        "name",
        "randomize",
        "spec",
    )

    def __init__(self, spec: MetricSpec, memoized: bool) -> None:
        self.spec = spec
        self.name = spec.name
        self.fingerprint = spec.fingerprint
        self.epsilon = spec.epsilon
        self.kind = spec.period
        self.memoized = memoized
        self.randomize = spec.randomizer.randomize
        self.memo_keys: list[str | None] = [None] * spec.k  # HMACs, made on first use
        self.index: dict[Any, int] = (
            {} if spec.type == "boolean" else {c: i for i, c in enumerate(spec.categories)}
        )

    def index_of(self, value: Any) -> int:
        """The category index; ``ValueError`` names the metric, never the value."""
        if self.spec.type == "boolean":
            if value is True:
                return 1
            if value is False:
                return 0
        elif type(value) is str:
            index = self.index.get(value)
            if index is not None:
                return index
        return self.spec.index_of(value)


def _verified_specs(raw: Sequence[Any]) -> list[MetricSpec]:
    """Specs from the collector's JSON, keeping only those whose fingerprint matches ours."""
    specs: list[MetricSpec] = []
    for item in raw:
        try:
            # a served null (e.g. "categories": null for a boolean) means the field is absent
            spec = MetricSpec.from_dict({k: v for k, v in item.items() if v is not None})
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("ignoring a metric spec the collector served: %s", exc)
            continue
        if item.get("fingerprint") != spec.fingerprint:
            log.warning(
                "metric %s: the served fingerprint does not match the spec; refusing it", spec.name
            )
            continue
        if any(s.name == spec.name for s in specs):
            log.warning("metric %s is served twice; keeping the first spec", spec.name)
            continue
        specs.append(spec)
    return specs


class Client:
    """Records values as randomized reports and delivers them to a deniable collector.

    Thread-safe; ``record()`` never does I/O and never raises for network reasons.
    Use it as a context manager, or call :meth:`close`, so the last reports are kept.

    ``collector_url`` is one URL or several (tried in turn on failure). ``state_dir`` holds
    the outbox, the ledger, the memo and its secret, and the cached specs. ``metrics``: the
    specs to record; ``None`` fetches them from ``GET /v1/metrics`` (cached for offline
    starts). ``max_reports_per_period`` and ``lifetime_epsilon`` bound what each metric may
    send; ``memoize`` (``True`` or a set of metric names) turns on RAPPOR's permanent
    randomized response. ``clock`` and ``randomness`` are for tests (simulated periods,
    seeded draws); ``persist_interval``, ``backoff_base`` and ``backoff_cap`` (seconds)
    tune durability and retry pacing.

    The device, not the collector, guards its users' privacy. ``max_epsilon`` (default
    :data:`DEFAULT_MAX_EPSILON`, 4) is the highest eps this client accepts: a spec passed in
    ``metrics`` above it raises ``ValueError``, and a served one above it is refused. A spec
    once accepted from a collector (fetched now or cached in ``state_dir`` by an earlier run)
    is never replaced by a different one with the same name: a changed spec is refused and
    reports keep the one accepted first. New metrics a collector serves within the ceiling
    are adopted. Specs passed in ``metrics`` are the only ones used (none is fetched). Each
    refused spec is logged at ERROR once and counted in ``ClientStats.specs_refused``.

    A batch answered 413 (too large) is split, not dropped: see :meth:`_split_after_413`.
    Only a single report that is too large on its own is dropped (counted in
    ``dropped_rejected``), as is a batch the collector itself refuses with 400 or 422 (only
    the reports a 422 names, when it names them); "the collector itself" means its JSON
    problem document, ``{"detail": ...}``. Any other 4xx, and a 400 or 422 with another body
    (a proxy's HTML page), blames the URL, the ingest key or something on the way, not the
    reports: they stay queued and are retried on the next URL with backoff, so a client
    restarted with the right URL or key delivers them.

    One client at a time may use a ``state_dir``: a second one (in this process or another)
    raises :class:`~deniable.client.outbox.StateDirInUseError` (a ``RuntimeError``), since two
    would each spend the same privacy budget and draw their own memoized answers. The lock
    is an ``flock`` released by :meth:`close` or by the OS when the process dies; without
    ``fcntl`` (Windows) there is no lock and one client per ``state_dir`` is the app's duty.
    Make clients after ``os.fork()``: a child inherits no background threads (it would
    deliver nothing) and shares the parent's SQLite connection and lock.
    """

    def __init__(
        self,
        collector_url: str | Sequence[str],
        *,
        state_dir: str | Path,
        ingest_key: str | None = None,
        metrics: Sequence[MetricSpec] | None = None,
        max_reports_per_period: int = 1,
        lifetime_epsilon: float | None = None,
        max_epsilon: float = DEFAULT_MAX_EPSILON,
        memoize: bool | Collection[str] = False,
        batch_size: int = 1000,
        flush_interval: float = 1.0,
        max_queue: int = 100_000,
        clock: Callable[[], dt.datetime] | None = None,
        randomness: Randomness | None = None,
        timeout: float = 10.0,
        persist_interval: float = 0.5,
        backoff_base: float = 0.5,
        backoff_cap: float = 300.0,
    ) -> None:
        urls = [collector_url] if isinstance(collector_url, str) else list(collector_url)
        if isinstance(memoize, str):
            memoize = {memoize}
        if not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size must be in 1..{MAX_BATCH}")
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        if not MIN_EPSILON <= max_epsilon <= MAX_EPSILON:
            raise ValueError(f"max_epsilon must be in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]")
        if not 0 < persist_interval <= 1.0:
            raise ValueError("persist_interval must be in (0, 1] seconds")
        if not min(flush_interval, timeout, backoff_base, backoff_cap) > 0:
            raise ValueError("flush_interval, timeout, backoff_base and backoff_cap must be > 0")
        self._state_dir = Path(state_dir)
        self._batch_size = batch_size
        self._batch_cap = batch_size
        self._largest_accepted = 0
        self._flush_interval = flush_interval
        self._persist_interval = persist_interval
        self._max_queue = max_queue
        self._clock = clock
        self._rng = randomness or LocalRandomness()
        self._ids = ReportIds(_UUID_BLOCK)
        self._memoize = memoize
        self._max_epsilon = max_epsilon
        self._accepted: dict[str, MetricSpec] = {}
        self._refused_specs: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()
        self._upload_lock = threading.Lock()
        self._pending: deque[Report] = deque()
        self._labels_from = self._labels_until = 0.0
        self._labels: dict[str, str] = {}
        self._counts = dict.fromkeys(
            (
                "admitted",
                "over_budget",
                "unknown_metric",
                "delivered",
                "duplicates",
                "dropped_queue_full",
                "dropped_rejected",
                "retries",
                "refused",
                "specs_refused",
            ),
            0,
        )
        self._committing = 0
        self._failures = 0
        self._warned_refused = False
        self._not_before = 0.0
        self._closed = False
        self._warned_unknown: set[str] = set()

        with contextlib.ExitStack() as undo:  # on failure, free the state_dir and connections
            self._transport = Transport(
                urls,
                ingest_key=ingest_key,
                timeout=timeout,
                backoff_base=backoff_base,
                backoff_cap=backoff_cap,
            )
            undo.callback(self._transport.close)
            self._outbox = Outbox(self._state_dir)
            undo.callback(self._outbox.close)
            self._ledger = Ledger(
                self._outbox.secret(),
                max_reports_per_period=max_reports_per_period,
                lifetime_epsilon=lifetime_epsilon,
            )
            self._ledger.load(*self._outbox.load_ledger())
            self._strict = metrics is not None
            self._metrics: dict[str, _Metric] = {}
            self._refresh_specs = False
            self._next_fetch = 0.0
            if metrics is not None:
                self._install(self._within_app_ceiling(metrics))
            elif self._load_cached_specs():
                self._refresh_specs = True
            else:
                self._fetch_specs()
            undo.pop_all()

        self._stop = threading.Event()
        self._wake = threading.Event()
        self._persister = threading.Thread(
            target=self._persist_loop, name="deniable-persist", daemon=True
        )
        self._uploader = threading.Thread(
            target=self._upload_loop, name="deniable-upload", daemon=True
        )
        self._persister.start()
        self._uploader.start()
        atexit.register(self._persist)

    # -- metric specs -------------------------------------------------------------------

    def _install(self, specs: list[MetricSpec]) -> None:
        """Make ``specs`` the ones ``record()`` uses (one lookup per call)."""
        if len({s.name for s in specs}) != len(specs):
            raise ValueError("metric names must be distinct")
        memoize = self._memoize
        self._metrics = {
            s.name: _Metric(
                s, memoize is True or (not isinstance(memoize, bool) and s.name in memoize)
            )
            for s in specs
        }

    def _within_app_ceiling(self, metrics: Sequence[MetricSpec]) -> list[MetricSpec]:
        """The specs the app passed; one above ``max_epsilon`` is the app's own mistake,
        raised at once rather than sent."""
        specs = list(metrics)
        for spec in specs:
            if spec.epsilon > self._max_epsilon:
                raise ValueError(
                    f"metric {spec.name}: epsilon {spec.epsilon:g} is above max_epsilon"
                    f" {self._max_epsilon:g}; pass a higher max_epsilon to record it"
                )
        return specs

    def _within_ceiling(self, spec: MetricSpec) -> bool:
        """Whether a spec that came from a collector is within ``max_epsilon``; refuses it if not."""
        if spec.epsilon <= self._max_epsilon:
            return True
        self._refuse(spec, f"its epsilon is above max_epsilon {self._max_epsilon:g}")
        return False

    def _refuse(self, spec: MetricSpec, why: str) -> None:
        """Refuse a served spec: count it and log at ERROR, once per name and fingerprint."""
        with self._lock:
            key = (spec.name, spec.fingerprint)
            if key in self._refused_specs:
                return
            self._refused_specs.add(key)
            self._counts["specs_refused"] += 1
        log.error(
            "metric %s: refusing the spec the collector served (fingerprint %s, epsilon %g): %s",
            spec.name,
            spec.fingerprint,
            spec.epsilon,
            why,
        )

    def _install_accepted(self) -> None:
        """Record with the accepted specs that are within ``max_epsilon`` (the app may have
        lowered it since a spec was cached)."""
        self._install([s for s in self._accepted.values() if self._within_ceiling(s)])

    def _load_cached_specs(self) -> bool:
        """Accept and install the specs cached by an earlier run (so an app that starts
        offline still records, and a collector cannot change them later)."""
        path = self._state_dir / SPECS_FILE
        if not path.exists():
            return False
        try:
            specs = _verified_specs(json.loads(path.read_text()))
        except (ValueError, TypeError, AttributeError):
            log.warning("the cached metric specs in %s are unreadable", path)
            return False
        self._accepted = {s.name: s for s in specs}
        self._install_accepted()
        return True

    def _fetch_specs(self) -> bool:
        """Fetch the specs from the collector, adopt new ones, cache them in ``state_dir``.

        A served spec that differs from the one accepted for its name is refused (the
        accepted one stays), as is a new one above ``max_epsilon``.
        """
        fetched = self._transport.fetch_metrics()
        self._next_fetch = time.monotonic() + (
            SPEC_REFRESH_SECONDS if self._metrics or fetched is not None else SPEC_RETRY_SECONDS
        )
        if fetched is None:
            return False
        accepted = dict(self._accepted)
        for spec in _verified_specs(fetched):
            known = accepted.get(spec.name)
            if known is None:
                if self._within_ceiling(spec):
                    accepted[spec.name] = spec
            elif known.fingerprint != spec.fingerprint:
                self._refuse(
                    spec,
                    f"this device accepted another spec for it before (fingerprint"
                    f" {known.fingerprint}, epsilon {known.epsilon:g}) and keeps that one",
                )
        path = self._state_dir / SPECS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([s.to_dict() for s in accepted.values()]))
        os.replace(tmp, path)
        self._accepted = accepted
        self._install_accepted()
        self._refresh_specs = False
        return True

    def _maybe_fetch_specs(self) -> None:
        """In the uploader thread: fetch specs if none are known or a refresh is due."""
        if self._strict or time.monotonic() < self._next_fetch:
            return
        if self._refresh_specs or not self._metrics:
            self._fetch_specs()

    @property
    def metrics(self) -> dict[str, MetricSpec]:
        """The metric specs this client records, by name."""
        return {name: m.spec for name, m in self._metrics.items()}

    # -- recording ------------------------------------------------------------------------

    def _period_labels(self) -> dict[str, str]:
        """Labels of the current day, week and month, recomputed once per clock day."""
        if self._clock is None:
            now = time.time()
            if not self._labels_from <= now < self._labels_until:
                day = now // 86400
                self._labels_from, self._labels_until = day * 86400, (day + 1) * 86400
                moment = dt.datetime.fromtimestamp(now, dt.UTC)
                self._labels = {k: period_label(k, moment) for k in ("day", "week", "month")}
            return self._labels
        moment = self._clock()
        if period_label("day", moment) != self._labels.get("day"):
            self._labels = {k: period_label(k, moment) for k in ("day", "week", "month")}
        return self._labels

    def record(self, metric: str, value: Any) -> bool:
        """Randomize ``value`` for ``metric`` and queue the report; no network I/O.

        Returns ``True`` if a report was queued, ``False`` if the privacy budget (or an
        unknown metric in collector-served specs) kept it back. Raises ``ValueError``,
        naming the metric but never the value, if the value does not fit the spec.
        """
        state = self._metrics.get(metric)
        if state is None:
            return self._unknown(metric)
        index = state.index_of(value)
        with self._lock:
            if self._closed:
                return False
            counts = self._counts
            if self._clock is None and self._labels_from <= time.time() < self._labels_until:
                period = self._labels[state.kind]
            else:
                period = self._period_labels()[state.kind]
            if not self._ledger.admit(metric, period, state.epsilon, state.memoized):
                counts["over_budget"] += 1
                return False
            payload: Payload | None
            if state.memoized:
                key = state.memo_keys[index]
                if key is None:
                    key = state.memo_keys[index] = self._ledger.memo_key(
                        metric, state.fingerprint, index
                    )
                payload = self._ledger.memoized(key)
                if payload is None:
                    payload = state.randomize(index, self._rng)
                    self._ledger.remember(metric, key, payload)
            else:
                payload = state.randomize(index, self._rng)
            pending = self._pending
            if len(pending) >= self._max_queue:
                pending.popleft()
                counts["dropped_queue_full"] += 1
            pending.append((self._ids.take(), metric, state.fingerprint, period, payload))
            counts["admitted"] += 1
        return True

    def _unknown(self, metric: str) -> bool:
        if self._strict:
            raise ValueError(f"unknown metric {metric!r}")
        with self._lock:
            self._counts["unknown_metric"] += 1
            first = metric not in self._warned_unknown
            self._warned_unknown.add(metric)
            self._refresh_specs = True
        if first:
            log.warning("metric %r has no spec from the collector (yet); not recorded", metric)
        return False

    # -- persistence ---------------------------------------------------------------------

    def _persist(self) -> None:
        """Commit the in-memory queue and its ledger changes in one SQLite transaction."""
        with self._persist_lock:
            with self._lock:
                reports = list(self._pending)
                self._pending.clear()
                delta = self._ledger.take_delta()
                self._committing = len(reports)
            if not reports and not delta:
                return
            try:
                dropped = self._outbox.commit(
                    reports,
                    delta,
                    max_queue=self._max_queue,
                    per_chunk=self._batch_cap,
                    max_bytes=MAX_BODY_BYTES,
                )
            except Exception as exc:
                with self._lock:
                    self._pending.extendleft(reversed(reports))
                    self._ledger.restore_delta(delta)
                    self._committing = 0
                log.warning("could not write the outbox (%s); will retry", type(exc).__name__)
                return
            finally:
                self._committing = 0
            if dropped:
                with self._lock:
                    self._counts["dropped_queue_full"] += dropped
                log.warning("outbox full: dropped the %d oldest reports", dropped)

    def _persist_loop(self) -> None:
        last_upload = time.monotonic()
        while not self._stop.wait(self._persist_interval):
            self._persist()
            waiting = len(self._outbox)
            now = time.monotonic()
            if waiting and (
                waiting >= self._batch_size or now - last_upload >= self._flush_interval
            ):
                last_upload = now
                self._wake.set()

    # -- delivery ------------------------------------------------------------------------

    def _upload_once(self, deadline: float | None) -> bool | None:
        """One upload attempt of the oldest batch: ``True`` if the outbox is empty now,
        ``False`` after a failure or if another upload held on past ``deadline``,
        ``None`` if more remains."""
        wait = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._upload_lock.acquire(timeout=wait):
            return False
        try:
            return self._upload_batch(deadline)
        finally:
            self._upload_lock.release()

    def _upload_batch(self, deadline: float | None) -> bool | None:
        """The body of :meth:`_upload_once`, under the upload lock.

        Sends the oldest chunks up to the batch cap; a chunk stored before the cap shrank is
        sent a leading slice at a time (its reports keep their ids and order)."""
        batch = self._outbox.peek(self._batch_cap, MAX_BODY_BYTES)
        if not batch:
            return True
        sent = batch
        if batch[0].count > self._batch_cap:
            head = split_reports(batch[0].reports)[: self._batch_cap]
            sent = [Chunk(batch[0].seq, len(head), ",".join(head))]
        timeout = None
        if deadline is not None:
            timeout = max(0.05, min(self._transport.timeout, deadline - time.monotonic()))
        count = sum(c.count for c in sent)
        result = self._transport.send(encode_batch(sent), count, timeout)
        if result.kind == "retry":
            self._retry_later(result, count)
            return False
        self._failures = 0
        self._warned_refused = False
        if result.kind == "rejected" and result.status == 413:
            return self._split_after_413(batch, count)
        bad = (result.bad_indices or frozenset()) & frozenset(range(count))
        if result.kind == "rejected" and 0 < len(bad) < count:
            dropped = self._outbox.drop_reports(batch, bad)
            with self._lock:
                self._counts["dropped_rejected"] += dropped
            log.warning(
                "collector refused %d of a batch of %d reports (HTTP %s): %s;"
                " dropped those, resending the rest",
                dropped,
                count,
                result.status,
                result.reason,
            )
            return None
        removed = self._forget(batch, count)
        with self._lock:  # a report a full outbox dropped in flight was counted then
            if result.kind == "accepted":
                self._largest_accepted = max(self._largest_accepted, count)
                self._counts["delivered"] += removed
                self._counts["duplicates"] += min(result.duplicates, removed)
            else:
                self._counts["dropped_rejected"] += removed
        if result.kind == "rejected":
            log.warning(
                "collector refused a batch of %d reports (HTTP %s): %s; dropped it",
                count,
                result.status,
                result.reason,
            )
        return None if len(self._outbox) else True

    def _retry_later(self, result: SendResult, count: int) -> None:
        """After a failed attempt: back off, count it, and say why (a refusal once a streak)."""
        self._failures += 1
        delay = self._transport.backoff(self._failures, result.retry_after)
        self._not_before = time.monotonic() + delay
        with self._lock:
            self._counts["retries"] += 1
            self._counts["refused"] += int(result.refused)
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
        of its one chunk); returns how many were removed, which is fewer than ``count`` when
        a full outbox dropped some while they were in flight (already counted then)."""
        if count == sum(c.count for c in batch):
            return self._outbox.remove(c.seq for c in batch)
        return self._outbox.drop_reports(batch, frozenset(range(count)))

    def _split_after_413(self, batch: list[Chunk], count: int) -> bool | None:
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
            return None
        dropped = self._forget(batch, 1)
        self._batch_cap = max(1, self._largest_accepted)
        with self._lock:
            self._counts["dropped_rejected"] += dropped
        log.warning("collector refused a single report as too large (HTTP 413); dropped it")
        return None if len(self._outbox) else True

    def _upload_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            try:
                self._maybe_fetch_specs()
                while not self._stop.is_set():
                    wait = self._not_before - time.monotonic()
                    if wait > 0 and self._stop.wait(wait):
                        return
                    if self._upload_once(None) is True:
                        break
            except Exception as exc:
                log.warning("upload loop error (%s); continuing", type(exc).__name__)

    def flush(self, timeout: float | None = None) -> bool:
        """Commit and upload everything queued now; ``True`` if nothing is left waiting.

        Respects the retry backoff; gives up (returning ``False``) at ``timeout`` seconds.
        Never raises for network reasons.
        """
        if self._closed:
            return self.stats.queued == 0
        deadline = None if timeout is None else time.monotonic() + timeout
        self._persist()
        try:
            while True:
                wait = self._not_before - time.monotonic()
                if wait > 0:
                    if deadline is not None and time.monotonic() + wait >= deadline:
                        return False
                    time.sleep(wait)
                if deadline is not None and time.monotonic() >= deadline:
                    return len(self._outbox) == 0
                outcome = self._upload_once(deadline)
                if outcome is True:
                    return True
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        except Exception as exc:
            log.warning("flush failed (%s)", type(exc).__name__)
            return False

    def close(self, timeout: float = 5.0) -> None:
        """Flush for at most ``timeout`` seconds, keep whatever is left on disk, and stop."""
        if self._closed:
            return
        self.flush(timeout)
        with self._lock:
            self._closed = True
        atexit.unregister(self._persist)
        self._stop.set()
        self._wake.set()
        self._persister.join(timeout=1.0)
        self._persist()
        self._uploader.join(timeout=max(0.1, min(timeout, 1.0)))
        idle = self._upload_lock.acquire(timeout=1.0)
        try:
            self._transport.close()
            self._outbox.close()
        finally:
            if idle:
                self._upload_lock.release()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- introspection -------------------------------------------------------------------

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters; ``queued`` counts reports not yet acknowledged."""
        with self._lock:
            counts = dict(self._counts)
            in_memory = len(self._pending) + self._committing
        recorded = counts["admitted"] + counts["over_budget"]
        return ClientStats(recorded=recorded, queued=in_memory + len(self._outbox), **counts)

    def privacy_spent(self) -> dict[str, PrivacySpent]:
        """Per metric: eps spent in the current period and the lifetime bound that applies."""
        with self._lock:
            labels = self._period_labels()
            return {
                name: self._ledger.spent(name, labels[m.kind], m.epsilon, m.memoized)
                for name, m in self._metrics.items()
            }
