"""Many reports of one value through the real recording path, for auditing the randomizers.

:func:`randomized_reports` is what a device would upload after ``count`` calls of
``record(spec.name, value)``: the same :class:`~.recorder.Recorder` (``prepare``, ledger
admission, ``randomize``, the queue) and the same wire encoding as the outbox and the uploader
(:mod:`.wire`), with a ledger that admits every report. It exists so that the auditor
(:mod:`deniable.estimators.audit`) checks the code that ships, not a re-implementation of it.

An event metric's reports come from its windows instead (:func:`window_reports`): one event
stream whose every window aggregates to the same value, fed through ``event()`` or
``observe()`` and closed day by day by the recorder's own window path.
"""

from __future__ import annotations

import datetime as dt
import math
import secrets
from collections.abc import Callable
from typing import Any

from .calendar import next_period, period_label, period_start
from .errors import InvalidInput, SpecError
from .ledger import Ledger
from .randomness import Randomness
from .recorder import Recorder
from .spec import MetricSpec
from .stats import Counters
from .windows import day_date, day_number
from .wire import batch_body, join_reports, report_text

CHUNK = 10_000
"""Reports taken from the recorder's queue and encoded at a time, so memory holds one chunk
of report tuples beside the texts (about 130 bytes a report)."""


def _unknown(metric: str) -> None:
    """``record()`` asked for a metric that was not installed: a bug in the caller."""
    raise SpecError(f"metric {metric}: not installed in the sampling recorder")


def randomized_reports(
    spec: MetricSpec,
    value: Any,
    count: int,
    *,
    randomness: Randomness | None = None,
    clock: Callable[[], dt.datetime] | None = None,
) -> bytes:
    """The ``POST /v1/reports`` body a device uploads after ``count`` calls of
    ``record(spec.name, value)``: the record() path with a ledger that admits every report.

    Memoization is off because the auditor checks the randomizer, not the memo. The clock is
    the system's, as on a device (the recorder then computes a period label once a day, not
    once a report; the label plays no part in an audit), unless ``clock`` replaces it (a
    test collector's time). ``randomness`` replaces the
    recorder's OS CSPRNG (a :class:`~.randomness.SeededRandomness` for deterministic audits); report
    ids always come from the OS CSPRNG, as on a device. An invalid ``value`` raises
    :class:`~.errors.InvalidInput` naming the metric, never the value.
    """
    if count < 1:
        raise InvalidInput("count must be at least 1")
    if spec.events is not None:
        return window_reports(spec, value, count, randomness=randomness)
    recorder = Recorder(
        Ledger(secrets.token_bytes(32), max_reports_per_period=count, lifetime_epsilon=None),
        Counters(),
        on_unknown=_unknown,
        memoize=False,
        max_queue=count,
        clock=clock,
        randomness=randomness,
    )
    recorder.install([spec])
    record, name = recorder.record, spec.name
    runs: list[str] = []
    for start in range(0, count, CHUNK):
        for _ in range(min(CHUNK, count - start)):
            record(name, value)
        reports, _delta, _events = recorder.drain()
        runs.append(join_reports(report_text(*report) for report in reports))
        recorder.drained()
    return batch_body(runs)


WINDOW_START = dt.date(2000, 1, 3)
"""The first day of a window sample's simulated calendar (a Monday, so ISO weeks start on it);
a fresh recorder starts here again every :data:`CHUNK` windows, so even month windows stay
far inside the calendar."""


def _stream(spec: MetricSpec, value: Any) -> tuple[int, Any]:
    """How one day's events make a window of ``spec`` aggregate to ``value``: how many times
    to call ``event()`` (``any``, ``count``) or ``observe(value)`` once (the others).
    :class:`~.errors.InvalidInput` if no stream gives ``value`` (a count that is not a whole
    number of events)."""
    rule = spec.events
    if rule is None:
        raise InvalidInput(f"metric {spec.name} does not aggregate events")
    if rule.aggregate == "any":
        if not isinstance(value, bool):
            raise InvalidInput(f"metric {spec.name}: an any window holds true or false")
        return int(value), None
    if rule.aggregate == "count":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(f"metric {spec.name}: a count window holds a number of events")
        if not (math.isfinite(value) and value >= 0 and value == int(value)):
            raise InvalidInput(f"metric {spec.name}: a count window holds a whole number of events")
        return int(value), None
    return 1, value


def window_reports(
    spec: MetricSpec,
    value: Any,
    count: int,
    *,
    randomness: Randomness | None = None,
) -> bytes:
    """The ``POST /v1/reports`` body of ``count`` windows of an event metric that each
    aggregate to ``value``, through the device's own event path: ``event()`` or ``observe()``
    on one day of each window (every window of a rolling one holds exactly one such day:
    they are ``window`` days apart), the recorder marking each day active and closing the
    windows due as its periodic commit does, with a ledger that admits every report.

    A calendar window (a day, an ISO week, a month) gets its events on its first day and is
    closed on the next window's first day; a rolling window of N days is reported every day,
    so the stream's days are N apart. Memoization is off (the auditor checks the randomizer);
    ``randomness`` as for :func:`randomized_reports`.
    """
    if count < 1:
        raise InvalidInput("count must be at least 1")
    rule = spec.events
    if rule is None:
        raise InvalidInput(f"metric {spec.name} does not aggregate events")
    times, observed = _stream(spec, value)
    runs: list[str] = []
    for start in range(0, count, CHUNK):
        runs.extend(_window_chunk(spec, times, observed, min(CHUNK, count - start), randomness))
    return batch_body(runs)


def _window_chunk(
    spec: MetricSpec, times: int, observed: Any, count: int, randomness: Randomness | None
) -> list[str]:
    """``count`` window reports from a fresh recorder whose calendar starts at
    :data:`WINDOW_START` (see :func:`window_reports`), as wire texts."""
    rule = spec.events
    if rule is None:
        raise InvalidInput(f"metric {spec.name} does not aggregate events")
    first = day_number(WINDOW_START)
    today = [first - 1]
    recorder = Recorder(
        Ledger(secrets.token_bytes(32), max_reports_per_period=1, lifetime_epsilon=None),
        Counters(),
        on_unknown=_unknown,
        memoize=False,
        max_queue=count + 1,
        clock=lambda: dt.datetime.combine(day_date(today[0]), dt.time(12), dt.UTC),
        randomness=randomness,
    )
    recorder.install([spec])  # known the day before: the first window starts at WINDOW_START
    recorder.drain()
    if rule.counted:
        name = spec.name

        def happen() -> None:
            for _ in range(times):
                recorder.event(name)
    else:

        def happen() -> None:
            recorder.observe(spec.name, observed)

    reports: list[Any] = []
    day = first
    while len(reports) < count:
        today[0] = day
        if rule.rolling:
            if (day - first) % rule.window == 0:
                happen()
            step = 1
        else:
            happen()
            label = period_label(spec.period, day_date(day))
            step = day_number(period_start(spec.period, next_period(spec.period, label))) - day
        taken, _delta, _events = recorder.drain()  # marks the day active, closes what is due
        reports.extend(taken)
        recorder.drained()
        day += step
    today[0] = day
    taken, _delta, _events = recorder.drain()
    reports.extend(taken)
    return [join_reports(report_text(*report) for report in reports[:count])]
