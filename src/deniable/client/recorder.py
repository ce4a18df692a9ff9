"""The recording path: from a ``record()`` call to a randomized report queued in memory.

:class:`Recorder` resolves the period label, asks the ledger to admit the report, draws (or
reuses, for memoized metrics) the randomized answer and queues it, all under one lock and with
no I/O, so ``record()`` costs microseconds. The true value goes no further than this module:
only its randomized payload is queued. A numeric metric's value is clamped and scaled to t in
[-1, 1] first, and its memo is keyed by an HMAC of that t (see :meth:`.Ledger.memo_key`). The persister takes the queue away with :meth:`drain`.

Before any spec is installed (a first start with the collector down), values are held in
memory by a :class:`~.holding.Holding` and randomized, each in the period it was recorded in,
when specs arrive. A record the budget refuses is logged once per metric and period, with the
rule that refused it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Any

from .calendar import PERIOD_KINDS, period_label
from .errors import InvalidInput, SpecError
from .events import MEDIAN_BINS, DayAggregate
from .holding import HeldValue, Holding
from .kinds import BooleanSpec, CategoricalSpec, NumericSpec, TextSpec
from .ledger import Ledger, LedgerDelta, PrivacySpent, ReportCost, report_cost
from .mechanisms import DEFAULT_INSTANTANEOUS_RATIO, Payload, PrefixSketch, TwoLayers
from .outbox import QueuedReport
from .problems import Problems
from .randomness import LocalRandomness, Randomness, ReportIds
from .spec import MetricSpec
from .stats import Counters
from .windows import BookDelta, WindowBook, day_number
from .wire import dims_text

log = logging.getLogger("deniable.client")

_UUID_BLOCK = 4096


class _MetricState:
    """Per-metric state precomputed once, so ``record()`` does dictionary lookups only.

    :meth:`prepare` turns a recorded value into what the randomizer takes: a category index
    (boolean, categorical, and histogram metrics, whose index is the value's bucket), or for a
    numeric metric the value clamped to [lower, upper] and scaled to t in [-1, 1].
    """

    __slots__ = (
        "boolean",
        "cost",
        "dims",
        "fingerprint",
        "index",
        "kind",
        "layers",
        "memo_keys",
        "memoized",
        "numeric",
        "randomize",
        "spec",
        "text",
    )

    def __init__(
        self,
        spec: MetricSpec,
        memoize: bool,
        ratio: float | None,
        level: Callable[[], int] | None = None,
    ) -> None:
        self.spec = spec
        self.fingerprint = spec.fingerprint
        self.dims = ""
        """The ``"dims"`` wire member this device's context gives (see :func:`.wire.dims_text`)."""
        self.cost: ReportCost
        self.layers: TwoLayers | None
        self.cost, self.layers = report_cost(spec, memoize, ratio)
        self.kind = spec.period
        self.memoized = self.cost.memoized
        self.numeric = isinstance(spec, NumericSpec)
        self.text = isinstance(spec, TextSpec)
        self.boolean = isinstance(spec, BooleanSpec)
        self.randomize: Callable[[Any, Randomness], Payload]
        randomizer = spec.report_randomizer
        if isinstance(randomizer, PrefixSketch):  # a text metric's: the pinned level is drawn once
            pinned = level or (lambda: 1)
            self.randomize = lambda padded, rng: randomizer.randomize(padded, pinned(), rng)
        else:
            self.randomize = randomizer.randomize
        self.memo_keys: list[str | None] = [None] * spec.k  # HMACs, made on first use
        self.index: dict[Any, int] = (
            {c: i for i, c in enumerate(spec.categories)}
            if isinstance(spec, CategoricalSpec) and not self.boolean
            else {}
        )

    def prepare(self, value: Any) -> int | float | bytes:
        """The category index, a numeric metric's t, or a text metric's padded bytes;
        :class:`~.errors.InvalidInput` names the metric, never the value."""
        if self.numeric or self.text:
            return self.spec.prepare(value)
        if self.boolean:
            if value is True:
                return 1
            if value is False:
                return 0
        elif type(value) is str:
            index = self.index.get(value)
            if index is not None:
                return index
        return self.spec.prepare(value)

    def memo_key(self, ledger: Ledger, metric: str, prepared: int | float | bytes) -> str:
        """The memo key of a prepared value: cached per category index; for a numeric t or a
        text metric's string made afresh (the values are unbounded, so a cache would grow
        without end)."""
        if type(prepared) is not int:  # a numeric t (float) or a text metric's bytes
            return ledger.memo_key(metric, self.fingerprint, prepared)
        key = self.memo_keys[prepared]
        if key is None:
            key = ledger.memo_key(metric, self.fingerprint, prepared, self.layers is not None)
            self.memo_keys[prepared] = key
        return key


def _number(spec: MetricSpec, value: Any) -> float:
    """``value`` as a finite float (a plain finite float at once); else the spec's check
    raises :class:`~.errors.InvalidInput` naming the metric, never the value."""
    if type(value) is float and value - value == 0.0:
        return value
    return spec._finite_value(value)


class _EventState:
    """An event metric's hot-path state: today's aggregate and how one event or observation
    adds to it (chosen once from the rule, so ``event()`` and ``observe()`` do no dispatch)."""

    __slots__ = ("add", "aggregate", "counted", "day", "dirty", "metric", "spec")

    def __init__(self, metric: _MetricState) -> None:
        spec = metric.spec
        rule = spec.events
        if rule is None:
            raise TypeError("not an event metric")
        self.metric = metric
        self.spec = spec
        self.counted = rule.counted
        self.aggregate = DayAggregate()
        self.day = -1
        self.dirty = False
        self.add: Callable[[DayAggregate, Any], None] = self._adder(rule.aggregate)

    def _adder(self, aggregate: str) -> Callable[[DayAggregate, Any], None]:
        """How one observed value adds to a day's aggregate, for ``aggregate``."""
        spec, prepare = self.spec, self.metric.prepare
        lower, upper = spec.lower or 0.0, spec.upper or 0.0

        def total(day: DayAggregate, value: Any) -> None:
            day.total += _number(spec, value)
            day.n += 1

        def low(day: DayAggregate, value: Any) -> None:
            number = _number(spec, value)
            day.low = min(day.low, number)
            day.n += 1

        def high(day: DayAggregate, value: Any) -> None:
            number = _number(spec, value)
            day.high = max(day.high, number)
            day.n += 1

        def last(day: DayAggregate, value: Any) -> None:
            day.last = _number(spec, value)
            day.n += 1

        def binned(day: DayAggregate, value: Any) -> None:
            index = prepare(value)  # a histogram's bucket, a mode's category
            bins = day.bins
            bins[index] = bins.get(index, 0) + 1
            day.n += 1

        width, top = upper - lower, MEDIAN_BINS - 1

        def numeric_binned(day: DayAggregate, value: Any) -> None:
            # median_bin inlined (the same arithmetic, so the same bin): one call less
            number = (
                value if type(value) is float and value - value == 0.0 else _number(spec, value)
            )
            if number < lower:
                number = lower
            elif number > upper:
                number = upper
            index = int((number - lower) / width * MEDIAN_BINS)
            if index > top:
                index = top
            bins = day.bins
            bins[index] = bins.get(index, 0) + 1
            day.n += 1

        def counted(day: DayAggregate, value: Any) -> None:
            day.n += 1

        adders: dict[str, Callable[[DayAggregate, Any], None]] = {
            "sum": total,
            "mean": total,
            "min": low,
            "max": high,
            "last": last,
            "median": numeric_binned if isinstance(spec, NumericSpec) else binned,
            "mode": binned,
        }
        return adders.get(aggregate, counted)


class Recorder:
    """Admits, randomizes and queues reports in memory; thread-safe.

    Its queue and the ledger are guarded by the counters' lock, so a ``record()`` takes one
    lock. ``on_unknown(metric)`` is called for a metric with no spec: it may raise (an app
    that passed its specs in code asked for an unknown one) or ask for fresh specs; while no
    spec at all is installed, the value is then held (see :mod:`.holding`).
    ``memoize`` (``True`` or metric names) turns on RAPPOR's permanent randomized response,
    with its fresh layer at ``instantaneous_ratio`` x eps on every report (``None``: the
    permanent answer is sent as is; see :func:`~.ledger.report_cost`); ``clock`` replaces the
    system's (simulated periods), ``randomness`` the OS CSPRNG. ``through_shuffler``: uploads
    go through a shuffler; without one, a metric whose delivery rule is ``shuffled`` is never
    recorded (nothing randomized, queued or spent) and ``problems`` says why.
    """

    def __init__(
        self,
        ledger: Ledger,
        counters: Counters,
        *,
        on_unknown: Callable[[str], None],
        memoize: bool | Collection[str] = False,
        instantaneous_ratio: float | None = DEFAULT_INSTANTANEOUS_RATIO,
        max_queue: int,
        clock: Callable[[], dt.datetime] | None = None,
        randomness: Randomness | None = None,
        through_shuffler: bool = False,
        problems: Problems | None = None,
    ) -> None:
        self._ledger = ledger
        self._through_shuffler = through_shuffler
        self._problems = problems or Problems()
        self._counters = counters
        self._lock = counters.lock
        self._on_unknown = on_unknown
        self._memoize = {memoize} if isinstance(memoize, str) else memoize
        self._ratio = instantaneous_ratio
        self._max_queue = max_queue
        self._clock = clock
        self._rng = randomness or LocalRandomness()
        self._ids = ReportIds(_UUID_BLOCK)
        self._metrics: dict[str, _MetricState] = {}
        self._labels_from = self._labels_until = 0.0
        self._labels: dict[str, str] = {}
        self._warned_unknown: set[str] = set()
        self._warned_budget: set[tuple[str, str]] = set()
        self._holding = Holding()
        self._context: dict[str, str] = {}
        self._handed_off = 0
        self._book = WindowBook()
        self._events: dict[str, _EventState] = {}
        self._event_from = self._event_until = 0.0
        self._event_day = 0
        self.closed = False
        self.pending: deque[QueuedReport] = deque()
        """Reports recorded and not yet handed to the persister, oldest first."""

    # -- specs -----------------------------------------------------------------------------

    def install(self, specs: Sequence[MetricSpec]) -> None:
        """Make ``specs`` the ones ``record()`` uses (one lookup per call), and randomize the
        values held while there were none."""
        if len({s.name for s in specs}) != len(specs):
            raise SpecError("metric names must be distinct")
        memoize = self._memoize
        metrics = {
            s.name: _MetricState(
                s,
                memoize is True or (not isinstance(memoize, bool) and s.name in memoize),
                self._ratio,
                self._level_of(s) if isinstance(s, TextSpec) else None,
            )
            for s in specs
        }
        events = {name: _EventState(m) for name, m in metrics.items() if m.spec.events}
        with self._lock:
            for state in metrics.values():
                state.dims = dims_text(state.spec.dimension_values(self._context))
            self._metrics = metrics
            self._events = events
            self._event_until = 0.0
            today = self._today()
            self._book.install((m.spec for m in metrics.values()), today)
            self._book.mark_active(self._book.newest)
            held = self._holding.take() if metrics else []
            for value in held:
                self._replay(value)

    def set_context(self, context: dict[str, str]) -> None:
        """Make ``context`` the public dimension values later reports carry (see
        :meth:`.Client.set_context`)."""
        with self._lock:
            self._context = dict(context)
            for state in self._metrics.values():
                state.dims = dims_text(state.spec.dimension_values(self._context))

    def _level_of(self, spec: MetricSpec) -> Callable[[], int]:
        """A text metric's pinned prefix level, drawn on its first report (under the lock)."""
        name, fingerprint, levels = spec.name, spec.fingerprint, spec.text_randomizer.levels
        return lambda: self._ledger.pinned_level(name, fingerprint, levels, self._rng)

    def _replay(self, held: HeldValue) -> None:
        """Randomize and queue a value held before specs arrived, in the period it was recorded
        in (under the lock); a value its spec does not cover is dropped and counted."""
        state = self._metrics.get(held.metric)
        try:
            if state is None:
                raise InvalidInput(f"metric {held.metric}: the collector serves no spec for it")
            prepared = state.prepare(held.value)
        except InvalidInput as exc:
            self._counters.dropped_held += 1
            log.warning("dropped a value held until specs arrived: %s", exc)
            return
        self._admit(held.metric, state, prepared, period_label(state.kind, held.moment))

    @property
    def metrics(self) -> dict[str, MetricSpec]:
        """The metric specs recorded, by name."""
        return {name: m.spec for name, m in self._metrics.items()}

    # -- recording -------------------------------------------------------------------------

    def _period_labels(self) -> dict[str, str]:
        """Labels of the current day, week and month, recomputed once per clock day."""
        if self._clock is None:
            now = time.time()
            if not self._labels_from <= now < self._labels_until:
                day = now // 86400
                self._labels_from, self._labels_until = day * 86400, (day + 1) * 86400
                moment = dt.datetime.fromtimestamp(now, dt.UTC)
                self._labels = {k: period_label(k, moment) for k in PERIOD_KINDS}
            return self._labels
        moment = self._clock()
        if period_label("day", moment) != self._labels.get("day"):
            self._labels = {k: period_label(k, moment) for k in PERIOD_KINDS}
        return self._labels

    def record(self, metric: str, value: Any) -> bool:
        """Randomize ``value`` for ``metric`` and queue the report; see :meth:`.Client.record`."""
        state = self._metrics.get(metric)
        if state is None:
            return self._unknown(metric, value)
        if metric in self._events:
            raise InvalidInput(
                f"metric {metric} aggregates events on the device: call event() or observe(),"
                " which report once per window"
            )
        prepared = state.prepare(value)
        with self._lock:
            if self.closed:
                return False
            if self._clock is None and self._labels_from <= time.time() < self._labels_until:
                period = self._labels[state.kind]
            else:
                period = self._period_labels()[state.kind]
            self._counters.recorded += 1
            return self._admit(metric, state, prepared, period)

    # -- events ----------------------------------------------------------------------------

    def event(self, metric: str) -> bool:
        """Count one occurrence of ``metric``'s event today; see :meth:`.Client.event`."""
        state = self._events.get(metric)
        if state is None or not state.counted:
            return self._not_an_event(metric, counted=True)
        return self._add(state, None)

    def observe(self, metric: str, value: Any) -> bool:
        """Add ``value`` to ``metric``'s aggregate of today; see :meth:`.Client.observe`."""
        state = self._events.get(metric)
        if state is None or state.counted:
            return self._not_an_event(metric, counted=False)
        return self._add(state, value)

    def _add(self, state: _EventState, value: Any) -> bool:
        """Add one event or observation to ``state``'s aggregate of the day it counts on
        (the system clock's day is read inline while cached: this is the hot path)."""
        with self._lock:
            if self.closed:
                return False
            if self._clock is None and self._event_from <= time.time() < self._event_until:
                day = self._event_day
            else:
                day = self._event_today()
            if day != state.day:
                self._new_day(state, day)
            state.add(state.aggregate, value)
            state.dirty = True
            return True

    def _event_today(self) -> int:
        """The day an event counts on: today, or the newest day seen if the clock went back
        (under the lock; the system clock's day is cached until it ends)."""
        if self._clock is None:
            now = time.time()
            if self._event_from <= now < self._event_until:
                return self._event_day
            day = int(now // 86400)
            self._event_from, self._event_until = day * 86400.0, (day + 1) * 86400.0
        else:
            day = day_number(self._clock())
            self._event_until = 0.0
        self._event_day = self._book.see(day)
        if self._event_day != day:
            self._event_until = 0.0
        return self._event_day

    def _new_day(self, state: _EventState, day: int) -> None:
        """Point ``state`` at its aggregate of ``day`` (under the lock), keeping the previous
        day's change for the next commit."""
        if state.dirty:
            self._book.touch(state.spec.name, state.day)
        state.aggregate = self._book.day_of(state.spec.name, day)
        state.day = day

    def _not_an_event(self, metric: str, *, counted: bool) -> bool:
        """``event()`` or ``observe()`` for a metric that is not of that sort: unknown (as
        ``record()`` treats one, without holding), or the other call's
        (:class:`~.errors.InvalidInput` saying which call)."""
        state = self._metrics.get(metric)
        if state is None:
            self._on_unknown(metric)
            return self._not_known(metric, "counted")
        events = state.spec.events
        if events is None:
            raise InvalidInput(f"metric {metric} does not aggregate events: call record()")
        call = "event(metric)" if events.counted else "observe(metric, value)"
        raise InvalidInput(f"metric {metric} aggregates by {events.aggregate}: call {call}")

    def _today(self) -> int:
        """Today's UTC day number by the clock."""
        return day_number(self._clock()) if self._clock is not None else int(time.time() // 86400)

    def _close_windows(self) -> None:
        """Mark today active (the client is open), then queue a report for every window due
        (under the lock): the SDK's periodic commit calls this, so a window is reported at the
        first commit after it closed, at the next start if the app was not running."""
        book = self._book
        book.mark_active(book.see(self._today()))
        for state in self._events.values():
            if state.dirty:
                book.touch(state.spec.name, state.day)
                state.dirty = False
        for spec, window, value in book.due({s.spec.name: s.spec for s in self._events.values()}):
            metric = self._metrics[spec.name]
            self._admit(spec.name, metric, metric.prepare(value), window.label)

    def commit_windows(self) -> None:
        """Mark today active and queue a report for every window due, as the periodic commit
        does, without waiting for it: a simulated device's day ends."""
        with self._lock:
            self._close_windows()

    def switch_windows(self, book: WindowBook) -> WindowBook:
        """Make ``book`` the event state that ``event()``, ``observe()`` and the windows use,
        and return the one it replaces (today's changes saved in it): one Client of a
        simulation stands in for many devices, each with its own windows, one after another."""
        with self._lock:
            previous, self._book = self._book, book
            for state in self._events.values():
                if state.dirty:
                    previous.touch(state.spec.name, state.day)
                state.aggregate, state.day, state.dirty = DayAggregate(), -1, False
            self._event_until = 0.0
            return previous

    def load_events(self, state: tuple[Any, Any, Any]) -> None:
        """The saved event state (:meth:`.Outbox.load_events`), before any spec is installed."""
        with self._lock:
            self._book.load(*state)

    def _admit(
        self, metric: str, state: _MetricState, prepared: int | float | bytes, period: str
    ) -> bool:
        """Ask the ledger to admit a report of ``prepared`` (a category index or a numeric
        metric's t, see :meth:`_MetricState.prepare`) in ``period``; if it does, randomize
        and queue it (under the lock). A refusal is logged once per metric and period; a
        shuffled-only metric without a shuffler is never admitted (:meth:`_undeliverable`)."""
        if state.spec.delivery == "shuffled" and not self._through_shuffler:
            return self._undeliverable(metric)
        counters = self._counters
        if not self._ledger.admit(metric, period, state.cost):
            counters.over_budget += 1
            if (metric, period) not in self._warned_budget:
                self._warned_budget.add((metric, period))
                log.warning(
                    "metric %s, period %s: %s",
                    metric,
                    period,
                    self._ledger.refusal(metric, state.cost),
                )
            return False
        payload = self._randomized(metric, state, prepared)
        if self._ledger.malformed:
            self._malformed_memo()
        pending = self.pending
        if len(pending) >= self._max_queue:
            pending.popleft()
            counters.dropped_queue_full += 1
        pending.append((self._ids.take(), metric, state.fingerprint, period, payload, state.dims))
        counters.admitted += 1
        return True

    def _malformed_memo(self) -> None:
        """A remembered answer or pinned level that did not fit its metric was drawn afresh:
        reported (naming the metrics, never a value), logged, never raised."""
        metrics, self._ledger.malformed = sorted(set(self._ledger.malformed)), []
        message = (
            f"the saved state had a malformed memo entry of {', '.join(metrics)} (an answer out"
            " of its metric's range); the entry was drawn afresh"
        )
        log.warning("%s", message)
        self._problems.note("memo", message)

    def _undeliverable(self, metric: str) -> bool:
        """``False``: ``metric`` reaches the collector only through a shuffler and this client
        has none, so its value is not recorded; noted as a problem, logged once."""
        key = f"delivery:{metric}"
        if key not in self._problems:
            log.warning(
                "metric %s has delivery rule 'shuffled' and this client has no shuffler; not"
                " recorded",
                metric,
            )
        self._problems.note(
            key,
            f"metric {metric} has delivery rule 'shuffled': its reports go only through a"
            " shuffler, and this client has none (pass shuffler=URL); not recorded",
        )
        return False

    def _randomized(
        self, metric: str, state: _MetricState, prepared: int | float | bytes
    ) -> Payload:
        """A fresh randomized answer for ``prepared``; for a memoized metric, its value's
        remembered permanent answer randomized afresh, or without the fresh layer the
        remembered answer itself (under the lock)."""
        if not state.memoized:
            return state.randomize(prepared, self._rng)
        key = state.memo_key(self._ledger, metric, prepared)
        payload = self._ledger.memoized(key)
        layers = state.layers
        if layers is None:
            if payload is None:
                payload = state.randomize(prepared, self._rng)
                self._ledger.remember(metric, key, payload)
            return payload
        k = layers.instantaneous.k
        permanent = payload if type(payload) is int and 0 <= payload < k else None
        if permanent is None:
            if payload is not None:
                self._ledger.malformed.append(metric)
            if type(prepared) is not int:
                raise TypeError("a memoized answer in two layers needs a category index")
            permanent = layers.permanent_answer(prepared, self._rng)
            self._ledger.remember(metric, key, permanent)
        return layers.report(permanent, self._rng)

    def _unknown(self, metric: str, value: Any) -> bool:
        """A metric without a spec: raise or ask for specs (``on_unknown``); hold the value
        while no spec at all is installed; else count and warn once."""
        self._on_unknown(metric)
        with self._lock:
            if not self._metrics and not self.closed:
                return self._hold(metric, value)
        if self._metrics.get(metric) is not None:  # specs arrived meanwhile
            return self.record(metric, value)
        return self._not_known(metric, "recorded")

    def _not_known(self, metric: str, what: str) -> bool:
        """``False``: ``metric`` has no spec, so the call is not ``what`` (recorded, counted);
        counted in ``unknown_metric`` and warned about once per metric."""
        with self._lock:
            self._counters.unknown_metric += 1
            first = metric not in self._warned_unknown
            self._warned_unknown.add(metric)
        if first:
            log.warning("metric %r has no spec from the collector (yet); not %s", metric, what)
        return False

    def _hold(self, metric: str, value: Any) -> bool:
        """Keep a value until specs arrive (under the lock); ``False`` if the holding is full."""
        moment = self._clock() if self._clock is not None else dt.datetime.now(dt.UTC)
        if self._holding.hold(metric, value, moment):
            self._counters.recorded += 1
            return True
        self._counters.dropped_held += 1
        if self._counters.dropped_held == 1:
            log.warning(
                "no metric specs yet and %d values already held in memory; dropping more",
                len(self._holding),
            )
        return False

    @property
    def held(self) -> int:
        """Values held until specs arrive (read it under the counters' lock)."""
        return len(self._holding)

    def close(self) -> None:
        """Admit nothing more: ``record()`` returns ``False`` from now on. Values still held
        for specs are dropped (they never go to disk) and counted."""
        with self._lock:
            self.closed = True
            lost = len(self._holding.take())
            self._counters.dropped_held += lost
        if lost:
            log.warning(
                "closing with %d values recorded before any metric spec arrived; they were"
                " held in memory only and are dropped",
                lost,
            )

    # -- hand-off to the persister ---------------------------------------------------------

    def drain(self) -> tuple[list[QueuedReport], LedgerDelta, BookDelta]:
        """Report the windows that closed, then take the queued reports, the ledger changes
        that admitted them and the event state's changes, to be committed together; they
        still count as in memory until :meth:`drained` or :meth:`put_back`."""
        with self._lock:
            self._close_windows()
            reports = list(self.pending)
            self.pending.clear()
            self._handed_off = len(reports)
            return reports, self._ledger.take_delta(), self._book.take_delta()

    def drained(self) -> None:
        """The reports of the last :meth:`drain` are committed."""
        self._handed_off = 0

    def put_back(self, reports: list[QueuedReport], delta: LedgerDelta, events: BookDelta) -> None:
        """Return what a failed commit took, ahead of anything recorded since."""
        with self._lock:
            self.pending.extendleft(reversed(reports))
            self._ledger.restore_delta(delta)
            self._book.restore_delta(events)
            self._handed_off = 0

    @property
    def in_memory(self) -> int:
        """Reports recorded and not yet committed (read it under the counters' lock)."""
        return len(self.pending) + self._handed_off

    # -- introspection ---------------------------------------------------------------------

    def privacy_spent(self) -> dict[str, PrivacySpent]:
        """Per metric: eps spent in the current period and in all over any two histories of
        its values (``inf``: unbounded), and what the reports of unchanged values reveal
        (:class:`~.ledger.PrivacySpent`)."""
        with self._lock:
            labels = self._period_labels()
            return {
                name: self._ledger.spent(name, labels[m.kind], m.cost)
                for name, m in self._metrics.items()
            }
