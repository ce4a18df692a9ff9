"""Dashboard benchmark: the metric page's load time in headless Chromium with 1 million reports.

It starts a real collector process (``deniable serve``) on a temporary SQLite file with a
viewer token, registers a k = 10 categorical metric, seeds 1 million reports spread over the
last 90 days directly in the database (bulk SQL, as ``bench.ingest --big`` does), signs in
through the dashboard's form in the same headless Chromium the browser tests use, and loads
the metric page ``--loads`` times (after one warm-up load): over its default range and over all
90 days. It prints the DOMContentLoaded time (Navigation Timing API, from navigation start) with
p50/p95; the target is p95 < 500 ms. Run: ``.venv/bin/python -m bench.dashboard [--loads 20]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from bench.ingest import periods, seed_directly
from deniable.client import MetricSpec
from testkit import CollectorProcess, collector_settings, register_all
from testkit.browser import (
    VIEWER_TOKEN,
    browser_problem,
    chromium,
    console_errors,
    dom_content_loaded_ms,
    sign_in,
)

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

REPORTS = 1_000_000
K = 10
TARGET_MS = 500.0
"""The metric page must be ready (DOMContentLoaded) within this many ms."""


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def measure(driver: WebDriver, url: str, loads: int) -> list[float]:
    """DOMContentLoaded times in ms of ``loads`` loads of ``url`` after one warm-up load."""
    driver.get(url)
    times = []
    for _ in range(loads):
        driver.get(url)
        times.append(dom_content_loaded_ms(driver))
    errors = console_errors(driver)
    if errors:
        print(f"  console errors on {url}: {errors[:3]}")
    return times


def main() -> None:
    """Seed, sign in, time the metric page and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=20, help="timed loads per page")
    parser.add_argument("--reports", type=int, default=REPORTS, help="reports to store")
    args = parser.parse_args()
    problem = browser_problem()
    if problem:
        sys.exit(f"bench.dashboard needs headless Chromium: {problem}")
    with tempfile.TemporaryDirectory(prefix="deniable-bench-dashboard-") as tmp:
        directory = Path(tmp)
        url = f"sqlite:///{directory}/collector.db"
        settings = collector_settings(url, ingest_key=None)
        env = {"DENIABLE_VIEWER_TOKEN": VIEWER_TOKEN}
        with CollectorProcess(settings, directory, env=env) as collector:
            spec = MetricSpec.categorical(
                "bench_dashboard", [f"category_{i}" for i in range(K)], epsilon=1.0
            )
            register_all(collector.url, [spec])
            labels = periods(dt.datetime.now(dt.UTC).date())
            started = time.perf_counter()
            print(f"seeding {args.reports:,} reports over {len(labels)} days directly ...")
            seed_directly(url, spec, labels, args.reports)
            print(f"  seeded in {time.perf_counter() - started:.1f} s")
            page = f"{collector.url}/dashboard/metrics/{spec.name}"
            ranges = {
                "default range": page,
                f"{len(labels)} days": f"{page}?{urlencode({'start': labels[0], 'end': labels[-1]})}",
            }
            rows = []
            with chromium() as driver:
                sign_in(driver, collector.url, VIEWER_TOKEN)
                if not driver.current_url.endswith("/dashboard/"):
                    sys.exit(f"signing in failed: ended at {driver.current_url}")
                for label, address in ranges.items():
                    times = measure(driver, address, args.loads)
                    rows.append((label, times))
    print()
    print(f"metric page, {args.reports:,} reports stored, k = {K}, headless Chromium")
    header = f"{'range':<16}{'loads':>6}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}  target"
    print(header)
    print("-" * len(header))
    for label, times in rows:
        p95 = percentile(times, 0.95)
        verdict = "ok" if p95 < TARGET_MS else "MISSED"
        print(
            f"{label:<16}{len(times):>6}{statistics.median(times):>10.1f}{p95:>10.1f}"
            f"{max(times):>10.1f}  < {TARGET_MS:.0f} ms: {verdict}"
        )


if __name__ == "__main__":
    main()
