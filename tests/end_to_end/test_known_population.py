"""End to end: a known population randomized by the real mechanisms, posted over HTTP to a real
collector, estimated by the endpoint; the truth must lie inside the simultaneous 99% intervals.

The truth is the share among the simulated reporters (the fixed population), which the
super-population intervals cover conservatively. Seeds are fixed, so the test is deterministic.
"""

from __future__ import annotations

import datetime as dt
import uuid

import httpx
import pytest

from deniable.client import MetricSpec, SeededRandomness
from deniable.client.spec import period_label
from testkit import RunningCollector, make_reports, register, unique_name

N = 12_000
SHARES = (0.46, 0.27, 0.17, 0.07, 0.03)
CATEGORIES = ("alpha", "beta", "gamma", "delta", "epsilon")
SEEDS = {"krr": 11, "oue": 12, "olh": 13, "brr": 14}


def population(n: int, shares: tuple[float, ...]) -> list[int]:
    """Exactly round(n * share) devices per category (the last takes the remainder)."""
    values: list[int] = []
    for v, share in enumerate(shares[:-1]):
        values += [v] * round(n * share)
    values += [len(shares) - 1] * (n - len(values))
    return values


def server_day(collector: RunningCollector, days_back: int = 0) -> str:
    """The label of the day ``days_back`` days before the collector's current date."""
    day = collector.app_state().today() - dt.timedelta(days=days_back)
    return period_label("day", dt.datetime.combine(day, dt.time(12), tzinfo=dt.UTC))


def upload(client: httpx.Client, reports: list[dict[str, object]]) -> int:
    accepted = 0
    for start in range(0, len(reports), 1000):
        response = client.post("/v1/reports", json={"reports": reports[start : start + 1000]})
        assert response.status_code == 202, response.text
        accepted += response.json()["accepted"]
    return accepted


def truth_inside(result: dict[str, object], values: list[int], categories: tuple[str, ...]) -> None:
    n = len(values)
    rows = result["estimates"]  # type: ignore[index]
    assert [row["category"] for row in rows] == list(categories)
    for v, row in enumerate(rows):
        truth = values.count(v) / n
        assert row["ci_low"] <= truth <= row["ci_high"], (categories[v], truth, row)


@pytest.mark.parametrize("mechanism", ["krr", "oue", "olh", "brr"])
def test_truth_lies_inside_the_simultaneous_99_percent_intervals(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client, mechanism: str
) -> None:
    if mechanism == "brr":
        spec = MetricSpec.boolean(unique_name("e2e"), epsilon=1.0)
        categories, values = ("false", "true"), population(N, (0.62, 0.38))
    else:
        spec = MetricSpec.categorical(
            unique_name("e2e"), CATEGORIES, epsilon=1.5, mechanism=mechanism
        )
        categories, values = CATEGORIES, population(N, SHARES)
    spec = register(admin, spec)
    today = server_day(collector)
    reports = make_reports(spec, values, today, seed=SEEDS[mechanism])
    assert upload(uploader, reports) == N
    for method in ("unbiased", "consistent", "mle"):
        response = admin.get(
            f"/v1/metrics/{spec.name}/estimate",
            params={"simultaneous": "true", "confidence": 0.99, "method": method},
        )
        assert response.status_code == 200, response.text
        result = response.json()
        assert (result["n"], result["periods"], result["mechanism"]) == (N, 1, spec.mechanism)
        truth_inside(result, values, categories)


def test_a_memoized_week_is_pooled_overlap_safe(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    """The same 3,000 devices send the same memoized answer on each of 7 days."""
    spec = register(admin, MetricSpec.boolean(unique_name("week"), epsilon=0.5))
    values = population(3000, (0.7, 0.3))
    rng = SeededRandomness(77)
    memo = [spec.randomizer.randomize(v, rng) for v in values]
    days = [server_day(collector, back) for back in range(6, -1, -1)]
    reports = [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": day,
            "payload": payload,
        }
        for day in days
        for payload in memo
    ]
    assert upload(uploader, reports) == 7 * 3000
    params = {"start": days[0], "end": days[-1], "confidence": 0.99, "simultaneous": "true"}
    safe = admin.get(f"/v1/metrics/{spec.name}/estimate", params=params).json()
    assert (safe["n"], safe["periods"], safe["pooling"]) == (21000, 7, "overlap-safe")
    truth_inside(safe, values, ("false", "true"))
    one_day = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={"start": days[0], "end": days[0], "confidence": 0.99, "simultaneous": "true"},
    ).json()
    independent = admin.get(
        f"/v1/metrics/{spec.name}/estimate", params={**params, "pooling": "independent"}
    ).json()
    assert independent["pooling"] == "independent"
    for safe_row, day_row, naive_row in zip(
        safe["estimates"], one_day["estimates"], independent["estimates"], strict=True
    ):
        safe_width = safe_row["ci_high"] - safe_row["ci_low"]
        assert safe_width == pytest.approx(day_row["ci_high"] - day_row["ci_low"], rel=1e-9)
        assert naive_row["ci_high"] - naive_row["ci_low"] < safe_width / 2
