"""End to end for numbers: a seeded population recorded through the SDK (``Client.record``),
flushed over HTTP to a real collector (SQLite and PostgreSQL), estimated by the endpoint.

The truth is the fixed population's own mean and quantiles, which the super-population
intervals cover conservatively. Each test asks for 99.999% intervals (a miss has nominal
probability 1e-5, well under the suite's 1e-4 per test; the seeds are fixed, so the test is
deterministic). Resending every acknowledged report (a copy of the device's state) must leave
the estimate identical.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from deniable.client import Client, MetricSpec, SeededRandomness
from testkit import (
    INGEST_KEY,
    RunningCollector,
    loopback_url,
    quantile_holds,
    register,
    spare_port,
    unique_name,
)

N = 1500
LOWER, UPPER = 0.0, 5000.0
EDGES = (0, 100, 250, 500, 1000, 2000, 5000)
CONFIDENCE = 0.99999


def load_times(n: int, seed: int) -> np.ndarray:
    """Page load times in ms: lognormal around 400 ms, clamped to [0, 5000] (as devices do)."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(400.0), 0.8, n), LOWER, UPPER)


def true_quantile(values: np.ndarray, q: float) -> float:
    """The population's q-quantile, inf{x: F(x) >= q}."""
    ordered = np.sort(values)
    return float(ordered[int(np.ceil(q * len(ordered))) - 1])


def estimate(admin: httpx.Client, name: str, **params: Any) -> dict[str, Any]:
    response = admin.get(f"/v1/metrics/{name}/estimate", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def deliver_twice(
    collector: RunningCollector,
    admin: httpx.Client,
    spec: MetricSpec,
    values: np.ndarray,
    state: Path,
    **params: Any,
) -> dict[str, Any]:
    """Record every value on one device allowed that many reports (offline), keep a copy of
    its state, deliver it, estimate; deliver the copy (every report a resend) and check the
    estimate is identical. Returns the estimate."""
    now = collector.clock()
    offline = Client(
        loopback_url(spare_port()),
        state_dir=state,
        metrics=[spec],
        max_reports_per_period=len(values),
        clock=lambda: now,
        randomness=SeededRandomness(7),
        batch_size=500,
    )
    for value in values:
        assert offline.record(spec.name, float(value))
    offline.close(timeout=0.0)
    copy = state.with_name("copy")
    shutil.copytree(state, copy)
    results = []
    for folder, duplicates in ((state, 0), (copy, len(values))):
        device = Client(collector.url, state_dir=folder, metrics=[spec], ingest_key=INGEST_KEY)
        assert device.flush(timeout=60)
        device.close()
        assert (device.stats.delivered, device.stats.duplicates) == (len(values), duplicates)
        results.append(estimate(admin, spec.name, **params))
    assert results[0] == results[1]
    return results[0]


@pytest.mark.parametrize("mechanism", ["pm", "duchi"])
def test_the_true_mean_lies_inside_the_interval_and_resends_change_nothing(
    collector: RunningCollector, admin: httpx.Client, tmp_path: Path, mechanism: str
) -> None:
    spec = register(
        admin,
        MetricSpec.numeric(
            unique_name("load_ms"), lower=LOWER, upper=UPPER, epsilon=2.0, mechanism=mechanism
        ),
    )
    values = load_times(N, seed=31)
    today = collector.clock().date().isoformat()
    result = deliver_twice(
        collector,
        admin,
        spec,
        values,
        tmp_path / "device",
        confidence=CONFIDENCE,
        start=today,
        end=today,
    )
    assert (result["metric"], result["start"], result["end"]) == (spec.name, today, today)
    assert (result["n"], result["periods"], result["lower"], result["upper"]) == (
        N,
        1,
        LOWER,
        UPPER,
    )
    assert (result["mechanism"], result["pooling"], result["confidence"]) == (
        mechanism,
        "overlap-safe",
        CONFIDENCE,
    )
    assert "estimates" not in result
    mean = result["mean"]
    assert mean["ci_low"] <= float(values.mean()) <= mean["ci_high"], (values.mean(), mean)
    assert mean["ci_low"] <= mean["estimate"] <= mean["ci_high"]
    assert mean["std_error"] > 0


def test_the_true_quantiles_lie_inside_their_intervals_and_resends_change_nothing(
    collector: RunningCollector, admin: httpx.Client, tmp_path: Path
) -> None:
    spec = register(
        admin, MetricSpec.histogram(unique_name("load_hist"), EDGES, epsilon=2.0, mechanism="oue")
    )
    values = load_times(N, seed=32)
    qs = (0.25, 0.5, 0.9)
    result = deliver_twice(
        collector, admin, spec, values, tmp_path / "device", confidence=CONFIDENCE, q=list(qs)
    )
    assert result["n"] == N
    assert [row["category"] for row in result["estimates"]] == list(spec.categories)
    counts = np.histogram(values, bins=EDGES)[0]
    for row, count in zip(result["estimates"], counts, strict=True):
        assert row["ci_low"] <= count / N <= row["ci_high"], row
    assert [entry["q"] for entry in result["quantiles"]] == list(qs)
    for entry in result["quantiles"]:
        truth = true_quantile(values, entry["q"])
        assert quantile_holds(entry, truth), (truth, entry)
        assert {entry["low"], entry["high"]} <= set(EDGES[1:-1]) | {None}
    assert result["quantiles"][1]["high"] - result["quantiles"][1]["low"] < UPPER
