"""A fully deterministic collector state: fixed metrics, fixed past periods and seeded
randomized reports, served by a real collector (uvicorn on loopback, a real SQLite file).

Everything that reaches an answer is fixed here: the server clock (``TEST_NOW``), the
period labels (explicit dates), the true values and the randomizers' draws (seeded), and
the report ids (seeded uuids), so two builds answer every read with the same bytes.
"""

from __future__ import annotations

import base64
import datetime as dt
import random
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from deniable.client import OUE, MetricSpec, SeededRandomness
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    VIEWER_TOKEN,
    Clock,
    RunningCollector,
    collector_settings,
)
from testkit.databases import sqlite_url

DAYS = (
    "2026-11-15",
    "2026-11-16",
    "2026-11-17",
    "2026-11-18",
    "2026-11-19",
    "2026-11-20",
    "2026-11-21",
)
"""The daily periods reports are made in (the server clock is 2026-11-21 12:00 UTC)."""
WEEK_DAYS = ("2026-10-28", "2026-11-04", "2026-11-11", "2026-11-18")
"""One day in each of the four weeks the weekly metric reports in (2026-W44..W47)."""
PLATFORMS = {"platform": ["ios", "android", "web"]}
"""The one dimension of the metrics that break down."""
SERIES_CELLS = 400
"""The collector's series cells limit (small, so an over-limit series is cheap to ask)."""
ESTIMATE_CELLS = 300_000
"""The collector's estimate cells limit: a text metric's one-period estimate by platform
(4 cells × 65,600 sketch counts) is within it, its seven-period series is not."""
PER_PERIOD = 240
"""Reports per metric per period (the text metric's: twice as many)."""
BATCH = 1000
"""Reports per upload (the collector's default ``max_batch``)."""
WORDS = ("cat", "dog", "sun", "tea", "owl")
"""The strings the text metric's devices hold."""
WORD_WEIGHTS = (8, 5, 3, 1, 1)
"""How often devices hold each of :data:`WORDS`."""
ABOUT = {
    "gold_latency": {
        "unit": "ms",
        "description": "Time to first paint of the home page",
        "owner": "web",
    },
    "gold_temp": {"unit": "\u00b0C"},
}
"""The unit, description and owner registered with some metrics (the rest have none)."""


@dataclass(frozen=True)
class Truth:
    """How one metric's true values are drawn: categories (or numbers) and their weights, or
    a numeric range, and whether its reports carry a platform."""

    spec: MetricSpec
    weights: Sequence[float] = ()
    low: float = 0.0
    high: float = 0.0
    dims: bool = False
    periods: Sequence[str] = DAYS
    skew: float = 0.0


def specs() -> list[MetricSpec]:
    """The metrics the scenario registers, in registration order."""
    return [
        MetricSpec.boolean("gold_dark", epsilon=1.0, dimensions=PLATFORMS),
        MetricSpec.categorical(
            "gold_browser", ["chrome", "firefox", "safari", "edge"], epsilon=2.0, mechanism="krr"
        ),
        MetricSpec.categorical(
            "gold_screen",
            ["s1", "s2", "s3", "s4", "s5", "s6"],
            epsilon=1.5,
            mechanism="oue",
            dimensions=PLATFORMS,
        ),
        MetricSpec.categorical(
            "gold_lang", [f"l{i}" for i in range(8)], epsilon=2.0, mechanism="olh"
        ),
        MetricSpec.histogram(
            "gold_latency", [0, 10, 50, 100, 500], epsilon=2.0, dimensions=PLATFORMS
        ),
        MetricSpec.numeric(
            "gold_load", lower=0, upper=100, epsilon=1.0, mechanism="duchi", dimensions=PLATFORMS
        ),
        MetricSpec.numeric("gold_temp", lower=-20, upper=40, epsilon=2.0, mechanism="pm"),
        MetricSpec.text("gold_search", max_length=4, epsilon=4.0, dimensions=PLATFORMS),
        MetricSpec.numeric("gold_size", lower=0, upper=1000, epsilon=3.0, mechanism="hybrid"),
        MetricSpec.categorical(
            "gold_weekly", ["red", "green", "blue"], epsilon=1.0, mechanism="krr", period="week"
        ),
        MetricSpec.boolean("gold_quiet", epsilon=0.5),
    ]


def truths(registered: dict[str, MetricSpec]) -> list[Truth]:
    """How each metric's true values are drawn (the quiet boolean gets no reports)."""
    r = registered
    return [
        Truth(r["gold_dark"], weights=(0.6, 0.4), dims=True, skew=0.15),
        Truth(r["gold_browser"], weights=(0.5, 0.2, 0.2, 0.1), skew=0.1),
        Truth(r["gold_screen"], weights=(0.3, 0.25, 0.2, 0.1, 0.1, 0.05), dims=True),
        Truth(r["gold_lang"], weights=(0.3, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05, 0.05)),
        Truth(r["gold_latency"], low=0, high=400, dims=True, skew=20),
        Truth(r["gold_load"], low=10, high=90, dims=True, skew=10),
        Truth(r["gold_temp"], low=-5, high=30, skew=3),
        Truth(r["gold_search"], weights=WORD_WEIGHTS, dims=True),
        Truth(r["gold_size"], low=100, high=700, skew=-40),
        Truth(r["gold_weekly"], weights=(0.5, 0.3, 0.2), periods=WEEK_DAYS, skew=0.1),
    ]


def _value(truth: Truth, draw: random.Random, step: int) -> Any:
    """One device's true value in the ``step``-th period (shares and means drift by period)."""
    spec = truth.spec
    if spec.type in ("numeric", "histogram"):
        return draw.uniform(truth.low, truth.high) + truth.skew * step / 4
    weights = list(truth.weights)
    weights[0] += truth.skew * step / 4
    index = draw.choices(range(len(weights)), weights)[0]
    return WORDS[index] if spec.type == "text" else index


def _pinned_oue(mechanism: OUE, value: int, rng: SeededRandomness) -> str:
    """oue as it drew when the answers were recorded: one ``random()`` per category (the same
    law as the client's word-per-category draw, issue 42), so the stored reports, and with
    them every recorded answer, stay the same."""
    bits = bytearray(mechanism.n_bytes)
    for v in range(mechanism.k):
        if rng.random() < (mechanism.p if v == value else mechanism.q):
            bits[v >> 3] |= 1 << (v & 7)
    return base64.b64encode(bytes(bits)).decode("ascii")


def _payload(spec: MetricSpec, value: Any, rng: SeededRandomness, level: int) -> Any:
    """``value`` randomized by the metric's real mechanism (oue as recorded), drawing from
    ``rng``."""
    if spec.type in ("categorical", "histogram") and isinstance(spec.randomizer, OUE):
        index = spec.bucket_of(value) if spec.type == "histogram" else value
        return _pinned_oue(spec.randomizer, index, rng)
    if spec.type == "text":
        sketch = spec.text_randomizer
        return sketch.randomize(sketch.encode(value), level, rng)
    if spec.type == "numeric":
        return spec.numeric_randomizer.randomize(spec.scale(value), rng)
    if spec.type == "histogram":
        return spec.randomizer.randomize(spec.bucket_of(value), rng)
    return spec.randomizer.randomize(value, rng)


def reports(truth: Truth, seed: int) -> list[dict[str, Any]]:
    """Every report of one metric: seeded true values, draws and ids."""
    spec = truth.spec
    draw = random.Random(seed)
    rng = SeededRandomness(seed + 1)
    made = []
    count = PER_PERIOD * (2 if spec.type == "text" else 1)
    for step, day in enumerate(truth.periods):
        period = spec.period_of(dt.date.fromisoformat(day))
        for i in range(count):
            report: dict[str, Any] = {
                "id": str(uuid.UUID(int=draw.getrandbits(128), version=4)),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": period,
            }
            level = 1 + i % spec.text_randomizer.levels if spec.type == "text" else 0
            report["payload"] = _payload(spec, _value(truth, draw, step), rng, level)
            if truth.dims:
                platforms = PLATFORMS["platform"]
                report["dims"] = {"platform": platforms[draw.choices((0, 1, 2), (5, 3, 2))[0]]}
            made.append(report)
    return made


def populate(server: RunningCollector) -> None:
    """Register the metrics and upload every report, in batches of :data:`BATCH`."""
    registered = {}
    with server.client(ADMIN_TOKEN) as admin:
        for spec in specs():
            body = spec.fingerprint_fields() | ABOUT.get(spec.name, {})
            response = admin.post("/v1/metrics", json=body)
            assert response.status_code == 201, response.text
            registered[spec.name] = MetricSpec.from_dict(response.json())
    everything = [
        report for seed, truth in enumerate(truths(registered)) for report in reports(truth, seed)
    ]
    with server.client(INGEST_KEY) as device:
        for start in range(0, len(everything), BATCH):
            chunk = everything[start : start + BATCH]
            response = device.post("/v1/reports", json={"reports": chunk})
            assert response.status_code == 202, response.text


@contextmanager
def running(directory: Path) -> Iterator[RunningCollector]:
    """A collector on a fresh SQLite file in ``directory``, populated, with the viewer
    token; stopped on exit."""
    settings = collector_settings(
        sqlite_url(directory, "recorded"),
        viewer_token=VIEWER_TOKEN,
        max_series_cells=SERIES_CELLS,
        max_estimate_cells=ESTIMATE_CELLS,
    )
    server = RunningCollector(settings, Clock()).start()
    try:
        populate(server)
        yield server
    finally:
        server.stop()


def viewer(server: RunningCollector) -> httpx.Client:
    """A client of ``server`` with the viewer token (every recorded read is a viewer's)."""
    return server.client(VIEWER_TOKEN)
