"""Event SDK benchmark (issue 40): ``event()`` and ``observe()`` calls per second, and memory
after 1e4, 1e5 and 1e6 events.

Run: ``.venv/bin/python -m bench.events [--calls 1000000] [--profile]``. Each call goes through
a whole :class:`~deniable.client.Client` (state in a temporary ``state_dir``, collector
unreachable, the background commit running every ``persist_interval`` = 0.5 s on the system
clock), so the figures include the lock the commit shares. Throughput is the best of three runs
on this thread (the machine is shared). Memory is what ``tracemalloc`` says the process holds
after each number of events, beyond what it held before the first: one aggregate per metric
and day, so it must not grow with the number of events. ``--profile`` prints cProfile's view
of a million ``event()`` calls.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import resource
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deniable.client import Client, MetricSpec

SPECS = [
    MetricSpec.boolean("bench_any", epsilon=1.0).with_events("any", window=7),
    MetricSpec.histogram("bench_count", (0, 1, 2, 5, 10, 100), epsilon=1.0).with_events("count"),
    MetricSpec.numeric("bench_mean", lower=0.0, upper=5000.0, epsilon=1.0).with_events("mean"),
    MetricSpec.numeric("bench_max", lower=0.0, upper=5000.0, epsilon=1.0).with_events("max"),
    MetricSpec.numeric("bench_median", lower=0.0, upper=5000.0, epsilon=1.0).with_events("median"),
    MetricSpec.categorical("bench_mode", ["a", "b", "c", "d"], epsilon=1.0).with_events("mode"),
]
CASES: list[tuple[str, str, Any]] = [
    ("event", "bench_any", None),
    ("event", "bench_count", None),
    ("observe", "bench_mean", 812.5),
    ("observe", "bench_max", 812.5),
    ("observe", "bench_median", 812.5),
    ("observe", "bench_mode", "c"),
]
DEAD_URL = "http://127.0.0.1:9"


def calls(client: Client, call: str, metric: str, value: Any) -> Callable[[int], None]:
    """A loop of ``n`` calls of ``client.event(metric)`` or ``client.observe(metric, value)``."""
    if call == "event":
        event = client.event

        def events(n: int) -> None:
            for _ in range(n):
                event(metric)

        return events
    observe = client.observe

    def observations(n: int) -> None:
        for _ in range(n):
            observe(metric, value)

    return observations


def best_rate(loop: Callable[[int], None], n: int, repeats: int = 3) -> float:
    """Calls per second: the best of ``repeats`` runs of ``n`` calls."""
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        loop(n)
        best = max(best, n / (time.perf_counter() - started))
    return best


def throughput(client: Client, n: int) -> list[tuple[str, str, float]]:
    """Calls per second of each case, after the machine's pace: a loop calling a method that
    does nothing (the most any SDK call could reach on this machine now)."""

    class Nothing:
        def event(self, metric: str) -> bool:
            return True

    nothing = Nothing().event

    def empty(n: int) -> None:
        for _ in range(n):
            nothing("bench_any")

    return [("(empty call)", "", best_rate(empty, n))] + [
        (f"{call}()", metric, best_rate(calls(client, call, metric, value), n))
        for call, metric, value in CASES
    ]


def memory(client: Client) -> list[tuple[int, int, int]]:
    """(events, bytes tracemalloc says are held beyond the start, peak RSS KiB) after 1e4,
    1e5 and 1e6 more ``event()`` and ``observe()`` calls."""
    loops = [calls(client, call, metric, value) for call, metric, value in CASES[:3]]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    rows, done = [], 0
    for target in (10_000, 100_000, 1_000_000):
        for loop in loops:
            loop((target - done) // len(loops))
        done = target
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        rows.append((target, held, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    tracemalloc.stop()
    return rows


def profile(client: Client, n: int) -> None:
    """cProfile of ``n`` ``event()`` calls, the ten costliest functions."""
    loop = calls(client, "event", "bench_count", None)
    profiler = cProfile.Profile()
    profiler.runcall(loop, n)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(10)


def main() -> None:
    """Print the throughput table and the memory table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        client = Client(DEAD_URL, state_dir=Path(folder), metrics=SPECS, timeout=0.5)
        try:
            rows = throughput(client, args.calls)
            print(f"{'call':<12} {'metric':<14} {'calls/s':>12}")
            for call, metric, rate in rows:
                print(f"{call:<12} {metric:<14} {rate:>12,.0f}")
            print()
            print(f"{'events':>10} {'held (bytes)':>14} {'peak RSS (KiB)':>16}")
            for events, held, rss in memory(client):
                print(f"{events:>10,} {held:>14,} {rss:>16,}")
            if args.profile:
                profile(client, args.calls)
        finally:
            client.close(timeout=0.1)


if __name__ == "__main__":
    main()
