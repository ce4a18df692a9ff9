"""The SDK's entry point: :class:`Client` records values, randomizes them at once, and delivers.

``record()`` validates, checks the privacy budget, randomizes and queues in memory, with no
I/O. A background thread commits the queue with its ledger changes to SQLite in
``state_dir`` at least once a second; another uploads committed reports in batches and
removes them only when the collector acknowledges them. Network trouble is never raised to
the host application. :class:`Client` is the facade over the parts that do this.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .account import SDK_DEFAULTS, DeviceSettings, PrivacyAccount, privacy_account
from .errors import InvalidInput
from .ledger import Ledger, PrivacySpent
from .mechanisms import MAX_EPSILON, MIN_EPSILON
from .outbox import Outbox
from .persister import Persister
from .problems import Problems
from .randomness import Randomness
from .recorder import Recorder
from .sealing import SEALED_PATH
from .shuffling import SealingTransport, device_pseudonym
from .spec import MetricSpec
from .specsource import DEFAULT_MAX_EPSILON, SpecSource
from .stats import ClientStats, Counters
from .transport import BACKOFF_BASE, BACKOFF_CAP, Transport
from .uploader import MAX_BATCH, MAX_BODY_BYTES, Uploader

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_MAX_EPSILON", "Client", "ClientStats"]

log = logging.getLogger("deniable.client")


def _is_whole(value: object) -> bool:
    """An ``int`` that is not a bool (``True`` is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    """A finite ``int`` or ``float`` that is not a bool (``True`` is not 1.0)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_tuning(
    batch_size: int,
    max_queue: int,
    max_epsilon: float,
    persist_interval: float,
    seconds: Mapping[str, float],
) -> None:
    """Refuse constructor arguments of the wrong type or range before anything in
    ``state_dir`` is opened; ``seconds`` are the durations, by name, that must be > 0."""
    if not (_is_whole(batch_size) and 1 <= batch_size <= MAX_BATCH):
        raise InvalidInput(f"batch_size must be an integer in 1..{MAX_BATCH}")
    if not (_is_whole(max_queue) and max_queue >= 1):
        raise InvalidInput("max_queue must be an integer of at least 1")
    if not (_is_real(max_epsilon) and MIN_EPSILON <= max_epsilon <= MAX_EPSILON):
        raise InvalidInput(
            f"max_epsilon must be a number in [{MIN_EPSILON:g}, {MAX_EPSILON:g}],"
            f" not {max_epsilon!r}"
        )
    if not (_is_real(persist_interval) and 0 < persist_interval <= 1.0):
        raise InvalidInput("persist_interval must be a number in (0, 1] seconds")
    for name, value in seconds.items():
        if not (_is_real(value) and value > 0):
            raise InvalidInput(f"{name} must be a finite number of seconds > 0")


class Client:
    """Records values as randomized reports and delivers them to a deniable collector.

    Thread-safe; ``record()`` never does I/O and never raises for network reasons.
    Use it as a context manager, or call :meth:`close`, so the last reports are kept.

    ``collector_url`` is one URL or several (tried in turn on failure). ``state_dir`` holds
    the outbox, the ledger, the memo and its secret, and the cached specs. ``metrics``: the
    specs to record (:class:`~.spec.MetricSpec` objects, or dicts in the JSON form the
    collector serves); ``None`` fetches them from ``GET /v1/metrics`` (cached for offline
    starts; until the first specs arrive, values are held in memory, at most
    :data:`~.holding.MAX_HELD`: see :mod:`.holding`). ``max_reports_per_period`` and ``lifetime_epsilon`` bound what each metric may
    send; ``memoize`` (``True`` or a set of metric names) turns on RAPPOR's permanent
    randomized response, each report randomizing the permanent answer afresh at
    ``instantaneous_ratio`` x eps (krr and brr metrics; others are then not memoized;
    ``None``: no fresh layer, and a change of value shows: docs/privacy.md). Their defaults are :data:`~.account.SDK_DEFAULTS`, and
    :meth:`privacy_account` states the most eps they let this device spend. ``clock`` and ``randomness`` are for tests (simulated periods,
    seeded draws; ``clock`` also dates what :meth:`problems` says); ``persist_interval``,
    ``backoff_base`` and ``backoff_cap`` (seconds) tune durability and retry pacing (the
    schedule: :meth:`.Transport.backoff`). ``transport`` is an httpx transport passed to the
    ``httpx.Client`` inside, as httpx takes one (``httpx.MockTransport(handler)`` answers
    uploads with a function, for tests).

    ``shuffler`` (a URL) sends reports through a shuffler (``deniable shuffle``) instead of
    straight to the collector: each report sealed to the collector's public key as the shuffler
    serves it (``GET /v1/keys`` on the shuffler, the same keys for every device; the collector
    still serves the specs), so the shuffler cannot read it and the collector cannot tell who
    sent it (:mod:`.shuffling`); ``shuffler_key`` is the shuffler's upload key
    (``DENIABLE_SHUFFLER_UPLOAD_KEY``), sent to the shuffler only, as ``ingest_key`` goes to
    the collector only. Budget, queue and resends are unchanged. A metric whose spec's delivery rule is ``shuffled``
    is recorded only with a shuffler: without one, ``record()`` returns ``False`` and
    :meth:`problems` says why (the collector would refuse it directly).

    ``context`` holds this device's public attributes (``{"platform": "ios"}``): each report
    of a metric that declares dimensions carries their values **in the clear**, a value the
    spec does not list (or lacks) as ``other``; change it with :meth:`set_context`. It must
    never hold anything sensitive: docs/privacy.md.

    The work is done by parts with one job each: a :class:`~.specsource.SpecSource` (which
    specs to record), a :class:`~.recorder.Recorder` (``record()``), a
    :class:`~.persister.Persister` (to SQLite in ``state_dir``) and an
    :class:`~.uploader.Uploader` (to the collector); the client wires them together and runs
    the persister's and the uploader's background threads.

    The device, not the collector, guards its users' privacy. ``max_epsilon`` (default
    :data:`~.specsource.DEFAULT_MAX_EPSILON`, 4) is the highest eps this client accepts: a spec
    passed in ``metrics`` above it raises :class:`~.errors.SpecError` (a ``ValueError``), and a
    served one above it is refused. A spec
    once accepted from a collector (fetched now or cached in ``state_dir`` by an earlier run)
    is never replaced by a different one with the same name: a changed spec is refused and
    reports keep the one accepted first. New metrics a collector serves within the ceiling
    are adopted. Specs passed in ``metrics`` are the only ones used (none is adopted), but they
    are compared once with the served ones: a metric the collector serves differently (or not
    at all) is logged at ERROR, counted in ``ClientStats.spec_mismatches`` and listed by
    :meth:`problems`. Each refused spec is logged at ERROR once and counted in
    ``ClientStats.specs_refused``.

    A batch answered 413 (too large) is split, not dropped: see :mod:`.uploader`.
    Only a single report that is too large on its own is dropped (counted in
    ``dropped_rejected``), as is a batch the collector itself refuses with 400 or 422 (only
    the reports a 422 names, when it names them); "the collector itself" is recognised by the
    structure of its JSON answer (:func:`~.transport.collector_refusal`). Any other 4xx, a 400
    or 422 with another body (a proxy's HTML page, a gateway's ``application/problem+json``),
    and a 2xx that is not the collector's acknowledgement blame the URL, the ingest key or
    something on the way, not the reports: they stay queued and are retried on the next URL
    with backoff, so a client restarted with the right URL or key delivers them.

    ``timeout`` bounds each exchange with the collector as a whole, not each read (one upload
    attempt; one fetch of the specs, over all URLs, the one at start included), and
    :meth:`flush`'s ``timeout`` the whole flush: see :mod:`.exchange`.

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
        metrics: Sequence[MetricSpec | Mapping[str, Any]] | None = None,
        max_reports_per_period: int = SDK_DEFAULTS.max_reports_per_period,
        lifetime_epsilon: float | None = SDK_DEFAULTS.lifetime_epsilon,
        max_epsilon: float = DEFAULT_MAX_EPSILON,
        memoize: bool | Collection[str] = SDK_DEFAULTS.memoize,
        instantaneous_ratio: float | None = SDK_DEFAULTS.instantaneous_ratio,
        batch_size: int = 1000,
        flush_interval: float = 1.0,
        max_queue: int = 100_000,
        clock: Callable[[], dt.datetime] | None = None,
        randomness: Randomness | None = None,
        timeout: float = 10.0,
        persist_interval: float = 0.5,
        backoff_base: float = BACKOFF_BASE,
        backoff_cap: float = BACKOFF_CAP,
        transport: httpx.BaseTransport | None = None,
        context: Mapping[str, str] | None = None,
        shuffler: str | None = None,
        shuffler_key: str | None = None,
    ) -> None:
        fetched_by = time.monotonic() + timeout if _is_real(timeout) else None
        _check_tuning(
            batch_size,
            max_queue,
            max_epsilon,
            persist_interval,
            {
                "flush_interval": flush_interval,
                "timeout": timeout,
                "backoff_base": backoff_base,
                "backoff_cap": backoff_cap,
            },
        )
        self._settings = DeviceSettings.memoizing(
            max_reports_per_period,
            memoize,
            lifetime_epsilon,
            instantaneous_ratio,
        )
        state_dir = Path(state_dir)
        counters = self._counters = Counters()
        problems = self._problems = Problems()
        self._refresh_lock = threading.Lock()
        self._sealing: SealingTransport | None = None
        with contextlib.ExitStack() as undo:  # on failure, free the state_dir and connections
            self._transport = Transport(
                [collector_url] if isinstance(collector_url, str) else list(collector_url),
                ingest_key=ingest_key,
                timeout=timeout,
                backoff_base=backoff_base,
                backoff_cap=backoff_cap,
                transport=transport,
            )
            undo.callback(self._transport.close)
            self._outbox = Outbox(state_dir)
            undo.callback(self._outbox.close)
            if self._outbox.set_aside is not None:
                problems.note("state", self._outbox.set_aside)
                log.warning("%s", self._outbox.set_aside)
            ledger = Ledger(
                self._outbox.secret(),
                max_reports_per_period=max_reports_per_period,
                lifetime_epsilon=lifetime_epsilon,
            )
            ledger.load(*self._outbox.load_ledger())
            self._specs = SpecSource(
                state_dir, self._transport, counters, problems, max_epsilon=max_epsilon
            )
            self._recorder = Recorder(
                ledger,
                counters,
                on_unknown=self._specs.note_unknown,
                memoize=memoize,
                instantaneous_ratio=instantaneous_ratio,
                max_queue=max_queue,
                clock=clock,
                randomness=randomness,
                through_shuffler=shuffler is not None,
                problems=problems,
            )
            self._recorder.load_events(self._outbox.load_events())
            self.set_context(context or {})
            self._recorder.install(self._specs.start(metrics, fetched_by))
            undo.pop_all()
        self._uploader = Uploader(
            self._outbox,
            self._upload_transport(
                shuffler, shuffler_key, timeout, backoff_base, backoff_cap, transport
            ),
            counters,
            problems,
            batch_size=batch_size,
            flush_interval=flush_interval,
            now=clock,
        )
        self._persister = Persister(
            self._recorder,
            self._outbox,
            counters,
            max_queue=max_queue,
            chunk_size=lambda: self._uploader.batch_cap,
            max_bytes=MAX_BODY_BYTES,
        )
        self._stop = threading.Event()
        self._threads = self._start_background(persist_interval)
        if metrics is not None:  # compare the specs in code with the served ones, now
            threading.Thread(target=self._refresh_specs, name="deniable-specs", daemon=True).start()
        atexit.register(self._persister.persist)

    def _upload_transport(
        self,
        shuffler: str | None,
        shuffler_key: str | None,
        timeout: float,
        backoff_base: float,
        backoff_cap: float,
        transport: httpx.BaseTransport | None,
    ) -> Transport | SealingTransport:
        """Where uploads go: the collector, or (``shuffler``) sealed to the shuffler."""
        if shuffler is None:
            return self._transport
        sealing = SealingTransport(
            Transport(
                [shuffler],
                ingest_key=shuffler_key,
                timeout=timeout,
                backoff_base=backoff_base,
                backoff_cap=backoff_cap,
                transport=transport,
                upload_path=SEALED_PATH,
            ),
            lambda: self._recorder.metrics,
            device_pseudonym(self._outbox.secret()),
        )
        self._sealing = sealing
        return sealing

    def _start_background(self, persist_interval: float) -> tuple[threading.Thread, ...]:
        """Start the persister's and the uploader's threads (daemons: they never hold the
        app's exit, which persists once more through ``atexit``)."""
        threads = (
            threading.Thread(
                target=self._persister.run,
                args=(self._stop, persist_interval, self._uploader.nudge),
                name="deniable-persist",
                daemon=True,
            ),
            threading.Thread(
                target=self._uploader.run,
                args=(self._stop, self._refresh_specs),
                name="deniable-upload",
                daemon=True,
            ),
        )
        for thread in threads:
            thread.start()
        return threads

    def _refresh_specs(self, force: bool = False, deadline: float | None = None) -> None:
        """Record with new specs if the spec source has fetched some (in the upload thread, or
        in ``flush`` with ``force`` while values wait for specs), all by ``deadline``
        (monotonic; ``None``: one fetch's ``timeout``)."""
        wait = -1.0 if deadline is None else deadline - time.monotonic()
        if (deadline is not None and wait <= 0) or not self._refresh_lock.acquire(timeout=wait):
            return
        try:
            specs = self._specs.refresh_if_due(force, deadline)
            if specs is not None:
                self._recorder.install(specs)
        finally:
            self._refresh_lock.release()

    def set_context(self, context: Mapping[str, str]) -> None:
        """Replace the public attributes (see ``context``) that reports recorded from now on
        carry as their metrics' dimension values; :class:`~.errors.InvalidInput` if it is
        not a mapping of strings to strings."""
        if not isinstance(context, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in context.items()
        ):
            raise InvalidInput("context must map dimension names (str) to values (str)")
        self._recorder.set_context(dict(context))

    @property
    def metrics(self) -> dict[str, MetricSpec]:
        """The metric specs this client records, by name."""
        return self._recorder.metrics

    def record(self, metric: str, value: Any) -> bool:
        """Randomize ``value`` for ``metric`` and queue the report; no network I/O.

        ``value`` is a bool (boolean metrics), a category name (categorical) or a number
        (numeric: clamped to [lower, upper] and scaled; histogram: counted in its bucket).
        Returns ``True`` if a report was queued (or, before any spec has arrived from the
        collector, the value is held in memory until one does), ``False`` if the privacy
        budget (or an unknown metric in collector-served specs, or a full holding) kept it
        back; the budget logs a WARNING with its rule once per metric and period. Raises
        :class:`~.errors.InvalidInput` (a ``ValueError``), naming the metric but never the
        value, if the value does not fit the spec, or if the metric is unknown and the specs
        were passed in ``metrics``.
        """
        return self._recorder.record(metric, value)

    def event(self, metric: str) -> bool:
        """Count one occurrence of ``metric``'s event (a metric whose spec aggregates events by
        ``any`` or ``count``); no I/O, nothing leaves the device until its window closes.

        Call it as often as the event happens: the device keeps one count per day, and once a
        window of days has closed it sends one randomized report of the window's aggregate
        (whether the event occurred, or how many times), zero included. Returns ``True`` if
        counted, ``False`` for a metric without a spec (as :meth:`record`) or after
        :meth:`close`; raises :class:`~.errors.InvalidInput` if the metric aggregates observed
        values (call :meth:`observe`) or is not an event metric (call :meth:`record`).
        """
        return self._recorder.event(metric)

    def observe(self, metric: str, value: Any) -> bool:
        """Add ``value`` to ``metric``'s aggregate of today (a metric whose spec aggregates
        values by ``sum``, ``min``, ``max``, ``mean``, ``median``, ``last`` or ``mode``); no
        I/O, nothing leaves the device until its window closes.

        ``value`` is a number (a category name for ``mode``). Once a window has closed the
        device sends one randomized report of the window's aggregate, if it observed anything
        (a ``sum`` may report zero). Raises :class:`~.errors.InvalidInput`, naming the metric
        but never the value, if the value does not fit or the metric is not of this sort.
        """
        return self._recorder.observe(metric, value)

    def flush(self, timeout: float | None = None) -> bool:
        """Commit and upload everything queued now; ``True`` if every report was delivered.

        ``False`` if reports are still waiting (the collector is unreachable or refuses them
        for now, or values wait for specs), or if the collector refused some as invalid
        (``dropped_rejected`` grew) since the flush began: see :meth:`problems` for why.
        Respects the retry backoff; returns within ``timeout`` seconds (``False`` if not done
        by then) whatever the collector does, a server that answers a byte a second included.
        Never raises for network reasons.
        """
        if self._recorder.closed:
            return self.stats.queued == 0
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._counters.lock:
            rejected_before = self._counters.dropped_rejected
            waiting_for_specs = self._recorder.held > 0
        self._refresh_specs(waiting_for_specs, deadline)
        self._persister.persist()
        emptied = self._uploader.upload_all(deadline)
        with self._counters.lock:
            clean = self._counters.dropped_rejected == rejected_before
            return emptied and clean and self._recorder.held == 0

    def close(self, timeout: float = 5.0) -> None:
        """Flush for at most ``timeout`` seconds, keep whatever is left on disk, and stop.

        A spec fetch still under way in the background is cut short or, if it ends anyway,
        dropped: the specs cached in ``state_dir`` are not written once this returns, and
        nothing it cut short is logged or shown in :meth:`problems` as a failure."""
        if self._recorder.closed:
            return
        self.flush(timeout)
        self._recorder.close()
        atexit.unregister(self._persister.persist)
        self._stop.set()
        self._uploader.wake()
        persist_thread, upload_thread = self._threads
        persist_thread.join(timeout=1.0)
        self._persister.persist()
        upload_thread.join(timeout=max(0.1, min(timeout, 1.0)))
        self._specs.close()
        with self._uploader.paused(timeout=1.0):
            self._transport.close()
            if self._sealing is not None:
                self._sealing.close()
            self._outbox.close()

    def __enter__(self) -> Client:
        """The client itself; ``with`` closes it on the way out."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close (flushing for at most five seconds) when the ``with`` block ends."""
        self.close()

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters; ``queued`` counts reports not yet acknowledged."""
        with self._counters.lock:
            return self._counters.snapshot(
                queued=self._recorder.in_memory + len(self._outbox), held=self._recorder.held
            )

    def problems(self) -> list[str]:
        """What keeps reports from arriving now, in words (empty when all is well).

        Mismatched or refused specs, specs that cannot be fetched (with the URL tried) or a
        collector that serves none yet, a collector that cannot be reached (since when, why,
        and when an upload last succeeded), refusing uploads (401, 403, 404...) or dropping
        reports as invalid; each message names metrics, URLs, times and counts, never a
        recorded value.
        """
        return self._problems.current()

    def privacy_spent(self) -> dict[str, PrivacySpent]:
        """Per metric: eps spent in the current period and in all over any two histories of
        its values (``inf``: unbounded), and what the reports of unchanged values reveal
        (:class:`~.ledger.PrivacySpent`)."""
        return self._recorder.privacy_spent()

    @property
    def settings(self) -> DeviceSettings:
        """The settings that bound what this device spends (reports per period, memo and its
        fresh layer, cap)."""
        return self._settings

    def privacy_account(self) -> PrivacyAccount:
        """The most eps this device can spend on the metrics it records, with its settings,
        per window and over its lifetime; :meth:`privacy_spent` never exceeds it."""
        return privacy_account(self.metrics.values(), self._settings)
