"""The estimate and series routes for numeric and histogram metrics, over real HTTP on SQLite
and PostgreSQL: the documents' shape, a numeric series over several periods, pooling, and the
422s (a share-only method for a mean, a bad or misplaced quantile) that are never 500s.
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from deniable.client import MetricSpec
from testkit import (
    RunningCollector,
    make_numeric_reports,
    make_reports,
    register,
    unique_name,
)

DAYS = ["2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21"]
LEVELS = {"2026-11-18": 1000.0, "2026-11-19": 2000.0, "2026-11-21": 4000.0}
"""Each day's true load time (every device reports the same value); 2026-11-20 has none."""
N = 600


def post_all(uploader: httpx.Client, reports: list[dict[str, Any]]) -> None:
    for start in range(0, len(reports), 1000):
        response = uploader.post("/v1/reports", json={"reports": reports[start : start + 1000]})
        assert response.status_code == 202, response.text


@pytest.fixture
def load_ms(admin: httpx.Client, uploader: httpx.Client) -> MetricSpec:
    """A pm numeric metric on [0, 5000] with N reports of each day's level (none on the 20th)."""
    spec = register(
        admin, MetricSpec.numeric(unique_name("load_ms"), lower=0, upper=5000, epsilon=4.0)
    )
    for seed, (day, level) in enumerate(LEVELS.items()):
        post_all(uploader, make_numeric_reports(spec, [level] * N, day, seed=40 + seed))
    return spec


def get(admin: httpx.Client, spec: MetricSpec, what: str, **params: Any) -> httpx.Response:
    return admin.get(f"/v1/metrics/{spec.name}/{what}", params=params)


def test_a_numeric_series_has_each_periods_mean(admin: httpx.Client, load_ms: MetricSpec) -> None:
    response = get(admin, load_ms, "series", start=DAYS[0], end=DAYS[-1], confidence=0.9999)
    assert response.status_code == 200, response.text
    document = response.json()
    assert set(document) == {"metric", "confidence", "lower", "upper", "series"} | {
        "unit",
        "description",
        "owner",
    }
    assert [entry["period"] for entry in document["series"]] == DAYS
    for entry in document["series"]:
        mean = entry["mean"]
        if entry["period"] not in LEVELS:
            assert entry["n"] == 0
            assert mean == {"estimate": None, "std_error": None, "ci_low": 0.0, "ci_high": 5000.0}
            continue
        assert entry["n"] == N
        assert mean["ci_low"] <= LEVELS[entry["period"]] <= mean["ci_high"], entry
        assert mean["ci_high"] - mean["ci_low"] < 1000


def test_a_numeric_range_pools_overlap_safe_or_independent(
    admin: httpx.Client, load_ms: MetricSpec
) -> None:
    safe = get(admin, load_ms, "estimate", start=DAYS[0], end=DAYS[-1]).json()
    independent = get(
        admin, load_ms, "estimate", start=DAYS[0], end=DAYS[-1], pooling="independent"
    ).json()
    assert (safe["n"], safe["periods"], safe["pooling"]) == (3 * N, 3, "overlap-safe")
    assert independent["pooling"] == "independent"
    assert safe["mean"]["estimate"] == pytest.approx(independent["mean"]["estimate"])
    assert safe["mean"]["estimate"] == pytest.approx(np.mean(list(LEVELS.values())), abs=300)
    width = safe["mean"]["ci_high"] - safe["mean"]["ci_low"]
    assert width > independent["mean"]["ci_high"] - independent["mean"]["ci_low"]
    empty = get(admin, load_ms, "estimate", start=DAYS[2], end=DAYS[2]).json()
    assert (empty["n"], empty["periods"]) == (0, 0)
    assert empty["mean"]["estimate"] is None


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"method": "mle"}, "a numeric metric's mean has one estimator"),
        ({"method": "consistent"}, "a numeric metric's mean has one estimator"),
        ({"q": 0.5}, "q is for histogram metrics"),
        ({"confidence": 1.5}, "confidence"),
        ({"pooling": "sometimes"}, "pooling"),
    ],
)
def test_a_numeric_estimate_refuses_share_options_with_422(
    admin: httpx.Client, load_ms: MetricSpec, params: dict[str, Any], says: str
) -> None:
    for what in ("estimate", "series"):
        if what == "series" and ("q" in params or "pooling" in params):
            continue
        response = get(admin, load_ms, what, **params)
        assert response.status_code == 422, response.text
        assert says in response.text


@pytest.mark.parametrize("q", ["0", "1", "-0.5", "1.5", "half", "nan"])
def test_a_histogram_refuses_a_bad_quantile_with_422(
    admin: httpx.Client, uploader: httpx.Client, q: str
) -> None:
    spec = register(admin, MetricSpec.histogram(unique_name("hist"), [0, 10, 20], epsilon=1.0))
    response = get(admin, spec, "estimate", q=["0.5", q])
    assert response.status_code == 422, response.text


def test_a_histogram_estimate_has_quantiles_and_its_series_its_shares(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.histogram(unique_name("hist"), [0, 100, 250, 500, 5000], epsilon=4.0),
    )
    post_all(uploader, make_reports(spec, [1] * 400 + [2] * 400, DAYS[-1], seed=50))
    document = get(admin, spec, "estimate", method="consistent", simultaneous="true").json()
    assert [row["category"] for row in document["estimates"]] == list(spec.categories)
    assert [entry["q"] for entry in document["quantiles"]] == [0.5, 0.9, 0.99]
    median = document["quantiles"][0]
    assert 100 <= median["low"] <= 250 <= median["high"] <= 500
    asked = get(admin, spec, "estimate", q=["0.1", "0.75"]).json()["quantiles"]
    assert [entry["q"] for entry in asked] == [0.1, 0.75]
    series = get(admin, spec, "series").json()
    assert series["series"][0]["estimates"][1]["category"] == spec.categories[1]


def test_the_openapi_document_describes_every_estimate_shape(admin: httpx.Client) -> None:
    schema = admin.get("/openapi.json").json()
    names = set(schema["components"]["schemas"])
    assert {
        "HistogramEstimate",
        "MeanRangeEstimate",
        "RangeEstimate",
        "MeanSeries",
        "TextEstimate",
        "BreakdownEstimate",
        "PeriodComparison",
        "EventRangeEstimate",
        "EventHistogramEstimate",
        "EventMeanRangeEstimate",
    } <= names
    estimate = schema["paths"]["/v1/metrics/{name}/estimate"]["get"]
    ok = estimate["responses"]["200"]["content"]["application/json"]["schema"]
    assert len(ok["anyOf"]) == 9  # 4 shapes, 3 of them also an event metric's, 2 more
    assert {"q", "candidates", "by", "where", "compare", "compare_to"} <= {
        parameter["name"] for parameter in estimate["parameters"]
    }
