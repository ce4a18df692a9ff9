"""Resource benchmark: hostile requests against a collector held to its pod's memory limit.

It starts a real collector (``deniable serve`` on a SQLite file or PostgreSQL) inside a memory
cgroup limited like the shipped pod (512 MiB by default), registers an olh metric with
k = 10,000, a duchi metric with 30 reports, a small metric for other clients' uploads and
(``--overview-metrics``) enough others for a long dashboard overview. For each request of
issue 24, and for the largest reads the limits allow, it sends one copy and then ``--copies``
concurrent copies (each client giving up after ``--client-timeout`` seconds), while another
client uploads a small batch every 0.2 s. Each row
says what the requests got, the collector's peak memory (the cgroup's high-water mark), the
slowest of the other client's uploads during the round (the target is under 2 s) and whether
the collector was still alive and healthy afterwards. Run (as root, for the cgroup):
``.venv/bin/python -m bench.resources [--backend sqlite|postgresql] [--copies 50]``.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import datetime as dt
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
from deniable.client import MetricSpec

from testkit import (
    INGEST_KEY,
    VIEWER_TOKEN,
    CollectorProcess,
    collector_settings,
    make_numeric_reports,
    make_reports,
    register_all,
    scratch_database,
)

UPLOAD_EVERY = 0.2
"""Seconds between the other client's uploads."""
UPLOAD_TARGET = 2.0
"""The slowest acceptable upload of the other client while the hostile requests run."""


class MemoryCgroup:
    """A cgroup (v1 or v2) that caps a process tree's memory and reports its high-water mark."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.path = self._create()

    @staticmethod
    def _own(controller_root: Path, v2: bool) -> Path:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            if (v2 and number == "0") or (not v2 and "memory" in controllers.split(",")):
                return controller_root / path.lstrip("/")
        return controller_root

    def _create(self) -> Path:
        v1 = Path("/sys/fs/cgroup/memory")
        v2 = not v1.is_dir()
        root = Path("/sys/fs/cgroup") if v2 else v1
        path = self._own(root, v2) / f"deniable-bench-{os.getpid()}"
        path.mkdir()
        self.v2 = v2
        limit_file = "memory.max" if v2 else "memory.limit_in_bytes"
        (path / limit_file).write_text(str(self.limit))
        swap = path / ("memory.swap.max" if v2 else "memory.memsw.limit_in_bytes")
        with contextlib.suppress(OSError):
            swap.write_text("0" if v2 else str(self.limit))
        return path

    def add(self, pid: int) -> None:
        """Move ``pid`` (and its future children) into the cgroup."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def peak_and_reset(self) -> int:
        """The high-water mark since the last reset, in bytes; then reset it."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        peak = int((self.path / name).read_text())
        with contextlib.suppress(OSError):
            (self.path / name).write_text("0")
        return peak

    def remove(self) -> None:
        """Remove the (empty) cgroup."""
        with contextlib.suppress(OSError):
            self.path.rmdir()


class Uploads:
    """Another client uploading one small batch every :data:`UPLOAD_EVERY` seconds."""

    def __init__(self, url: str, spec: MetricSpec, period: str) -> None:
        self.url, self.spec, self.period = url, spec, period
        self.latencies: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {INGEST_KEY}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30.0) as client:
            seed = 0
            while not self._stop.is_set():
                seed += 1
                body = {"reports": make_reports(self.spec, [seed % 2] * 10, self.period, seed)}
                began = time.monotonic()
                try:
                    ok = client.post("/v1/reports", json=body).status_code == 202
                except httpx.HTTPError:
                    ok = False
                self.latencies.append(time.monotonic() - began)
                self.failures += not ok
                self._stop.wait(UPLOAD_EVERY)

    def __enter__(self) -> Uploads:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


Request = Callable[[httpx.Client], httpx.Response]


def hostile_requests(
    big: MetricSpec, numbers: MetricSpec, today: dt.date
) -> dict[str, tuple[str, Request]]:
    """Each request of issue 24 by name: (who sends it, how)."""

    def days_back(count: int) -> dict[str, str]:
        return {"start": str(today - dt.timedelta(days=count - 1)), "end": str(today)}

    empty_items = b'{"reports":[' + b",".join([b"{}"] * 349_000) + b"]}"
    return {
        "privacy lifetime 1e300": (
            "viewer",
            lambda c: c.get("/v1/privacy", params={"lifetime_epsilon": "1e300"}),
        ),
        "dashboard privacy 1e300": (
            "session",
            lambda c: c.get("/dashboard/privacy", params={"lifetime_epsilon": "1e300"}),
        ),
        "349,000 empty items": (
            "ingest",
            lambda c: c.post(
                "/v1/reports", content=empty_items, headers={"Content-Type": "application/json"}
            ),
        ),
        "series k=10,000 x 181": (
            "viewer",
            lambda c: c.get(f"/v1/metrics/{big.name}/series", params=days_back(181)),
        ),
        "series k=10,000 x 1,060": (
            "viewer",
            lambda c: c.get(f"/v1/metrics/{big.name}/series", params=days_back(1060)),
        ),
        "dashboard k=10,000 x 1,100": (
            "session",
            lambda c: c.get(f"/dashboard/metrics/{big.name}", params=days_back(1100)),
        ),
        "series k=10,000 x 5 (most allowed)": (
            "viewer",
            lambda c: c.get(f"/v1/metrics/{big.name}/series", params=days_back(5)),
        ),
        "dashboard k=10,000, default range": (
            "session",
            lambda c: c.get(f"/dashboard/metrics/{big.name}"),
        ),
        "dashboard overview": ("session", lambda c: c.get("/dashboard/")),
        "duchi pooling=independent": (
            "viewer",
            lambda c: c.get(
                f"/v1/metrics/{numbers.name}/estimate", params={"pooling": "independent"}
            ),
        ),
        "top=² on a metric page": (
            "session",
            lambda c: c.get(f"/dashboard/metrics/{big.name}", params={"top": "²"}),
        ),
    }


def open_client(url: str, who: str, timeout: float) -> httpx.Client:
    """A client holding the viewer token, the ingest key or a dashboard session."""
    if who == "session":
        client = httpx.Client(base_url=url, timeout=timeout)
        client.post("/dashboard/sign-in", data={"token": VIEWER_TOKEN})
        return client
    token = VIEWER_TOKEN if who == "viewer" else INGEST_KEY
    return httpx.Client(base_url=url, timeout=timeout, headers={"Authorization": f"Bearer {token}"})


def fire(url: str, who: str, request: Request, copies: int, timeout: float) -> list[str]:
    """Send ``copies`` concurrent copies of ``request``; what each got (a status or an error)."""

    def one(_: int) -> str:
        try:
            with contextlib.closing(open_client(url, who, timeout)) as client:
                return str(request(client).status_code)
        except httpx.TimeoutException:
            return "gave up"
        except httpx.HTTPError as exc:
            return type(exc).__name__

    with concurrent.futures.ThreadPoolExecutor(copies) as pool:
        return list(pool.map(one, range(copies)))


def healthy(url: str) -> bool:
    """Whether the collector answers ``/healthz`` within 5 s."""
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url + "/healthz", timeout=5.0).status_code == 200
    return False


@contextlib.contextmanager
def collector(
    database_url: str, directory: Path, cgroup: MemoryCgroup
) -> Iterator[CollectorProcess]:
    """A collector process in ``cgroup``, started with a viewer token."""
    settings = collector_settings(database_url, viewer_token=VIEWER_TOKEN)
    server = CollectorProcess(settings, directory).launch()
    cgroup.add(server.pid)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def measure(
    server: CollectorProcess,
    cgroup: MemoryCgroup,
    small: MetricSpec,
    today: dt.date,
    args: argparse.Namespace,
    case: tuple[str, str, Request],
    copies: int,
) -> list[str]:
    """One row: ``copies`` copies of the case's request while another client uploads."""
    name, who, request = case
    cgroup.peak_and_reset()
    began = time.monotonic()
    with Uploads(server.url, small, str(today)) as uploads:
        got = fire(server.url, who, request, copies, args.client_timeout)
        time.sleep(1.0)
    took = time.monotonic() - began
    alive = server.process.poll() is None and healthy(server.url)
    counts = collections.Counter(got)
    return [
        name,
        str(copies),
        ", ".join(f"{k}×{v}" for k, v in sorted(counts.items())),
        f"{took:.1f}",
        f"{cgroup.peak_and_reset() / 2**20:.0f}",
        f"{max(uploads.latencies, default=float('nan')):.2f}",
        str(uploads.failures),
        "yes" if alive else "NO",
    ]


def run(args: argparse.Namespace) -> None:
    """Set up the metrics, run every request at 1 and ``--copies`` copies, print the table."""
    today = dt.datetime.now(dt.UTC).date()
    big = MetricSpec.categorical(
        "big_olh", [f"c{i}" for i in range(10_000)], epsilon=1.0, mechanism="olh"
    )
    numbers = MetricSpec.numeric("load_ms", lower=0, upper=1000, epsilon=1.0, mechanism="duchi")
    small = MetricSpec.boolean("other_app", epsilon=1.0)
    extra = [
        MetricSpec.boolean(f"extra_{i:04d}", epsilon=1.0) for i in range(args.overview_metrics)
    ]
    cgroup = MemoryCgroup(args.memory_mib * 2**20)
    rows: list[list[str]] = []
    with (
        tempfile.TemporaryDirectory() as scratch,
        scratch_database(args.backend, Path(scratch), "resources") as database_url,
    ):
        directory = Path(scratch)
        try:
            with collector(database_url, directory, cgroup) as server:
                register_all(server.url, [big, numbers, small, *extra])
                with contextlib.closing(open_client(server.url, "ingest", 30.0)) as ingest:
                    reports = make_numeric_reports(numbers, [500.0] * 30, str(today), seed=1)
                    ingest.post("/v1/reports", json={"reports": reports}).raise_for_status()
            for name, (who, request) in hostile_requests(big, numbers, today).items():
                with collector(database_url, directory, cgroup) as server:
                    for copies in (1, args.copies):
                        rows.append(
                            measure(
                                server, cgroup, small, today, args, (name, who, request), copies
                            )
                        )
                        print(" | ".join(rows[-1]), flush=True)
                        if server.process.poll() is not None:
                            break
        finally:
            cgroup.remove()
    header = [
        "request",
        "copies",
        "answers",
        "s",
        "peak MiB",
        "slowest upload s",
        "failed",
        "alive",
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\nbackend {args.backend}, collector limited to {args.memory_mib} MiB")
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    bad = [r[0] for r in rows if r[7] != "yes" or float(r[5]) >= UPLOAD_TARGET or "500" in r[2]]
    print(f"\n{'all rows within target' if not bad else 'over target: ' + ', '.join(bad)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--copies", type=int, default=50)
    parser.add_argument("--memory-mib", type=int, default=512)
    parser.add_argument("--client-timeout", type=float, default=30.0)
    parser.add_argument("--overview-metrics", type=int, default=1505)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
