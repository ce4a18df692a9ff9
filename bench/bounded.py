"""Bounded work per request (issue 24): time and peak memory of the requests that were not.

Each section starts a real collector (``deniable serve``, one worker, SQLite in a scratch
directory, no tokens: loopback) and prints a table: the request, its status, its seconds,
the response's size and the collector's peak memory above its memory before the request
(``VmHWM`` minus ``VmRSS`` of ``/proc/PID/status``; the peak is reset through
``/proc/PID/clear_refs`` before each request, which needs Linux and the right to write it).

1. ``privacy``: ``GET /v1/privacy?lifetime_epsilon=X`` for growing X (10 s client timeout);
2. ``upload``: ``POST /v1/reports`` of a 1 MiB body of 349,000 empty objects, alone and four
   at once, and the in-process time to parse a valid batch of 1,000 reports;
3. ``reads``: an olh metric with k = 10,000 and no reports: ``/series`` and ``/estimate`` over
   long ranges, the dashboard's metric page, and the overview with 1,505 metrics.

Run: ``.venv/bin/python -m bench.bounded [--section privacy|upload|reads|all] [--skip-long]``
(``--skip-long`` leaves out the 1,060-period series and the 1,100-period dashboard page, which
took minutes before the limits).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

from deniable.client import MetricSpec
from deniable.client.spec import period_label
from deniable.collector.routes.reports import parse_batch
from deniable.collector.schemas import BATCH_PARSER
from testkit import CollectorProcess, collector_settings, register_all

TIMEOUT = 10.0
"""Seconds a request gets before the table says ``timeout``."""
EMPTY_ITEMS = 349_000
"""Empty objects in the 1 MiB upload: ``{}`` and a comma each."""


def status_field(pid: int, name: str) -> int:
    """A ``/proc/PID/status`` field in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise KeyError(name)


def reset_peak(pid: int) -> None:
    """Make ``VmHWM`` start again from the current resident size."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def measure(pid: int, call: Callable[[], httpx.Response | str]) -> tuple[str, float, str, float]:
    """(status, seconds, response size, peak MB above the resident size before) of ``call``."""
    reset_peak(pid)
    before = status_field(pid, "VmRSS")
    started = time.perf_counter()
    try:
        response = call()
    except httpx.TimeoutException:
        response = "timeout"
    seconds = time.perf_counter() - started
    peak = (status_field(pid, "VmHWM") - before) / 1024
    if isinstance(response, str):
        return response, seconds, "-", peak
    return str(response.status_code), seconds, f"{len(response.content) / 1e6:.2f} MB", peak


def row(what: str, result: tuple[str, float, str, float]) -> None:
    status, seconds, size, peak = result
    print(f"| {what} | {status} | {seconds:.2f} | {size} | {peak:+.0f} |", flush=True)


def header(title: str) -> None:
    print(
        f"\n{title}\n\n| request | status | seconds | response | peak MB |\n|---|---|---|---|---|"
    )


def serve(directory: Path) -> CollectorProcess:
    """An open collector (no tokens, loopback) on a new SQLite file."""
    settings = collector_settings(
        f"sqlite:///{directory}/bench.db", admin_token=None, ingest_key=None
    )
    return CollectorProcess(settings, directory).start()


def privacy(directory: Path) -> None:
    header("GET /v1/privacy?lifetime_epsilon=X (one eps-1 metric)")
    server = serve(directory)
    try:
        register_all(server.url, [MetricSpec.boolean("flag", epsilon=1.0)])
        with httpx.Client(base_url=server.url, timeout=TIMEOUT, trust_env=False) as client:
            for value in ("1e6", "1e22", "1e23", "1e300"):
                result = measure(
                    server.pid, lambda v=value: client.get(f"/v1/privacy?lifetime_epsilon={v}")
                )
                row(f"lifetime_epsilon={value}", result)
            result = measure(server.pid, lambda: client.get("/healthz"))
            row("/healthz afterwards", result)
    finally:
        server.stop(timeout=5)


def upload(directory: Path) -> None:
    header(f"POST /v1/reports: {EMPTY_ITEMS:,} empty objects (1 MiB)")
    body = json.dumps({"reports": [{}] * EMPTY_ITEMS}, separators=(",", ":")).encode()
    server = serve(directory)
    headers = {"Content-Type": "application/json"}
    try:
        with httpx.Client(base_url=server.url, timeout=60.0, trust_env=False) as client:
            row(
                f"1 upload of {len(body):,} bytes",
                measure(
                    server.pid, lambda: client.post("/v1/reports", content=body, headers=headers)
                ),
            )
            statuses: list[str] = []

            def four() -> str:
                def one() -> None:
                    with httpx.Client(base_url=server.url, timeout=60.0, trust_env=False) as c:
                        try:
                            answer = c.post("/v1/reports", content=body, headers=headers)
                            statuses.append(str(answer.status_code))
                        except httpx.TimeoutException:
                            statuses.append("timeout")

                threads = [threading.Thread(target=one) for _ in range(4)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                return ",".join(statuses)

            row("4 uploads at once", measure(server.pid, four))
    finally:
        server.stop(timeout=5)
    spec = MetricSpec.categorical("browser", [f"c{i}" for i in range(10)], epsilon=1.0)
    today = period_label("day", dt.datetime.now(dt.UTC).date())
    batch = {
        "reports": [
            {
                "id": str(uuid.uuid4()),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": today,
                "payload": i % spec.k,
            }
            for i in range(1000)
        ]
    }
    valid = json.dumps(batch).encode()

    def fastest(call: Callable[[], object]) -> float:
        times = []
        for _ in range(200):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        return min(times) * 1000

    good, problems = parse_batch(valid, 1000, lambda name: spec)
    assert len(good) == 1000 and not problems
    print(
        f"\nA valid 1,000-report batch ({len(valid):,} bytes), in process, fastest of 200:"
        f" parse_batch {fastest(lambda: parse_batch(valid, 1000, lambda name: spec)):.2f} ms,"
        f" of which the schema's validate_json {fastest(lambda: BATCH_PARSER.validate_json(valid)):.2f} ms"
    )


def reads(directory: Path) -> None:
    header("reads of an olh metric with k = 10,000 and no reports")
    big = MetricSpec.categorical(
        "big", [f"c{i:05d}" for i in range(10_000)], epsilon=1.0, mechanism="olh"
    )
    today = dt.datetime.now(dt.UTC).date()
    server = serve(directory)
    try:
        register_all(server.url, [big])
        with httpx.Client(base_url=server.url, timeout=300.0, trust_env=False) as client:

            def since(days: int) -> str:
                return (today - dt.timedelta(days=days - 1)).isoformat()

            for days in (5, 181) if SKIP_LONG else (5, 181, 1060):
                row(
                    f"/series over {days} periods",
                    measure(
                        server.pid,
                        lambda d=days: client.get(f"/v1/metrics/big/series?start={since(d)}"),
                    ),
                )
            row(
                "/estimate over 1,100 periods",
                measure(
                    server.pid, lambda: client.get(f"/v1/metrics/big/estimate?start={since(1100)}")
                ),
            )
            row(
                "dashboard metric page, default range",
                measure(server.pid, lambda: client.get("/dashboard/metrics/big")),
            )
            if not SKIP_LONG:
                row(
                    "dashboard metric page over 1,100 periods",
                    measure(
                        server.pid,
                        lambda: client.get(f"/dashboard/metrics/big?start={since(1100)}"),
                    ),
                )
            for i in range(1504):
                spec = MetricSpec.boolean(f"m{i:04d}", epsilon=1.0)
                client.post("/v1/metrics", json=spec.fingerprint_fields()).raise_for_status()
            for page in (1, 2):
                row(
                    f"dashboard overview, 1,505 metrics, page {page}",
                    measure(server.pid, lambda p=page: client.get(f"/dashboard/?page={p}")),
                )
    finally:
        server.stop(timeout=5)


SKIP_LONG = False

SECTIONS = {"privacy": privacy, "upload": upload, "reads": reads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=[*SECTIONS, "all"], default="all")
    parser.add_argument("--skip-long", action="store_true")
    arguments = parser.parse_args()
    global SKIP_LONG
    SKIP_LONG = arguments.skip_long
    chosen = arguments.section
    for name, section in SECTIONS.items():
        if chosen in (name, "all"):
            with tempfile.TemporaryDirectory(prefix=f"bench-bounded-{name}-") as directory:
                section(Path(directory))


if __name__ == "__main__":
    main()
