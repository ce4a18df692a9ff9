"""What one scrape of ``GET /v1/estimates/metrics`` costs, and a histogram series with quantiles.

Starts a collector in a thread (real uvicorn on loopback, SQLite in a scratch directory, the
viewer token), registers metrics with a day of reports each, and prints a table: the request,
its status, the median seconds of 5 and the response's bytes. The largest page the default
limits allow is 25 metrics (``DENIABLE_DASHBOARD_PAGE_METRICS``); a page of 10,000-category
metrics holds 50,000 / 7 // 10,000 = 0 more, so one such metric is alone on its page.

Run: ``.venv/bin/python -m bench.estimates_scrape``
"""

from __future__ import annotations

import datetime as dt
import statistics
import tempfile
import time
from collections.abc import Callable

import httpx

from deniable.client import MetricSpec
from deniable.client.spec import period_label
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    VIEWER_TOKEN,
    RunningCollector,
    collector_settings,
    make_reports,
    register,
)

REPEATS = 5
QUANTILES = [round(0.05 * k, 2) for k in range(1, 20)] + [0.99]
"""20 quantiles, the most one request may ask for."""


def timed(call: Callable[[], httpx.Response]) -> tuple[int, float, int]:
    """(status, median seconds of :data:`REPEATS` calls, bytes of the last answer)."""
    seconds = []
    response = call()
    for _ in range(REPEATS):
        started = time.perf_counter()
        response = call()
        seconds.append(time.perf_counter() - started)
    return response.status_code, statistics.median(seconds), len(response.content)


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        settings = collector_settings(f"sqlite:///{directory}/bench.db", viewer_token=VIEWER_TOKEN)
        server = RunningCollector(settings).start()
        try:
            now = server.clock().date()
            today = period_label("day", now)
            start = period_label("day", now - dt.timedelta(days=89))
            with server.client(ADMIN_TOKEN) as admin:
                specs = [
                    register(
                        admin,
                        MetricSpec.categorical(
                            f"c{i:02d}", [f"v{j}" for j in range(20)], epsilon=1
                        ),
                    )
                    for i in range(22)
                ]
                specs.append(register(admin, MetricSpec.numeric("n0", lower=0, upper=1, epsilon=1)))
                hist = register(
                    admin, MetricSpec.histogram("h0", list(range(0, 101, 5)), epsilon=1)
                )
                specs.append(hist)
                wide = MetricSpec.categorical("wide", [f"w{j}" for j in range(10_000)], epsilon=4)
                specs.append(register(admin, wide))
            with server.client(INGEST_KEY) as device:
                for i, spec in enumerate(specs):
                    if spec.type != "numeric":
                        values = [j % min(spec.k, 20) for j in range(1000)]
                        reports = make_reports(spec, values, today, i)
                        for first in range(0, len(reports), 200):
                            batch = {"reports": reports[first : first + 200]}
                            assert device.post("/v1/reports", json=batch).is_success
            with server.client(VIEWER_TOKEN) as viewer:
                rows = [
                    (
                        "scrape page 1: 25 metrics (22 × 20 categories, a mean, a 20-bucket histogram)",
                        timed(lambda: viewer.get("/v1/estimates/metrics")),
                    ),
                    (
                        "scrape page 2: one 10,000-category metric",
                        timed(lambda: viewer.get("/v1/estimates/metrics", params={"page": 2})),
                    ),
                    (
                        "histogram series, 90 days, 20 quantiles",
                        timed(
                            lambda: viewer.get(
                                "/v1/metrics/h0/series",
                                params={"start": start, "q": QUANTILES},
                            )
                        ),
                    ),
                ]
        finally:
            server.stop()
    print(f"{'request':<80} {'status':>6} {'median s':>9} {'bytes':>10}")
    for name, (status, seconds, size) in rows:
        print(f"{name:<80} {status:>6} {seconds:>9.3f} {size:>10,}")


if __name__ == "__main__":
    main()
