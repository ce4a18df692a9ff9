"""A real collector seeded with a known population, and a signed-in headless Chromium.

The collector is ``deniable serve`` on loopback over a temporary SQLite file, with an admin
token, an ingest key and a viewer token. Three metrics are seeded through the API with fixed
seeds over the last 7 daily periods:

- ``browser_color``: categorical, 5 categories, 3,000 devices a day (21,000 reports) with
  exactly the shares ``SHARES`` every day, so the truth is the same for any range of days;
- ``browser_load_ms``: numeric in [0, 5000], 600 lognormal load times a day;
- ``browser_load_hist``: a histogram of the same kind of load times, 600 a day;
- ``browser_dark_mode``: a boolean, 2,000 devices today only (``DARK_SHARE`` true), and
  ``browser_agent``: a categorical metric with long labels (``AGENTS``), 2,000 devices today
  only: the default 7-day range then holds one period with reports and six without.

Browser tests are skipped when Chromium is missing unless ``DENIABLE_REQUIRE_BROWSER`` is set.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from deniable.client import MetricSpec, SeededRandomness
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    CollectorProcess,
    authorized_client,
    collector_settings,
    make_numeric_reports,
    make_reports,
)
from testkit.browser import VIEWER_TOKEN, browser_problem, require_browser, start_chromium

CATEGORIES = ("alpha", "beta", "gamma", "delta", "epsilon")
SHARES = (0.40, 0.25, 0.18, 0.12, 0.05)
PER_DAY = 3000
"""Devices a day of the categorical metric: PER_DAY * share is a whole number for each share."""
NUMERIC_PER_DAY = 600
DAYS = 7
EDGES = (0, 100, 250, 500, 1000, 2000, 5000)
LOWER, UPPER = 0.0, 5000.0
UNIT = "ms"
"""The unit the load-time metrics are registered with."""
TODAY_ONLY = 2000
"""Devices of the boolean and the long-label metric, all reporting today."""
DARK_SHARE = 0.3
AGENTS = (
    "Chrome 131 on Windows 11 (64-bit)",
    "Safari 18.1 on macOS Sequoia",
    "Samsung Internet 26 on Android 14",
    "Firefox 133 on Ubuntu 24.04 LTS",
    "Other",
)
AGENT_SHARES = (0.45, 0.25, 0.15, 0.10, 0.05)
TEXT_REPORTS = 2000
"""Reports of the text metric, today only: half hold one search term."""

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
"""Where the browser tests save their screenshots (gitignored)."""


@dataclass(frozen=True)
class Seeded:
    """The seeded collector: its URL, metrics, the 7 day labels (oldest first), and the truth."""

    url: str
    categorical: MetricSpec
    numeric: MetricSpec
    histogram: MetricSpec
    boolean: MetricSpec
    agents: MetricSpec
    text: MetricSpec
    days: tuple[str, ...]
    shares: dict[str, float]
    numeric_mean: float

    @property
    def names(self) -> tuple[str, ...]:
        """The metric names."""
        return tuple(
            spec.name
            for spec in (
                self.categorical,
                self.numeric,
                self.histogram,
                self.boolean,
                self.agents,
                self.text,
            )
        )


def population(n: int, shares: tuple[float, ...]) -> list[int]:
    """Exactly n * share devices per category, in category order."""
    values: list[int] = []
    for v, share in enumerate(shares):
        values += [v] * round(n * share)
    assert len(values) == n
    return values


def load_times(n: int, seed: int) -> np.ndarray:
    """Page load times in ms: lognormal around 400 ms, clamped to [0, 5000]."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(400.0), 0.8, n), LOWER, UPPER)


def last_days(count: int) -> tuple[str, ...]:
    """The labels of the last ``count`` UTC days, oldest first (the collector's clock is UTC)."""
    today = dt.datetime.now(dt.UTC).date()
    return tuple((today - dt.timedelta(days=back)).isoformat() for back in range(count - 1, -1, -1))


def register(client: httpx.Client, spec: MetricSpec, unit: str | None = None) -> MetricSpec:
    """Register ``spec`` (with its ``unit``, if any) and return the spec the collector
    resolved."""
    body = {**spec.fingerprint_fields(), **({"unit": unit} if unit else {})}
    response = client.post("/v1/metrics", json=body)
    assert response.status_code in (200, 201), response.text
    served = {k: v for k, v in response.json().items() if k not in ("unit", "description", "owner")}
    return MetricSpec.from_dict(served)


def upload(client: httpx.Client, reports: list[dict[str, Any]]) -> None:
    """Post ``reports`` in batches of 1000; every one must be accepted."""
    for start in range(0, len(reports), 1000):
        response = client.post("/v1/reports", json={"reports": reports[start : start + 1000]})
        assert response.status_code == 202, response.text
        assert response.json()["accepted"] == len(reports[start : start + 1000])


def text_reports(spec: MetricSpec, day: str) -> list[dict[str, Any]]:
    """TEXT_REPORTS reports of a text metric on ``day``: half of them one long search term,
    the rest unique, each device's level drawn as the SDK's would be (seeded)."""
    sketch = spec.text_randomizer
    randomness = SeededRandomness(800)
    reports = []
    for i in range(TEXT_REPORTS):
        value = "dark mode" if i % 2 else f"u{i:06d}"
        level = 1 + randomness.randbelow(sketch.levels)
        reports.append(
            {
                "id": str(uuid.uuid4()),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": day,
                "payload": sketch.randomize(sketch.encode(value), level, randomness),
            }
        )
    return reports


def seed(url: str) -> Seeded:
    """Register the metrics and upload their fixed-seed reports: three over the last 7 days,
    two today only."""
    days = last_days(DAYS)
    with authorized_client(url, ADMIN_TOKEN) as admin:
        categorical = register(
            admin, MetricSpec.categorical("browser_color", CATEGORIES, epsilon=2.0)
        )
        numeric = register(
            admin,
            MetricSpec.numeric("browser_load_ms", lower=LOWER, upper=UPPER, epsilon=2.0),
            unit=UNIT,
        )
        histogram = register(
            admin, MetricSpec.histogram("browser_load_hist", EDGES, epsilon=2.0), unit=UNIT
        )
        boolean = register(admin, MetricSpec.boolean("browser_dark_mode", epsilon=2.0))
        agents = register(admin, MetricSpec.categorical("browser_agent", AGENTS, epsilon=2.0))
        text = register(admin, MetricSpec.text("browser_search", max_length=8, epsilon=4.0))
    values = population(PER_DAY, SHARES)
    everything: list[float] = []
    with authorized_client(url, INGEST_KEY) as uploader:
        for i, day in enumerate(days):
            upload(uploader, make_reports(categorical, values, day, seed=100 + i))
            times = load_times(NUMERIC_PER_DAY, seed=200 + i)
            everything += times.tolist()
            upload(uploader, make_numeric_reports(numeric, times.tolist(), day, seed=300 + i))
            buckets = [histogram.bucket_of(float(t)) for t in load_times(NUMERIC_PER_DAY, 400 + i)]
            upload(uploader, make_reports(histogram, buckets, day, seed=500 + i))
        dark = population(TODAY_ONLY, (1 - DARK_SHARE, DARK_SHARE))
        upload(uploader, make_reports(boolean, dark, days[-1], seed=600))
        agent_values = population(TODAY_ONLY, AGENT_SHARES)
        upload(uploader, make_reports(agents, agent_values, days[-1], seed=700))
        upload(uploader, text_reports(text, days[-1]))
    return Seeded(
        url=url,
        categorical=categorical,
        numeric=numeric,
        histogram=histogram,
        boolean=boolean,
        agents=agents,
        text=text,
        days=days,
        shares=dict(zip(CATEGORIES, SHARES, strict=True)),
        numeric_mean=float(np.mean(everything)),
    )


@pytest.fixture(scope="module")
def browser_ready() -> None:
    """Skip (or with ``DENIABLE_REQUIRE_BROWSER``, fail) when headless Chromium is unavailable."""
    require_browser(browser_problem())


@pytest.fixture(scope="module")
def seeded(browser_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    """A real collector process with the viewer token, seeded with the known population."""
    directory = tmp_path_factory.mktemp("dashboard")
    settings = collector_settings(f"sqlite:///{directory}/collector.db")
    with CollectorProcess(
        settings, directory, env={"DENIABLE_VIEWER_TOKEN": VIEWER_TOKEN}
    ) as server:
        yield seed(server.url)


@pytest.fixture(scope="module")
def driver(browser_ready: None) -> Iterator[Any]:
    """One headless Chromium for the module (1280 x 900), quit at the end."""
    browser = start_chromium()
    yield browser
    browser.quit()
