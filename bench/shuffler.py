"""Shuffler throughput beside the collector's, and the latency from a report to its estimate.

For each ``--min-batch`` (default 1,000 and 100,000) it starts a real collector (SQLite, or
``--backend postgresql``) with sealing keys and a real ``deniable shuffle`` (``max_delay`` 0,
so the figures are the pipeline's own), then:

- **sealed**: seals ``min_batch`` reports in this process, as the SDK does (reports/s, one
  core);
- **stored**: posts them to the shuffler from 4 threads, one upload per report, each from its
  own device pseudonym (as devices send), acknowledged only once durable (reports/s);
- **released**: the batch forms once the last is stored; from then until the collector's
  estimate counts all of them: forming, shuffling, forwarding in parts, opening and storing
  (reports/s, and that time as the **tail latency**: the wait after the batch's last report);
- **first report**: from the first upload until the estimate counts it, i.e. the wait for
  ``min_batch`` devices at the upload rate above, plus the tail;
- **collector direct**: the same number of plain reports posted to ``POST /v1/reports`` (4
  threads, 1,000 per request) for comparison (reports/s).

An app's ``record()`` adds its own persist and flush intervals (0.5 s and 1 s by default) before
the upload. Run: ``.venv/bin/python -m bench.shuffler [--min-batch 1000 100000]
[--backend sqlite|postgresql]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import secrets
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

from deniable.client import MetricSpec
from deniable.client.sealing import SEALED_PATH, Plan, envelope, public_key_of
from deniable.client.spec import period_label
from deniable.client.wire import report_text
from testkit import ADMIN_TOKEN, INGEST_KEY, scratch_database, unique_name
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, Pipeline

THREADS = 4
PER_UPLOAD = 1000


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


def _wait_for(condition: Callable[[], bool], timeout: float = 3600.0) -> float:
    """Seconds until ``condition()`` holds (polled every 50 ms)."""
    began = time.perf_counter()
    while not condition():
        if time.perf_counter() - began > timeout:
            raise TimeoutError("the estimate never counted every report")
        time.sleep(0.05)
    return time.perf_counter() - began


def _counted(collector_url: str, metric: str) -> int:
    answer = httpx.get(
        f"{collector_url}/v1/metrics/{metric}/estimate",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        trust_env=False,
        timeout=60,
    )
    answer.raise_for_status()
    return int(answer.json()["n"])


def _uploads(envelopes: list[dict[str, object]]) -> list[bytes]:
    """One upload per report, each from its own device pseudonym (a batch takes one report
    per device, so every report here counts toward ``min_batch``)."""
    return [
        json.dumps(
            {"device": secrets.token_hex(16), "envelopes": [item]}, separators=(",", ":")
        ).encode()
        for item in envelopes
    ]


def _plain_bodies(spec: MetricSpec, period: str, count: int) -> list[bytes]:
    """``count`` plain reports of ``spec`` as ``POST /v1/reports`` bodies of 1,000."""
    texts = [
        report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, i % 4)
        for i in range(count)
    ]
    return [
        f'{{"reports":[{",".join(texts[i : i + PER_UPLOAD])}]}}'.encode()
        for i in range(0, count, PER_UPLOAD)
    ]


def measure(backend: str, min_batch: int) -> dict[str, float]:
    """One pipeline at ``min_batch``: the figures of one table row."""
    spec = MetricSpec.categorical(unique_name("bench"), ["a", "b", "c", "d"], epsilon=2.0)
    direct_spec = MetricSpec.categorical(unique_name("bench"), ["a", "b", "c", "d"], epsilon=2.0)
    period = period_label("day", dt.datetime.now(dt.UTC))
    with (
        tempfile.TemporaryDirectory() as tmp,
        scratch_database(backend, Path(tmp), "shuffler_bench") as url,
    ):
        pipeline = Pipeline(url, Path(tmp), min_batch=min_batch).start([spec, direct_spec])
        try:
            assert pipeline.shuffler is not None
            collector = pipeline.collector.url
            keys = httpx.get(pipeline.shuffler.url + "/v1/keys", trust_env=False).json()["keys"]
            public = public_key_of(next(k for k in keys if k["current"]))[1]
            texts = [
                report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, i % 4)
                for i in range(min_batch)
            ]
            plan = Plan.of(spec)
            began = time.perf_counter()
            sealed = [envelope(text, plan, public) for text in texts]
            sealing = time.perf_counter() - began
            uploads = _uploads(sealed)
            first = time.perf_counter()
            stored = _post_all(pipeline.shuffler.url + SEALED_PATH, uploads, SHUFFLER_UPLOAD_KEY)
            tail = _wait_for(lambda: _counted(collector, spec.name) >= min_batch)
            first_report = time.perf_counter() - first
            direct = _post_all(
                collector + "/v1/reports", _plain_bodies(direct_spec, period, min_batch), INGEST_KEY
            )
        finally:
            pipeline.stop()
    return {
        "sealed": min_batch / sealing,
        "stored": min_batch / stored,
        "released": min_batch / tail,
        "tail": tail,
        "first": first_report,
        "direct": min_batch / direct,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--min-batch", type=int, nargs="+", default=[1000, 100_000])
    args = parser.parse_args()
    header = ["min_batch", "sealed/s", "stored/s", "released/s", "collector direct/s",
              "tail s", "first report s"]  # fmt: skip
    rows = [header]
    for min_batch in args.min_batch:
        got = measure(args.backend, min_batch)
        rows.append(
            [
                f"{min_batch:,}",
                f"{got['sealed']:,.0f}",
                f"{got['stored']:,.0f}",
                f"{got['released']:,.0f}",
                f"{got['direct']:,.0f}",
                f"{got['tail']:.2f}",
                f"{got['first']:.2f}",
            ]
        )
    print(f"backend: {args.backend}; shuffler max_delay 0; {THREADS} upload threads")
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
