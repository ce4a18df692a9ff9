"""Client SDK benchmark: ``record()`` throughput with the OS CSPRNG, and delivery to a collector.

Run: ``.venv/bin/python -m bench.client [--records 200000] [--deliver 50000] [--url URL]``.
Without ``--url``, delivery is measured to the loopback stub (testkit/stub_collector.py, in this
process, so it shares the GIL) and to ``deniable serve`` on SQLite in a subprocess; with
``--url`` the bench metrics must already be registered there.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from deniable.client import Client, MetricSpec
from testkit import real_collector, spare_port
from testkit.stub_collector import StubCollector

SPECS = [
    MetricSpec.boolean("bench_brr", epsilon=1.0),
    MetricSpec.categorical("bench_krr", [f"k{i}" for i in range(8)], epsilon=1.0, mechanism="krr"),
    MetricSpec.categorical("bench_oue", [f"o{i}" for i in range(32)], epsilon=1.0, mechanism="oue"),
    MetricSpec.categorical(
        "bench_olh", [f"h{i}" for i in range(200)], epsilon=1.0, mechanism="olh"
    ),
]
VALUES: dict[str, Any] = {
    "bench_brr": True,
    "bench_krr": "k3",
    "bench_oue": "o7",
    "bench_olh": "h42",
}
DEAD_URL = "http://127.0.0.1:9"


def time_records(client: Client, metric: str, n: int, repeats: int = 3) -> float:
    """Calls per second of ``client.record(metric, value)`` on this thread: the best of
    ``repeats`` runs of ``n`` calls (the machine is shared, so the best run is the signal)."""
    record, value = client.record, VALUES[metric]
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(n):
            record(metric, value)
        best = max(best, n / (time.perf_counter() - started))
    return best


def record_table(n: int) -> list[tuple[str, str, float]]:
    """record() throughput per mechanism: admitted (randomized + queued), memoized, over budget."""
    rows = []
    cases: list[tuple[str, dict[str, Any]]] = [
        ("admitted", {"max_reports_per_period": 10**9}),
        ("memoized", {"max_reports_per_period": 10**9, "memoize": True}),
        ("over budget", {}),
    ]
    for label, options in cases:
        with tempfile.TemporaryDirectory() as state_dir:
            client = Client(
                DEAD_URL,
                state_dir=state_dir,
                metrics=SPECS,
                max_queue=10**7,
                backoff_base=3600,
                **options,
            )
            for spec in SPECS:
                client.record(spec.name, VALUES[spec.name])
                rows.append((spec.mechanism, label, time_records(client, spec.name, n)))
            client.close(timeout=0.1)
    return rows


def delivery_rate(n: int, url: str | None) -> tuple[float, int]:
    """Reports per second from a full outbox to the collector, and how many were delivered.

    The reports are recorded by a client that cannot reach any collector and closed (so they
    wait in its state_dir, as after an app ran offline); a new client on that state_dir then
    delivers them, and only that is timed. ``url=None`` uses the in-process stub.
    """
    stub = StubCollector(SPECS, port=spare_port()).start() if url is None else None
    options: dict[str, Any] = {
        "metrics": SPECS,
        "max_reports_per_period": 10**9,
        "max_queue": 10**7,
        "flush_interval": 3600,
        "backoff_base": 0.01,
        "backoff_cap": 0.05,
    }
    with tempfile.TemporaryDirectory() as state_dir:
        offline = Client(DEAD_URL, state_dir=state_dir, **options)
        for i in range(n):
            spec = SPECS[i % len(SPECS)]
            offline.record(spec.name, VALUES[spec.name])
        offline.close(timeout=0.1)
        client = Client(stub.url if stub else url or "", state_dir=state_dir, **options)
        started = time.perf_counter()
        client.flush(timeout=600)
        elapsed = time.perf_counter() - started
        delivered = client.stats.delivered
        client.close()
    if stub:
        stub.stop()
    return delivered / elapsed, delivered


@contextmanager
def real_collector_url() -> Iterator[str | None]:
    """``deniable serve`` on SQLite in a subprocess with the bench metrics registered, or
    ``None`` if it cannot start."""
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        url: str | None = None
        try:
            url = stack.enter_context(real_collector(SPECS, Path(tmp)))
        except Exception as exc:
            print(f"(real collector not measured: {exc})")
        yield url


def print_table(title: str, header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """A plain fixed-width table."""
    fmt: Callable[[Any], str] = lambda v: f"{v:,.0f}" if isinstance(v, float) else str(v)  # noqa: E731
    cells = [header, *[tuple(fmt(v) for v in row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for j, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        if j == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000, help="record() calls per case")
    parser.add_argument("--deliver", type=int, default=50_000, help="reports to deliver")
    parser.add_argument("--url", default=None, help="a running collector (default: stub)")
    args = parser.parse_args()
    rows = record_table(args.records)
    print_table(
        f"record() throughput, one thread, OS CSPRNG (best of 3 runs of {args.records:,} calls)",
        ("mechanism", "path", "records/s"),
        rows,
    )
    targets: list[tuple[str, str | None]] = []
    if args.url:
        targets.append((args.url, args.url))
    else:
        targets.append(("in-process stub", None))
    delivery = [(name, *delivery_rate(args.deliver, url)[::-1]) for name, url in targets]
    if not args.url:
        with real_collector_url() as url:
            if url:
                delivery.append(
                    ("deniable serve (SQLite)", *delivery_rate(args.deliver, url)[::-1])
                )
    print_table(
        f"delivery of {args.deliver:,} queued reports over loopback (batches of 1000)",
        ("collector", "reports", "reports/s"),
        delivery,
    )


if __name__ == "__main__":
    main()
