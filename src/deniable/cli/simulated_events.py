"""Simulated devices whose events go through the SDK's event path, for ``simulate`` and ``demo``.

The honesty rules of :mod:`.simulated_devices` hold (one Client per batch of devices,
memoization off, its per-period budget raised to the batch's size, fresh randomness for every
report), and one more: each device has its own window state, a
:class:`~deniable.client.windows.WindowBook` the batch's Client switches to before the
device's days (:meth:`~deniable.client.recorder.Recorder.switch_windows`). A device's day is
what a real device's is: the clock set to it, ``event()`` or ``observe()`` as often as its
stream says, and the SDK's commit, which marks the day active and reports every window due.
So each device sends one report per window it was active in, whatever its number of events,
exactly as it would with a Client of its own; the windows' values are computed by the SDK, and
the truth printed beside them is computed here from the streams, independently.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deniable.client.errors import InvalidInput

from .simulated_devices import (
    DEVICES_PER_CLIENT,
    Delivery,
    RefusalWitness,
    _flush,
    check_batch,
)

NOON = dt.time(12, tzinfo=dt.UTC)
"""The time of day a simulated device's day happens at."""


@dataclass(frozen=True)
class DeviceDays:
    """One simulated device: the days it was active on (an SDK client open; offsets from the
    first simulated day) and, per metric and active day, what happened: a number of events
    (``event()``) or the values observed (``observe()``)."""

    active: tuple[int, ...]
    events: dict[str, dict[int, Any]] = field(default_factory=dict)


def poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw of ``mean`` (Knuth's product of uniforms, in steps of 30 for a large
    mean so that exp(-mean) never underflows)."""
    count, left = 0, mean
    while left > 0:
        step = min(left, 30.0)
        left -= step
        limit, product = math.exp(-step), rng.random()
        while product > limit:
            count += 1
            product *= rng.random()
    return count


def true_value(aggregate: str, happened: Sequence[Any], categories: Sequence[str] = ()) -> Any:
    """What a window aggregates to, from what happened on its active days (numbers of events
    for ``any`` and ``count``, lists of observed values for the others), computed here rather
    than by the SDK (a mode's tie goes to the category listed first in ``categories``, as the
    SDK's rule says); None when the window holds no observation."""
    if aggregate == "any":
        return sum(happened) > 0
    if aggregate == "count":
        return sum(happened)
    values = [v for day in happened for v in day]
    if aggregate == "sum":
        return math.fsum(values)
    if not values:
        return None
    if aggregate == "mean":
        return math.fsum(values) / len(values)
    if aggregate == "min":
        return min(values)
    if aggregate == "max":
        return max(values)
    if aggregate == "last":
        return values[-1]
    if aggregate == "median":
        return statistics.median_low(values)
    counts = Counter(values)
    most = max(counts.values())
    return min((v for v in counts if counts[v] == most), key=list(categories).index)


def run_event_devices(
    collector_url: str,
    specs: Sequence[Any],
    devices: Sequence[DeviceDays],
    *,
    first_day: dt.date,
    days: int,
    known: dict[str, int] | None = None,
    ingest_key: str | None = None,
    seed: int | None = None,
    on_batch: Callable[[int], None] | None = None,
    timeout: float = 60.0,
) -> Delivery:
    """Drive ``devices`` through the SDK's event path, ``days`` days from ``first_day``.

    Each spec is known to every device from ``known[name]`` (a day offset; default -1, the day
    before the first, so its first window starts on ``first_day``). On each of its active
    days in [0, days) a device makes its events happen and the SDK commits; on day ``days``
    every device opens once more (as an app is opened again), and the windows that closed are
    sent. ``on_batch(devices)`` is called after each batch is delivered.
    """
    from deniable.client import Client, SeededRandomness, system_randomness
    from deniable.client.mechanisms import MAX_EPSILON
    from deniable.client.windows import WindowBook, day_number

    rng = SeededRandomness(seed) if seed is not None else system_randomness
    base = day_number(first_day)
    known = known or {}
    groups: dict[int, list[Any]] = {}
    for spec in specs:
        if spec.events is None:
            raise InvalidInput(f"metric {spec.name} does not aggregate events")
        groups.setdefault(known.get(spec.name, -1), []).append(spec)
    earliest = min(groups, default=-1)
    counted = {spec.name: spec.events.counted for spec in specs}
    now = [dt.datetime.combine(first_day + dt.timedelta(days=earliest), NOON)]
    template = WindowBook()
    for offset in sorted(groups):
        template.install(groups[offset], base + offset)
    totals = Delivery(0, 0, 0, 0, 0)
    witness = RefusalWitness()
    with tempfile.TemporaryDirectory(prefix="deniable-sim-") as state_root:
        for start in range(0, len(devices), DEVICES_PER_CLIENT):
            stop = min(start + DEVICES_PER_CLIENT, len(devices))
            now[0] = dt.datetime.combine(first_day + dt.timedelta(days=earliest), NOON)
            client = Client(
                collector_url,
                state_dir=Path(state_root) / f"batch-{start}",
                ingest_key=ingest_key,
                metrics=list(specs),
                max_epsilon=MAX_EPSILON,
                max_reports_per_period=stop - start,
                memoize=False,
                clock=lambda: now[0],
                randomness=rng,
                flush_interval=3600.0,
                persist_interval=1.0,
                transport=witness.transport(),
            )
            recorder = client._recorder
            try:
                for device in devices[start:stop]:
                    book = _fresh_copy(template)
                    # the clock goes back to the new device's first day before its book is
                    # installed: a commit in between leaves either device's windows as they are
                    now[0] = dt.datetime.combine(first_day + dt.timedelta(days=earliest), NOON)
                    recorder.switch_windows(book)
                    for offset in sorted({d for d in device.active if 0 <= d < days} | {days}):
                        now[0] = dt.datetime.combine(first_day + dt.timedelta(days=offset), NOON)
                        for name, happened in device.events.items():
                            what = happened.get(offset) if offset < days else None
                            if not what:
                                continue
                            if counted[name]:
                                for _ in range(what):
                                    client.event(name)
                            else:
                                for value in what:
                                    client.observe(name, value)
                        recorder.commit_windows()
                delivered = _flush(client, timeout)
                stats = client.stats
            finally:
                client.close(timeout=1.0)
            totals = Delivery(
                totals.recorded + stats.recorded,
                totals.delivered + stats.delivered,
                totals.duplicates + stats.duplicates,
                totals.rejected + stats.dropped_rejected,
                totals.over_budget + stats.over_budget,
            )
            check_batch(collector_url, stats, stats.over_budget, delivered, witness, timeout)
            if on_batch is not None:
                on_batch(stop - start)
    return totals


def _fresh_copy(template: Any) -> Any:
    """A new device's window state: ``template``'s (the specs installed on their days), with
    no day counted and no day active yet."""
    from deniable.client.windows import MetricDays, WindowBook

    book = WindowBook()
    book.metrics = {
        name: MetricDays(state.fingerprint, state.reported_through)
        for name, state in template.metrics.items()
    }
    book.newest = template.newest
    return book


def event_streams(
    spec: Any,
    clients: int,
    days: int,
    *,
    active: float,
    rate: float,
    rng: random.Random,
    weights: Sequence[float] | None = None,
) -> list[DeviceDays]:
    """``clients`` devices' streams over ``days`` days for one event metric: each device is
    active (the app open) on each day with chance ``active``. For an ``any`` metric the event
    occurs on an active day with the device's own chance, beta-distributed with mean
    ``rate``; otherwise a device has a Poisson number of events (or observations) on each
    active day, of mean ``rate`` times its own factor (gamma-distributed, mean 1, shape 1/2:
    most devices rarely, a few often). Observed values are lognormal numbers in the metric's
    range (numeric, histogram) or categories in ``weights``' shares (``mode``)."""
    from .kindrender import render_of
    from .simulated_devices import LOGNORMAL_MEDIAN, LOGNORMAL_SIGMA

    rule = spec.events
    bounds = render_of(spec).number_range
    low, high = bounds(spec) if bounds is not None else (0.0, 0.0)
    offset = LOGNORMAL_MEDIAN * (high - low)
    streams = []
    for _ in range(clients):
        on = tuple(d for d in range(days) if rng.random() < active)
        happened: dict[int, Any] = {}
        if rule.aggregate == "any":
            own = rng.betavariate(4 * rate, 4 * (1 - rate)) if 0 < rate < 1 else rate
            happened = {d: 1 for d in on if rng.random() < own}
        else:
            own = rate * rng.gammavariate(0.5, 2.0)
            for d in on:
                times = poisson(rng, own)
                if rule.aggregate == "count":
                    happened[d] = times
                elif weights is not None:
                    picks = rng.choices(range(len(weights)), weights, k=times)
                    happened[d] = [spec.categories[i] for i in picks]
                else:
                    happened[d] = [
                        min(high, max(low, low + offset * math.exp(rng.gauss(0, LOGNORMAL_SIGMA))))
                        for _ in range(times)
                    ]
        streams.append(DeviceDays(on, {spec.name: happened}))
    return streams


def window_truth(spec: Any, devices: Sequence[DeviceDays], first: int, last: int) -> list[Any]:
    """The true values of the window of days first..last (offsets) of every device that
    reports it: active on one of its days, and with a value (an empty window only where the
    rule reports it); numbers clamped to the metric's range, as the SDK clamps them."""
    from .kindrender import render_of

    rule = spec.events
    bounds = render_of(spec).number_range
    low, high = bounds(spec) if bounds is not None else (-math.inf, math.inf)
    values = []
    for device in devices:
        if not any(first <= d <= last for d in device.active):
            continue
        happened = device.events.get(spec.name, {})
        days = [
            happened.get(d, 0 if rule.counted else [])
            for d in range(first, last + 1)
            if d in happened
        ]
        value = true_value(rule.aggregate, days, spec.categories)
        if value is None or (not rule.report_empty and not any(days)):
            continue
        values.append(value if isinstance(value, bool | str) else min(high, max(low, value)))
    return values
