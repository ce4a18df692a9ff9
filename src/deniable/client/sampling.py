"""Many reports of one value through the real recording path, for auditing the randomizers.

:func:`randomized_reports` is what a device would upload after ``count`` calls of
``record(spec.name, value)``: the same :class:`~.recorder.Recorder` (``prepare``, ledger
admission, ``randomize``, the queue) and the same wire encoding as the outbox and the uploader
(:mod:`.wire`), with a ledger that admits every report. It exists so that the auditor
(:mod:`deniable.estimators.audit`) checks the code that ships, not a re-implementation of it.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable
from typing import Any

from .errors import InvalidInput, SpecError
from .ledger import Ledger
from .randomness import Randomness
from .recorder import Recorder
from .spec import MetricSpec
from .stats import Counters
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
