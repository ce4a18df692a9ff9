"""Shuffler intake beside the collector's direct intake of the same reports, and the release leg.

It starts a real collector (SQLite, or ``--backend postgresql``) with sealing keys and a real
``deniable shuffle`` (``max_delay`` 0, ``min_batch`` the devices of one round), registers
``--metrics`` metrics twice (one set shuffled, one direct), and then for ``--rounds`` rounds
alternates:

- **baseline, the collector direct**: every device's ``--metrics`` plain reports (one per
  metric) posted to ``POST /v1/reports`` as one body per device, from 4 threads;
- **product, the shuffler**: the same devices' reports sealed (before the timer) and posted to
  ``POST /v1/sealed`` as one upload per device (its pending envelopes under its pseudonym), from
  4 threads, each acknowledged only once durable;
- **release**: the batches (one per metric, one report per device each) form once the last
  upload is stored; from then until the collector acknowledged every part (read from the
  shuffler's store file, so the wait loads neither server): forming, shuffling, forwarding in
  parts, opening and storing; then each estimate is checked to count every report.

Each leg's figures are reports per second of wall time and the server's CPU per report (the
serving process and its children, from psutil); every pair is printed, then the median ratios
and the load average. Run: ``.venv/bin/python -m bench.shuffler [--devices 500] [--metrics 20]
[--rounds 3] [--backend sqlite|postgresql]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import secrets
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from deniable.client import MetricSpec
from deniable.client.sealing import SEALED_PATH, Plan, envelope, public_key_of
from deniable.client.spec import period_label
from deniable.client.wire import report_text
from testkit import ADMIN_TOKEN, INGEST_KEY, scratch_database, unique_name
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, Pipeline

THREADS = 4


def _post_all(url: str, bodies: list[bytes], token: str | None = None) -> float:
    """Post ``bodies`` from :data:`THREADS` threads; seconds taken (every answer must be 202)."""
    queue = list(reversed(bodies))
    lock = threading.Lock()
    failures: list[str] = []
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    def work() -> None:
        with httpx.Client(trust_env=False, timeout=120, headers=headers) as client:
            while True:
                with lock:
                    if not queue:
                        return
                    body = queue.pop()
                answer = client.post(url, content=body)
                if answer.status_code != 202:
                    failures.append(f"{answer.status_code} {answer.text[:200]}")

    began = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    return time.perf_counter() - began


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its live children."""
    total = 0.0
    root = psutil.Process(pid)
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _counted(collector_url: str, metric: str) -> int:
    answer = httpx.get(
        f"{collector_url}/v1/metrics/{metric}/estimate",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        trust_env=False,
        timeout=60,
    )
    answer.raise_for_status()
    return int(answer.json()["n"])


def _wait_released(store: Path, batches: int) -> float:
    """Seconds until the shuffler's store (read here, read-only: no load on either server)
    holds ``batches`` batches, every part of each acknowledged by the collector (it answers a
    part only once its reports are stored)."""
    began = time.perf_counter()
    uri = f"file:{store}?mode=ro"
    while True:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as connection:
            formed, pending = connection.execute(
                "SELECT COUNT(*), COALESCE(SUM(forwarded < parts), 0) FROM batches"
            ).fetchone()
        if formed >= batches and not pending:
            return time.perf_counter() - began
        if time.perf_counter() - began > 3600:
            raise TimeoutError("the shuffler never released every batch")
        time.sleep(0.05)


def _bodies(
    shuffled: list[MetricSpec], direct: list[MetricSpec], devices: int, public: bytes
) -> tuple[list[bytes], list[bytes]]:
    """(one shuffler upload per device, one direct body per device): each device's report of
    every metric, the same report texts but for the metric's name."""
    period = period_label("day", dt.datetime.now(dt.UTC))
    plans = [Plan.of(spec) for spec in shuffled]
    uploads, plain = [], []
    for device in range(devices):
        value = device % 4
        sealed = [
            envelope(
                report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, value),
                plan,
                public,
            )
            for spec, plan in zip(shuffled, plans, strict=True)
        ]
        document = {"device": secrets.token_hex(16), "envelopes": sealed}
        uploads.append(json.dumps(document, separators=(",", ":")).encode())
        texts = [
            report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, value)
            for spec in direct
        ]
        plain.append(f'{{"reports":[{",".join(texts)}]}}'.encode())
    return uploads, plain


def _leg(pid: int, post: Callable[[], float]) -> tuple[float, float]:
    """(wall seconds, server CPU seconds) of one timed leg."""
    before = cpu_seconds(pid)
    wall = post()
    return wall, cpu_seconds(pid) - before


def main() -> None:
    """Alternate the collector direct and the shuffler; print every pair and the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--devices", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    shape = {"categories": ["a", "b", "c", "d"], "epsilon": 2.0}
    shuffled = [MetricSpec.categorical(unique_name("shuf"), **shape) for _ in range(args.metrics)]  # type: ignore[arg-type]
    direct = [MetricSpec.categorical(unique_name("dire"), **shape) for _ in range(args.metrics)]  # type: ignore[arg-type]
    reports = args.devices * args.metrics
    print(f"load average before: {os.getloadavg()}")
    print(
        f"backend {args.backend}; {args.devices} devices x {args.metrics} reports per upload ="
        f" {reports:,} reports per leg; {THREADS} upload threads; shuffler max_delay 0"
    )
    print(
        "| round | direct reports/s | shuffler stored/s | ratio | direct CPU µs/report |"
        " shuffler CPU µs/report | released/s | release CPU µs/report: collector |"
        " shuffler |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios, cpu_ratios, released = [], [], []
    with (
        tempfile.TemporaryDirectory() as tmp,
        scratch_database(args.backend, Path(tmp), "shuffler_bench") as url,
    ):
        pipeline = Pipeline(url, Path(tmp), min_batch=args.devices).start([*shuffled, *direct])
        try:
            assert pipeline.shuffler is not None
            collector, shuffler = pipeline.collector, pipeline.shuffler
            keys = httpx.get(shuffler.url + "/v1/keys", trust_env=False).json()["keys"]
            public = public_key_of(next(k for k in keys if k["current"]))[1]
            for index in range(args.rounds):
                uploads, plain = _bodies(shuffled, direct, args.devices, public)
                d_wall, d_cpu = _leg(
                    collector.pid,
                    lambda plain=plain: _post_all(collector.url + "/v1/reports", plain, INGEST_KEY),
                )
                s_wall, s_cpu = _leg(
                    shuffler.pid,
                    lambda uploads=uploads: _post_all(
                        shuffler.url + SEALED_PATH, uploads, SHUFFLER_UPLOAD_KEY
                    ),
                )
                before = cpu_seconds(collector.pid), cpu_seconds(shuffler.pid)
                tail = _wait_released(Path(tmp) / "shuffler.db", args.metrics * (index + 1))
                r_cpu = cpu_seconds(collector.pid) - before[0]
                r_shuffler = cpu_seconds(shuffler.pid) - before[1]
                target = args.devices * (index + 1)
                assert all(_counted(collector.url, spec.name) == target for spec in shuffled)
                ratio = (reports / s_wall) / (reports / d_wall)
                ratios.append(ratio)
                cpu_ratios.append(s_cpu / max(d_cpu, 1e-9))
                released.append(reports / tail)
                print(
                    f"| {index + 1} | {reports / d_wall:,.0f} | {reports / s_wall:,.0f} |"
                    f" {ratio:.2f} | {1e6 * d_cpu / reports:.0f} | {1e6 * s_cpu / reports:.0f} |"
                    f" {reports / tail:,.0f} | {1e6 * r_cpu / reports:.0f} |"
                    f" {1e6 * r_shuffler / reports:.0f} |"
                )
        finally:
            pipeline.stop()
    print(
        f"median ratio shuffler stored/s over collector direct/s: {statistics.median(ratios):.2f}"
    )
    print(
        f"median ratio of CPU per report, shuffler over direct: {statistics.median(cpu_ratios):.2f}"
    )
    print(f"median released/s: {statistics.median(released):,.0f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
