"""What ``GET /v1/metrics`` costs a collector with many registered metrics, and what its ETag saves.

Devices fetch the registry at start-up and whenever they meet a metric they do not know, so at
thousands of metrics its rendering would be a large share of a collector's CPU. The collector
renders the list once per registry version and answers ``If-None-Match`` with 304. This bench
registers ``--metrics`` metrics on a ``deniable serve`` process (SQLite) and times the first
request, repeated full requests and conditional ones.
Run: ``.venv/bin/python -m bench.registry [--metrics 3000] [--repeat 20]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from testkit import ADMIN_TOKEN, CollectorProcess, collector_settings


def timed_get(
    client: httpx.Client, headers: dict[str, str] | None = None
) -> tuple[float, httpx.Response]:
    """Seconds one ``GET /v1/metrics`` took, and its response."""
    started = time.perf_counter()
    response = client.get("/v1/metrics", headers=headers or {})
    return time.perf_counter() - started, response


def measure(count: int, repeat: int) -> None:
    """Register ``count`` metrics, then print the latencies of the list's three kinds of answer."""
    with tempfile.TemporaryDirectory() as directory:
        settings = collector_settings(f"sqlite:///{directory}/registry.db")
        with CollectorProcess(settings, Path(directory)) as server:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
                for i in range(count):
                    body = {
                        "name": f"metric_{i:05d}",
                        "type": "categorical",
                        "categories": ["a", "b", "c", "d", "e"],
                        "epsilon": 1.0,
                    }
                    client.post("/v1/metrics", json=body).raise_for_status()
                first, response = timed_get(client)
                etag = response.headers["etag"]
                full = [timed_get(client)[0] for _ in range(repeat)]
                conditional = [timed_get(client, {"If-None-Match": etag})[0] for _ in range(repeat)]
    print(f"GET /v1/metrics at {count:,} metrics ({len(response.content):,} bytes)")
    print(f"  first request (renders the list)   {first * 1000:8.1f} ms")
    print(f"  repeated, 200 (p50 of {repeat})          {statistics.median(full) * 1000:8.1f} ms")
    print(
        f"  If-None-Match, 304 (p50 of {repeat})     {statistics.median(conditional) * 1000:8.1f} ms"
    )


def main() -> None:
    """Parse the options and run the bench."""
    parser = argparse.ArgumentParser(prog="python -m bench.registry", description=__doc__)
    parser.add_argument("--metrics", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    measure(args.metrics, args.repeat)


if __name__ == "__main__":
    main()
