"""Numeric and histogram metrics in the collector, over real HTTP on SQLite and PostgreSQL.

Registration of both types (and its 422s), numeric payload validation, the sums kept in the
report transaction (exactly the Python sums of the stored payloads, never counting a resent
report twice, all or nothing), histograms stored as categorical metrics over their buckets,
and the raw reports' payload text and export.
"""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from click.testing import CliRunner

from deniable.cli.main import cli
from deniable.client import MetricSpec
from deniable.collector.storage import read_reports, read_sums
from deniable.estimators import PeriodSums
from deniable.sources.reportfile import read_report_file
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    RunningCollector,
    make_numeric_reports,
    make_reports,
    overlapping_uploads,
    post_reports,
    register,
    unique_name,
)

TODAY = "2026-11-21"
YESTERDAY = "2026-11-20"
PERIODS = ["2026-11-19", YESTERDAY, TODAY]


def sums(collector: RunningCollector, spec: MetricSpec) -> list[PeriodSums]:
    """The stored sums of ``spec`` over :data:`PERIODS`, read by the storage's public query."""
    return read_sums(collector.app_state().database, spec, PERIODS)


def python_sums(reports: list[dict[str, Any]], period: str) -> tuple[int, float, float]:
    ys = [float(r["payload"]) for r in reports if r["period"] == period]
    return len(ys), math.fsum(ys), math.fsum(y * y for y in ys)


def assert_sums(stored: list[PeriodSums], reports: list[dict[str, Any]]) -> None:
    """The stored sums equal the payloads' sums per period (relative 1e-12), n exactly."""
    for entry in stored:
        n, total, squares = python_sums(reports, entry.period)
        assert entry.n == n
        assert entry.total == pytest.approx(total, rel=1e-12, abs=1e-12)
        assert entry.total_squares == pytest.approx(squares, rel=1e-12, abs=1e-12)


def numeric(admin: httpx.Client, mechanism: str, epsilon: float = 1.0) -> MetricSpec:
    spec = MetricSpec.numeric(
        unique_name(mechanism), lower=0, upper=5000, epsilon=epsilon, mechanism=mechanism
    )
    return register(admin, spec)


# --- registration ----------------------------------------------------------------------------


def test_numeric_and_histogram_specs_register_and_are_served(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    load = unique_name("load_ms")
    hist = unique_name("load_hist")
    numeric_body = {
        "name": load,
        "type": "numeric",
        "lower": 0,
        "upper": 5000,
        "epsilon": 1.0,
        "mechanism": "pm",
        "period": "day",
    }
    histogram_body = {
        "name": hist,
        "type": "histogram",
        "edges": [0, 100, 250, 500, 1000, 5000],
        "epsilon": 1.0,
        "mechanism": "oue",
        "period": "day",
    }
    expected = {
        load: MetricSpec.numeric(load, lower=0, upper=5000, epsilon=1.0, mechanism="pm"),
        hist: MetricSpec.histogram(
            hist, [0, 100, 250, 500, 1000, 5000], epsilon=1.0, mechanism="oue"
        ),
    }
    for body in (numeric_body, histogram_body):
        response = admin.post("/v1/metrics", json=body)
        assert response.status_code == 201, response.text
        served = response.json()
        assert served["fingerprint"] == expected[body["name"]].fingerprint
        assert admin.post("/v1/metrics", json=body).status_code == 200
    with collector.client() as anyone:
        listed = {m["name"]: m for m in anyone.get("/v1/metrics").json()["metrics"]}
        one = {name: anyone.get(f"/v1/metrics/{name}").json() for name in expected}
    for name, spec in expected.items():
        assert listed[name] == one[name] == json.loads(json.dumps(spec.to_dict()))
        assert MetricSpec.from_dict(listed[name]) == spec
    assert listed[load]["lower"] == 0 and listed[load]["upper"] == 5000
    assert "categories" not in listed[load] and "edges" not in listed[load]
    assert listed[hist]["edges"] == [0, 100, 250, 500, 1000, 5000]
    assert "lower" not in one[hist] and "categories" not in one[hist]
    auto = admin.post(
        "/v1/metrics",
        json={
            "name": unique_name("auto_num"),
            "type": "numeric",
            "lower": -1,
            "upper": 1,
            "epsilon": 4,
        },
    )
    assert auto.status_code == 201 and auto.json()["mechanism"] in ("duchi", "pm", "hybrid")


def test_openapi_describes_the_numeric_and_histogram_fields(collector: RunningCollector) -> None:
    with collector.client() as client:
        document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    register_body = document["paths"]["/v1/metrics"]["post"]["requestBody"]["content"]
    for schema in (register_body["application/json"]["schema"], schemas["MetricSpecOut"]):
        assert {"lower", "upper", "edges"} <= set(schema["properties"])
    assert "number" in schemas["Report"]["properties"]["payload"]["description"]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"type": "numeric", "lower": 10, "upper": 10}, "lower must be less than upper"),
        ({"type": "numeric", "lower": 10, "upper": 0}, "lower must be less than upper"),
        ({"type": "numeric", "lower": "0", "upper": 10}, "lower"),
        ({"type": "numeric", "lower": 0, "upper": "ten"}, "upper"),
        ({"type": "numeric", "lower": 0}, "upper"),
        ({"type": "numeric", "lower": 0, "upper": 1, "categories": ["a", "b"]}, "no categories"),
        ({"type": "numeric", "lower": 0, "upper": 1, "edges": [0, 1, 2]}, "no categories or edges"),
        ({"type": "numeric", "lower": 0, "upper": 1, "mechanism": "krr"}, "duchi, pm or hybrid"),
        ({"type": "numeric", "lower": 0, "upper": 1, "mechanism": "laplace"}, "mechanism"),
        ({"type": "histogram", "edges": [0, 100, 50]}, "strictly increasing"),
        ({"type": "histogram", "edges": [0, 100, 100, 200]}, "strictly increasing"),
        ({"type": "histogram", "edges": [0, 100]}, "at least 3 edges"),
        ({"type": "histogram", "edges": [0, "1", 2]}, "edges"),
        ({"type": "histogram", "edges": "0,1,2"}, "edges"),
        (
            {"type": "histogram", "edges": [0, 1, 2], "mechanism": "pm"},
            "a histogram metric uses auto, krr, oue or olh",
        ),
        ({"type": "histogram", "edges": [0, 1, 2], "categories": ["a", "b"]}, "edges only"),
        ({"type": "histogram"}, "edges"),
        ({"type": "categorical", "categories": ["a", "b"], "lower": 0}, "for numbers only"),
    ],
)
def test_invalid_numeric_and_histogram_specs_are_422_naming_the_problem(
    admin: httpx.Client, fields: dict[str, Any], problem: str
) -> None:
    body = {"name": unique_name("bad"), "epsilon": 1.0, **fields}
    response = admin.post("/v1/metrics", json=body)
    assert response.status_code == 422, response.text
    assert problem in response.json()["detail"]
    assert admin.get(f"/v1/metrics/{body['name']}").status_code == 404


# --- ingest and sums -------------------------------------------------------------------------


def test_numeric_reports_are_stored_with_their_exact_sums(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    """Sums per period equal the Python sums of the payloads; the raw reports keep each payload
    as its JSON text (a float's repr); resending every acknowledged report changes nothing."""
    specs = [numeric(admin, "pm"), numeric(admin, "duchi"), numeric(admin, "hybrid", 3.0)]
    batches: dict[str, list[dict[str, Any]]] = {}
    for seed, spec in enumerate(specs):
        values = [(i * 37.3) % 5200 - 100 for i in range(700)]
        batches[spec.name] = make_numeric_reports(spec, values[:400], TODAY, seed=seed) + (
            make_numeric_reports(spec, values[400:], YESTERDAY, seed=seed + 10)
        )
    mixed = [r for i in range(700) for r in (batches[s.name][i] for s in specs)]
    for start in range(0, len(mixed), 1000):
        response = post_reports(uploader, mixed[start : start + 1000])
        assert response.status_code == 202, response.text
        assert response.json()["duplicates"] == 0
    before = {spec.name: sums(collector, spec) for spec in specs}
    for spec in specs:
        reports = batches[spec.name]
        assert [s.n for s in before[spec.name]] == [0, 300, 400]
        assert_sums(before[spec.name], reports)
        stored = read_reports(
            collector.app_state().database, spec.name, start=None, end=None, after=None, limit=2000
        )
        by_id = {r["id"]: r["payload"] for r in reports}
        assert len(stored) == len(reports)
        for report_id, _, text, _ in stored:
            assert text == repr(float(by_id[report_id]))
            assert json.loads(text) == by_id[report_id]

    for start in range(0, len(mixed), 1000):
        response = post_reports(uploader, mixed[start : start + 1000])
        assert response.json() == {"accepted": 0, "duplicates": len(mixed[start : start + 1000])}
    resent_with_new = make_numeric_reports(specs[0], [1.0, 4999.0], TODAY, seed=99)
    response = post_reports(uploader, batches[specs[0].name][:300] + resent_with_new + mixed[:5])
    assert response.json() == {"accepted": 2, "duplicates": 305}
    for spec in specs[1:]:
        assert sums(collector, spec) == before[spec.name]
    assert_sums(sums(collector, specs[0]), batches[specs[0].name] + resent_with_new)


def test_a_numeric_report_twice_in_one_batch_counts_once(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = numeric(admin, "pm")
    reports = make_numeric_reports(spec, [10.0, 20.0, 30.0], TODAY, seed=5)
    response = post_reports(uploader, [*reports, reports[1], reports[0]])
    assert response.json() == {"accepted": 3, "duplicates": 2}
    assert_sums(sums(collector, spec), reports)


def test_a_bad_numeric_payload_refuses_the_whole_batch_naming_it(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    pm, duchi = numeric(admin, "pm"), numeric(admin, "duchi")
    krr = register(
        admin,
        MetricSpec.categorical(unique_name("krr"), list("abcd"), epsilon=1.0, mechanism="krr"),
    )
    good = (
        make_numeric_reports(pm, [100.0, 200.0, 300.0, 400.0], TODAY, seed=1)
        + make_numeric_reports(duchi, [100.0, 200.0, 300.0], TODAY, seed=2)
        + make_reports(krr, [0, 1, 2], TODAY, seed=3)
    )
    pm_bound = pm.numeric_randomizer.bound
    c1 = duchi.numeric_randomizer.bound
    bad_payloads = {
        0: pm_bound * 1.001,
        1: "0.5",
        2: {"y": 1},
        4: c1 * 0.5,
        5: -c1 * 1.01,
        7: 1.5,
    }
    batch = [
        dict(r, payload=bad_payloads[i]) if i in bad_payloads else r for i, r in enumerate(good)
    ]
    response = post_reports(uploader, batch)
    assert response.status_code == 422, response.text
    reasons = {item["index"]: item["reason"] for item in response.json()["detail"]}
    assert sorted(reasons) == sorted(bad_payloads)
    assert pm.name in reasons[0] and "payload must lie in" in reasons[0]
    assert "payload" in reasons[1] and "number" in reasons[1]
    assert duchi.name in reasons[4] and "+-" in reasons[4]
    assert duchi.name in reasons[5]
    assert krr.name in reasons[7]
    for spec in (pm, duchi):
        assert [s.n for s in sums(collector, spec)] == [0, 0, 0]
    assert post_reports(uploader, good).json() == {"accepted": len(good), "duplicates": 0}
    assert_sums(sums(collector, pm), good[:4])
    assert_sums(sums(collector, duchi), good[4:7])


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numeric_payloads_are_refused(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client, literal: str
) -> None:
    spec = numeric(admin, "pm")
    good = make_numeric_reports(spec, [10.0], TODAY, seed=8)[0]
    bad = dict(good, id=str(uuid.uuid4()))
    body = json.dumps({"reports": [good, dict(bad, payload=0.0)]}).replace("0.0}", literal + "}")
    response = uploader.post(
        "/v1/reports", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert [item["index"] for item in detail] == [1]
    assert "finite" in detail[0]["reason"] or "lie in" in detail[0]["reason"]
    assert [s.n for s in sums(collector, spec)] == [0, 0, 0]


def test_canonical_numeric_payloads_are_stored_canonically(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    """An integer y is stored as a float's text, and a duchi y within the tolerance as +-C1."""
    pm, duchi = numeric(admin, "pm"), numeric(admin, "duchi")
    c1 = duchi.numeric_randomizer.bound
    reports = [
        dict(make_numeric_reports(pm, [0.0], TODAY, seed=1)[0], payload=1),
        dict(make_numeric_reports(duchi, [0.0], TODAY, seed=2)[0], payload=-c1 * (1 + 1e-12)),
    ]
    assert post_reports(uploader, reports).status_code == 202
    database = collector.app_state().database
    for spec, text in ((pm, "1.0"), (duchi, repr(-c1))):
        rows = read_reports(database, spec.name, start=None, end=None, after=None, limit=10)
        assert [row[2] for row in rows] == [text]
    assert sums(collector, duchi)[-1] == PeriodSums(TODAY, 1, -c1, c1 * c1)


def test_concurrent_overlapping_numeric_uploads_count_each_report_once(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    spec = numeric(admin, "pm")
    reports = make_numeric_reports(spec, [i * 12.5 for i in range(400)], TODAY, seed=9)
    accepted, errors = overlapping_uploads(lambda: collector.client(INGEST_KEY), reports)
    assert errors == []
    assert sum(accepted) == 400
    assert_sums(sums(collector, spec), reports)


def test_reports_of_an_archived_numeric_metric_are_refused_and_its_sums_stay(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = numeric(admin, "duchi")
    reports = make_numeric_reports(spec, [1.0, 2.0], TODAY, seed=4)
    assert post_reports(uploader, reports).status_code == 202
    assert admin.post(f"/v1/metrics/{spec.name}/archive").status_code == 200
    more = make_numeric_reports(spec, [3.0], TODAY, seed=5)
    response = post_reports(uploader, more)
    assert response.status_code == 422 and "archived" in response.json()["detail"][0]["reason"]
    assert_sums(sums(collector, spec), reports)


# --- histograms ------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["krr", "oue", "olh"])
def test_histogram_reports_land_in_support_counts_like_a_categorical_metric(
    admin: httpx.Client, uploader: httpx.Client, mechanism: str
) -> None:
    edges = [0, 100, 250, 500, 1000, 5000]
    spec = register(
        admin, MetricSpec.histogram(unique_name("hist"), edges, epsilon=1.0, mechanism=mechanism)
    )
    assert spec.k == 5
    values = [(i * 53) % 6000 - 200 for i in range(300)]
    reports = make_reports(spec, [spec.bucket_of(v) for v in values], TODAY, seed=21)
    assert post_reports(uploader, reports).json() == {"accepted": 300, "duplicates": 0}
    support = [0] * spec.k
    for report in reports:
        for v in spec.randomizer.supported(report["payload"]):
            support[v] += 1
    p, q, n = spec.randomizer.p_star, spec.randomizer.q_star, len(reports)
    response = admin.get(f"/v1/metrics/{spec.name}/estimate")
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["n"] == n
    assert [row["category"] for row in result["estimates"]] == list(spec.categories)
    assert spec.categories[0] == "[0, 100)" and spec.categories[-1] == "[1000, 5000]"
    for v, row in enumerate(result["estimates"]):
        assert row["unbiased"] == pytest.approx((support[v] / n - q) / (p - q), abs=1e-12)
    bad = dict(make_reports(spec, [0], TODAY, seed=22)[0], payload=0.5)
    assert post_reports(uploader, [bad]).status_code == 422


# --- export ----------------------------------------------------------------------------------


def test_the_admin_export_serves_numeric_payloads_as_numbers(
    admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = numeric(admin, "hybrid", 2.0)
    reports = make_numeric_reports(spec, [i * 10.0 for i in range(50)], TODAY, seed=31)
    assert post_reports(uploader, reports).status_code == 202
    response = admin.get(f"/v1/admin/metrics/{spec.name}/reports", params={"limit": 100})
    assert response.status_code == 200, response.text
    exported = {r["id"]: r["payload"] for r in response.json()["reports"]}
    assert exported == {r["id"]: r["payload"] for r in reports}
    assert all(type(y) is float for y in exported.values())


@pytest.mark.parametrize("via", ["api", "database"])
def test_deniable_export_writes_numeric_payloads_that_read_back_exactly(
    collector: RunningCollector,
    admin: httpx.Client,
    uploader: httpx.Client,
    tmp_path: Path,
    via: str,
) -> None:
    """``deniable export`` (admin API or database) writes a Float64 ``payload`` column in both
    formats, and the file reads back every stored double exactly."""
    spec = numeric(admin, "pm", 2.0)
    reports = make_numeric_reports(spec, [i * 7.0 for i in range(120)], TODAY, seed=41)
    assert post_reports(uploader, reports).status_code == 202
    source = ["--database", collector.settings.database_url] if via == "database" else []
    expected = {r["id"]: r["payload"] for r in reports}
    for fmt in ("parquet", "csv"):
        out = tmp_path / f"{spec.name}.{fmt}"
        args = ["--collector", collector.url, "--token", ADMIN_TOKEN, "export", spec.name]
        result = CliRunner().invoke(cli, [*args, "--output", str(out), *source])
        assert result.exit_code == 0, result.output
        frame = read_report_file(out, spec.mechanism)
        assert frame.schema["payload"] == pl.Float64
        assert dict(zip(frame["id"].to_list(), frame["payload"].to_list(), strict=True)) == expected
