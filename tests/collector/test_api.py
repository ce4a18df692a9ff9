"""The collector's HTTP API against a real uvicorn server, on SQLite and on PostgreSQL.

Registry, ingestion (every refusal reason, all-or-nothing, idempotence), estimates, series,
auth, Prometheus text. Each test registers its own metrics under unique names.
"""

from __future__ import annotations

import base64
import json
import socket
import uuid
from typing import Any

import httpx
import pytest

from deniable.client import MetricSpec
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_reports,
    overlapping_uploads,
    post_reports,
    register,
    unique_name,
)

TODAY = "2026-11-21"


def estimate(client: httpx.Client, name: str, **params: Any) -> dict[str, Any]:
    response = client.get(f"/v1/metrics/{name}/estimate", params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def krr(admin: httpx.Client) -> MetricSpec:
    """A registered 4-category krr metric with daily periods."""
    spec = MetricSpec.categorical(
        unique_name("krr"), ["a", "b", "c", "d"], epsilon=1.0, mechanism="krr"
    )
    return register(admin, spec)


# --- liveness, schema, telemetry -------------------------------------------------------------


def test_healthz_and_openapi_describe_the_upload_body(collector: RunningCollector) -> None:
    with collector.client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        schema = client.get("/openapi.json").json()
    body = schema["paths"]["/v1/reports"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/ReportBatch"}
    assert set(schema["components"]["schemas"]["Report"]["properties"]) == {
        "id",
        "metric",
        "fingerprint",
        "period",
        "payload",
        "dims",
    }


def _counted_traffic(collector: RunningCollector) -> tuple[MetricSpec, dict[str, Any], str]:
    """Register a krr metric, upload new, resent, unknown-metric and bad reports; the metric,
    the unknown-metric report and the ``/metrics`` text afterwards."""
    with collector.client(ADMIN_TOKEN) as admin:
        krr = register(
            admin,
            MetricSpec.categorical(unique_name("krr"), list("abcd"), epsilon=1.0, mechanism="krr"),
        )
    reports = make_reports(krr, [0, 1, 2], TODAY, seed=1)
    stranger = dict(reports[0], id=str(uuid.uuid4()), metric=unique_name("nosuch"))
    bad_payload = dict(reports[0], id=str(uuid.uuid4()), payload=7)
    with collector.client(INGEST_KEY) as uploader:
        assert post_reports(uploader, reports).status_code == 202
        assert post_reports(uploader, reports[:1]).status_code == 202
        assert post_reports(uploader, [stranger]).status_code == 422
        assert post_reports(uploader, [bad_payload]).status_code == 422
    with collector.client() as client:
        return krr, stranger, client.get("/metrics").text


def test_prometheus_counts_carry_no_metric_name_unless_opted_in(
    backend: str, databases: DatabaseFactory
) -> None:
    server = RunningCollector(collector_settings(databases.new(backend))).start()
    try:
        krr, stranger, text = _counted_traffic(server)
    finally:
        server.stop()
    assert 'deniable_reports_accepted_total{metric="all"} 3.0' in text
    assert 'deniable_reports_rejected_total{metric="all",reason="payload"} 1.0' in text
    assert krr.name not in text and stranger["metric"] not in text


def test_prometheus_counts_accepted_duplicate_and_rejected_by_reason(
    backend: str, databases: DatabaseFactory
) -> None:
    settings = collector_settings(databases.new(backend), prometheus_metric_labels=True)
    server = RunningCollector(settings).start()
    try:
        krr, stranger, text = _counted_traffic(server)
    finally:
        server.stop()
    assert f'deniable_reports_accepted_total{{metric="{krr.name}"}} 3.0' in text
    assert f'deniable_reports_duplicate_total{{metric="{krr.name}"}} 1.0' in text
    assert f'deniable_reports_rejected_total{{metric="{krr.name}",reason="payload"}} 1.0' in text
    assert 'deniable_reports_rejected_total{metric="_unknown",reason="unknown_metric"}' in text
    assert stranger["metric"] not in text
    assert (
        'deniable_request_duration_seconds_bucket{le="0.1",method="POST",route="/v1/reports",status="202"}'
        in text
    )


# --- registry --------------------------------------------------------------------------------


def test_register_resolves_auto_and_serves_the_spec(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    name = unique_name("auto")
    body = {"name": name, "type": "categorical", "categories": ["x", "y", "z"], "epsilon": 2.0}
    response = admin.post("/v1/metrics", json=body)
    assert response.status_code == 201, response.text
    expected = MetricSpec.categorical(name, ["x", "y", "z"], epsilon=2.0, mechanism="auto")
    answer = response.json()
    assert isinstance(answer.pop("warnings"), list)  # the privacy warnings: test_privacy_route
    assert answer == expected.to_dict()
    assert answer["mechanism"] != "auto"
    with collector.client() as anyone:
        assert anyone.get(f"/v1/metrics/{name}").json() == expected.to_dict()
        listed = anyone.get("/v1/metrics").json()["metrics"]
    assert expected.to_dict() in listed


def test_reregistering_the_same_spec_is_200_and_another_spec_is_409(admin: httpx.Client) -> None:
    name = unique_name("again")
    spec = MetricSpec.boolean(name, epsilon=0.5)
    assert admin.post("/v1/metrics", json=spec.fingerprint_fields()).status_code == 201
    same = admin.post("/v1/metrics", json=spec.to_dict())
    assert same.status_code == 200
    assert same.json() == {**spec.to_dict(), "warnings": same.json()["warnings"]}
    other = MetricSpec.boolean(name, epsilon=0.7)
    conflict = admin.post("/v1/metrics", json=other.fingerprint_fields())
    assert conflict.status_code == 409
    assert name in conflict.json()["detail"]
    assert admin.get(f"/v1/metrics/{name}").json()["epsilon"] == 0.5


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"name": "Bad Name", "type": "boolean", "epsilon": 1}, "metric name"),
        ({"name": "x1", "type": "categorical", "categories": ["a"], "epsilon": 1}, "at least 2"),
        ({"name": "x2", "type": "categorical", "categories": ["a", "a"], "epsilon": 1}, "distinct"),
        ({"name": "x3", "type": "boolean", "epsilon": -1}, "epsilon"),
        (
            {
                "name": "x4",
                "type": "categorical",
                "categories": ["a", "b", "c"],
                "epsilon": 1,
                "mechanism": "brr",
            },
            "brr",
        ),
        ({"name": "x5", "type": "boolean", "epsilon": 1, "mechanism": "rappor"}, "mechanism"),
        (
            {"name": "x6", "type": "boolean", "epsilon": 1, "fingerprint": "0000000000000000"},
            "fingerprint",
        ),
    ],
)
def test_invalid_specs_are_422_naming_the_problem(
    admin: httpx.Client, body: dict[str, Any], problem: str
) -> None:
    response = admin.post("/v1/metrics", json=body)
    assert response.status_code == 422
    assert problem in response.json()["detail"]


def test_structurally_invalid_spec_bodies_are_422(admin: httpx.Client) -> None:
    for body in ({"name": "y1"}, {"name": "y2", "type": "ternary", "epsilon": 1}, [1, 2]):
        response = admin.post("/v1/metrics", json=body)
        assert response.status_code == 422
        assert response.json()["detail"]


def test_unknown_metric_is_404(collector: RunningCollector, admin: httpx.Client) -> None:
    name = unique_name("ghost")
    with collector.client() as anyone:
        response = anyone.get(f"/v1/metrics/{name}")
    assert response.status_code == 404
    assert name in response.json()["detail"]
    assert admin.get(f"/v1/metrics/{name}/estimate").status_code == 404
    assert admin.get(f"/v1/metrics/{name}/series").status_code == 404


@pytest.mark.parametrize("token", [None, "wrong", INGEST_KEY])
def test_admin_calls_need_the_admin_token(
    collector: RunningCollector, krr: MetricSpec, token: str | None
) -> None:
    with collector.client(token) as client:
        calls = [
            client.post(
                "/v1/metrics",
                json=MetricSpec.boolean(unique_name(), epsilon=1).fingerprint_fields(),
            ),
            client.get(f"/v1/metrics/{krr.name}/estimate"),
            client.get(f"/v1/metrics/{krr.name}/series"),
            client.post("/v1/admin/retention"),
        ]
    for response in calls:
        assert response.status_code == 401
        assert "admin token" in response.json()["detail"]


# --- ingestion -------------------------------------------------------------------------------


def test_upload_needs_the_ingest_key_and_accepts_the_admin_token(
    collector: RunningCollector, krr: MetricSpec, admin: httpx.Client
) -> None:
    reports = make_reports(krr, [0, 1], TODAY, seed=2)
    for token in (None, "wrong"):
        with collector.client(token) as client:
            response = post_reports(client, reports)
        assert response.status_code == 401
        assert "ingest" in response.json()["detail"]
    assert estimate(admin, krr.name)["n"] == 0
    assert post_reports(admin, reports).json() == {"accepted": 2, "duplicates": 0}


def test_ingest_is_idempotent_across_and_within_batches(
    uploader: httpx.Client, admin: httpx.Client, krr: MetricSpec
) -> None:
    reports = make_reports(krr, [0, 1, 2, 3, 0], TODAY, seed=3)
    first = post_reports(uploader, reports)
    assert first.status_code == 202
    assert first.json() == {"accepted": 5, "duplicates": 0}
    assert post_reports(uploader, reports).json() == {"accepted": 0, "duplicates": 5}
    more = make_reports(krr, [1, 1], TODAY, seed=4)
    mixed = [*more, more[0], reports[2]]
    assert post_reports(uploader, mixed).json() == {"accepted": 2, "duplicates": 2}
    result = estimate(admin, krr.name)
    assert result["n"] == 7
    counts = {row["category"]: row for row in result["estimates"]}
    assert set(counts) == {"a", "b", "c", "d"}


def test_estimate_counts_equal_the_support_of_the_stored_reports(
    uploader: httpx.Client, admin: httpx.Client
) -> None:
    """For every mechanism, the debiased pooled count equals the one recomputed from the payloads."""
    for seed, mechanism in enumerate(("krr", "oue", "olh")):
        spec = register(
            admin,
            MetricSpec.categorical(
                unique_name(mechanism), list("abcdefghij"), epsilon=1.0, mechanism=mechanism
            ),
        )
        reports = make_reports(spec, [i % 10 for i in range(300)], TODAY, seed=50 + seed)
        assert post_reports(uploader, reports).status_code == 202
        support = [0] * spec.k
        for report in reports:
            for v in spec.randomizer.supported(report["payload"]):
                support[v] += 1
        p, q, n = spec.randomizer.p_star, spec.randomizer.q_star, len(reports)
        result = estimate(admin, spec.name)
        assert result["n"] == n
        for v, row in enumerate(result["estimates"]):
            assert row["unbiased"] == pytest.approx((support[v] / n - q) / (p - q), abs=1e-12)


def test_malformed_json_is_400(uploader: httpx.Client) -> None:
    for body in (b"{not json", b"", b"\xff\xfe", b'{"reports": [1, 2'):
        response = uploader.post(
            "/v1/reports", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400
        assert "JSON" in response.json()["detail"]


@pytest.mark.parametrize(
    "body", [[], {"reports": 5}, {"reports": [], "extra": 1}, {"reports": None}, "x"]
)
def test_wrong_body_shape_is_422(uploader: httpx.Client, body: Any) -> None:
    response = uploader.post("/v1/reports", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["index"] is None
    assert "reports" in response.json()["detail"][0]["reason"]


def test_empty_batch_is_accepted(uploader: httpx.Client) -> None:
    assert post_reports(uploader, []).json() == {"accepted": 0, "duplicates": 0}


def test_oversized_body_is_413_from_content_length(uploader: httpx.Client) -> None:
    response = uploader.post(
        "/v1/reports",
        content=b" " * ((1 << 20) + 1),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert "bytes" in response.json()["detail"]


def test_oversized_streamed_body_is_413_before_it_is_read_whole(
    collector: RunningCollector,
) -> None:
    """A chunked body that never ends still gets its 413 once it passes the limit."""
    host, port = collector.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/reports HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + INGEST_KEY.encode() + b"\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b" " * 65536
        for _ in range(17):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"exceeds" in answer


def test_more_reports_than_max_batch_is_413(uploader: httpx.Client, krr: MetricSpec) -> None:
    reports = make_reports(krr, [0] * 1001, TODAY, seed=6)
    response = post_reports(uploader, reports)
    assert response.status_code == 413
    assert "1000 reports" in response.json()["detail"]


def _oue_spec(admin: httpx.Client) -> MetricSpec:
    return register(
        admin,
        MetricSpec.categorical(
            unique_name("oue"), list("abcdefghij"), epsilon=1.0, mechanism="oue"
        ),
    )


def test_422_names_every_bad_report_and_stores_nothing(
    uploader: httpx.Client, admin: httpx.Client, krr: MetricSpec
) -> None:
    good = make_reports(krr, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3], TODAY, seed=7)
    batch: list[Any] = list(good)
    batch[1] = dict(good[1], id=good[1]["id"].upper())
    batch[2] = dict(good[2], payload=4)
    batch[3] = dict(good[3], metric=unique_name("unknown"))
    batch[4] = dict(good[4], fingerprint="0123456789abcdef")
    batch[5] = dict(good[5], period="2026-11-23")
    batch[6] = dict(good[6], period="2026-08-01")
    batch[7] = dict(good[7], period="2026-W47")
    batch[8] = {k: v for k, v in good[8].items() if k != "fingerprint"}
    batch[9] = dict(good[9], payload=True)
    batch[10] = "not an object"
    response = post_reports(uploader, batch)
    assert response.status_code == 422
    detail = response.json()["detail"]
    reasons = {item["index"]: item["reason"] for item in detail}
    assert sorted(reasons) == list(range(1, 11))
    assert "UUID" in reasons[1]
    assert "payload" in reasons[2] and krr.name in reasons[2]
    assert "not registered" in reasons[3]
    assert "fingerprint" in reasons[4]
    assert "ahead" in reasons[5]
    assert "retention" in reasons[6]
    assert "day label" in reasons[7]
    assert "missing field 'fingerprint'" in reasons[8]
    assert "payload" in reasons[9]
    assert "object" in reasons[10]
    assert estimate(admin, krr.name)["n"] == 0
    assert post_reports(uploader, good).json() == {"accepted": 12, "duplicates": 0}


@pytest.mark.parametrize(
    "bad_id",
    [
        "6F1C2E3A-0000-4000-8000-000000000000",
        "6f1c2e3a000040008000000000000000",
        "{6f1c2e3a-0000-4000-8000-000000000000}",
        "6f1c2e3a-0000-4000-8000-00000000000",
        "",
        "x" * 5000,
    ],
)
def test_non_canonical_ids_are_refused(
    uploader: httpx.Client, krr: MetricSpec, bad_id: str
) -> None:
    report = dict(make_reports(krr, [0], TODAY, seed=8)[0], id=bad_id)
    response = post_reports(uploader, [report])
    assert response.status_code == 422
    assert response.json()["detail"][0]["index"] == 0


def test_payload_domain_is_checked_per_mechanism(
    uploader: httpx.Client, admin: httpx.Client
) -> None:
    oue = _oue_spec(admin)
    olh = register(
        admin,
        MetricSpec.categorical(
            unique_name("olh"), list("abcdefghij"), epsilon=1.0, mechanism="olh"
        ),
    )
    brr = register(admin, MetricSpec.boolean(unique_name("brr"), epsilon=1.0))
    cases = [
        (oue, "AAAA"),
        (oue, base64.b64encode(b"\x00\x04").decode()),
        (oue, "!!!="),
        (oue, 3),
        (olh, {"a": 0, "b": 1, "y": 0}),
        (olh, {"a": 1, "b": 1}),
        (olh, {"a": 1, "b": 1, "y": 99}),
        (olh, {"a": 1, "b": 2**31, "y": 0}),
        (brr, 2),
        (brr, -1),
        (brr, "1"),
    ]
    batch = []
    for i, (spec, payload) in enumerate(cases):
        report = make_reports(spec, [0], TODAY, seed=100 + i)[0]
        batch.append(dict(report, payload=payload))
    response = post_reports(uploader, batch)
    assert response.status_code == 422
    indices = [item["index"] for item in response.json()["detail"]]
    assert indices == list(range(len(cases)))
    for spec in (oue, olh, brr):
        assert estimate(admin, spec.name)["n"] == 0


@pytest.mark.parametrize(
    ("period_kind", "accepted", "refused"),
    [
        (
            "day",
            ["2026-11-21", "2026-11-22", "2026-08-23"],
            ["2026-11-23", "2026-08-22", "2026-11-31", "2026-1-21", "21-11-2026"],
        ),
        (
            "week",
            ["2026-W47", "2026-W48", "2026-W34"],
            ["2026-W49", "2026-W33", "2026-W54", "2026-W7", "2026-11-21"],
        ),
        (
            "month",
            ["2026-11", "2026-12", "2026-08"],
            ["2027-01", "2026-07", "2026-13", "2026-1", "2026-11-21"],
        ),
    ],
)
def test_period_window_per_kind(
    uploader: httpx.Client,
    admin: httpx.Client,
    period_kind: str,
    accepted: list[str],
    refused: list[str],
) -> None:
    """The server date is 2026-11-21 and the window 90 days: 2026-08-23 is the oldest day accepted."""
    spec = register(
        admin, MetricSpec.boolean(unique_name(period_kind), epsilon=1.0, period=period_kind)
    )  # type: ignore[arg-type]
    for i, period in enumerate(refused):
        response = post_reports(uploader, make_reports(spec, [1], period, seed=200 + i))
        assert response.status_code == 422, period
    for i, period in enumerate(accepted):
        response = post_reports(uploader, make_reports(spec, [1], period, seed=300 + i))
        assert response.status_code == 202, (period, response.text)


def test_concurrent_overlapping_uploads_count_each_report_once(
    collector: RunningCollector, admin: httpx.Client, krr: MetricSpec
) -> None:
    reports = make_reports(krr, [i % 4 for i in range(400)], TODAY, seed=9)
    accepted, errors = overlapping_uploads(lambda: collector.client(INGEST_KEY), reports)
    assert errors == []
    assert sum(accepted) == 400
    assert estimate(admin, krr.name)["n"] == 400


# --- estimates and series --------------------------------------------------------------------


def test_estimate_defaults_to_the_last_7_periods_and_echoes_options(
    uploader: httpx.Client, admin: httpx.Client, krr: MetricSpec
) -> None:
    """The defaults every surface shares (issue 23): the 7 periods ending at the current
    one, consistent shares, intervals for all categories at once."""
    assert (
        post_reports(uploader, make_reports(krr, [0] * 50, "2026-11-14", seed=9)).status_code == 202
    )
    assert (
        post_reports(uploader, make_reports(krr, [0] * 50, "2026-11-20", seed=10)).status_code
        == 202
    )
    assert post_reports(uploader, make_reports(krr, [1] * 30, TODAY, seed=11)).status_code == 202
    week = estimate(admin, krr.name)
    assert (week["start"], week["end"], week["n"], week["periods"]) == ("2026-11-15", TODAY, 80, 2)
    assert week["metric"] == krr.name
    assert (week["confidence"], week["method"], week["pooling"], week["simultaneous"]) == (
        0.95,
        "consistent",
        "overlap-safe",
        True,
    )
    assert sum(row["frequency"] for row in week["estimates"]) == pytest.approx(1.0)
    ending = estimate(admin, krr.name, end="2026-11-20")
    assert (ending["start"], ending["n"]) == ("2026-11-14", 100)
    both = estimate(
        admin,
        krr.name,
        start="2026-11-19",
        end=TODAY,
        confidence=0.9,
        method="unbiased",
        pooling="independent",
        simultaneous="false",
    )
    assert (both["n"], both["periods"], both["start"]) == (80, 2, "2026-11-19")
    assert (both["confidence"], both["method"], both["pooling"], both["simultaneous"]) == (
        0.9,
        "unbiased",
        "independent",
        False,
    )


def test_empty_range_is_an_answer_with_null_frequencies(
    admin: httpx.Client, krr: MetricSpec
) -> None:
    result = estimate(admin, krr.name, start="2026-10-01", end="2026-10-31")
    assert (result["n"], result["periods"]) == (0, 0)
    for row in result["estimates"]:
        assert row["frequency"] is None
        assert (row["ci_low"], row["ci_high"]) == (0.0, 1.0)


def test_week_metric_accepts_dates_for_the_range(
    uploader: httpx.Client, admin: httpx.Client
) -> None:
    spec = register(admin, MetricSpec.boolean(unique_name("wk"), epsilon=1.0, period="week"))
    assert (
        post_reports(uploader, make_reports(spec, [1] * 20, "2026-W46", seed=12)).status_code == 202
    )
    by_date = estimate(admin, spec.name, start="2026-11-10", end="2026-11-21")
    assert (by_date["start"], by_date["end"], by_date["n"]) == ("2026-W46", "2026-W47", 20)
    assert estimate(admin, spec.name)["start"] == "2026-W41"  # the 7 weeks ending this one


@pytest.mark.parametrize(
    "params",
    [
        {"start": "2026-13-01"},
        {"end": "yesterday"},
        {"start": "2026-W47"},
        {"start": "2026-11-21", "end": "2026-11-01"},
        {"start": "2000-01-01", "end": "2026-11-21"},
        {"confidence": "1.5"},
        {"confidence": "0"},
        {"method": "bayes"},
        {"pooling": "sum"},
        {"simultaneous": "maybe"},
    ],
)
def test_bad_estimate_parameters_are_422(
    admin: httpx.Client, krr: MetricSpec, params: dict[str, str]
) -> None:
    response = admin.get(f"/v1/metrics/{krr.name}/estimate", params=params)
    assert response.status_code == 422
    assert response.json()["detail"]


def test_series_lists_every_period_oldest_first(
    uploader: httpx.Client, admin: httpx.Client, krr: MetricSpec
) -> None:
    assert (
        post_reports(uploader, make_reports(krr, [2] * 40, "2026-11-18", seed=13)).status_code
        == 202
    )
    assert (
        post_reports(uploader, make_reports(krr, [3] * 25, "2026-11-20", seed=14)).status_code
        == 202
    )
    response = admin.get(
        f"/v1/metrics/{krr.name}/series",
        params={"start": "2026-11-17", "end": TODAY, "confidence": 0.9},
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["metric"], body["confidence"], body["method"], body["simultaneous"]) == (
        krr.name,
        0.9,
        "consistent",
        True,
    )
    assert [(p["period"], p["n"]) for p in body["series"]] == [
        ("2026-11-17", 0),
        ("2026-11-18", 40),
        ("2026-11-19", 0),
        ("2026-11-20", 25),
        ("2026-11-21", 0),
    ]
    for point in body["series"]:
        assert [row["category"] for row in point["estimates"]] == ["a", "b", "c", "d"]
        if point["n"] == 0:
            assert all(row["frequency"] is None for row in point["estimates"])
    single = estimate(admin, krr.name, start="2026-11-18", end="2026-11-18", confidence=0.9)
    assert body["series"][1]["estimates"] == single["estimates"]


def test_no_header_or_address_reaches_the_database_or_logs(
    collector: RunningCollector,
    admin: httpx.Client,
    krr: MetricSpec,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sentinel = f"sentinel-{uuid.uuid4().hex}"
    headers = {"User-Agent": sentinel, "X-Forwarded-For": "203.0.113.9", "X-Device": sentinel}
    with caplog.at_level("DEBUG"), collector.client(INGEST_KEY, headers=headers) as client:
        assert post_reports(client, make_reports(krr, [0, 1], TODAY, seed=15)).status_code == 202
        assert post_reports(client, [{"bogus": sentinel}]).status_code == 422
        assert client.post("/v1/reports", content=b"{").status_code == 400
    assert sentinel not in caplog.text
    assert "203.0.113.9" not in caplog.text
    from sqlalchemy import create_engine, inspect, text

    from deniable.collector.storage.engine import normalize_url

    engine = create_engine(normalize_url(collector.settings.database_url))
    try:
        columns = {c["name"] for c in inspect(engine).get_columns("reports")}
        assert columns == {"id", "metric", "period", "payload", "received", "cell"}
        with engine.connect() as conn:
            for table in ("reports", "metrics", "period_counts", "support_counts"):
                dump = json.dumps(
                    [list(map(str, row)) for row in conn.execute(text(f"SELECT * FROM {table}"))]
                )
                assert sentinel not in dump
                assert "203.0.113.9" not in dump
                assert "127.0.0.1" not in dump
    finally:
        engine.dispose()


def test_ingest_key_is_not_needed_when_none_is_configured(databases: Any, backend: str) -> None:
    from testkit import collector_settings

    server = RunningCollector(
        collector_settings(databases.new(backend), ingest_key=None, admin_token=None)
    )
    server.start()
    try:
        with server.client() as client:
            spec = register(client, MetricSpec.boolean(unique_name("open"), epsilon=1.0))
            assert post_reports(client, make_reports(spec, [1], TODAY, seed=16)).status_code == 202
            assert estimate(client, spec.name)["n"] == 1
    finally:
        server.stop()


@pytest.mark.parametrize("route", ["estimate", "series"])
def test_a_range_of_more_periods_than_the_limit_is_422(
    admin: httpx.Client, krr: MetricSpec, route: str
) -> None:
    """The limit is counted exactly: max_range_periods days answer, one day more is refused."""
    import datetime as dt

    from deniable.collector.settings import Settings

    limit = Settings.model_fields["max_range_periods"].default
    end = dt.date.fromisoformat(TODAY)
    widest = (end - dt.timedelta(days=limit - 1)).isoformat()
    too_wide = (end - dt.timedelta(days=limit)).isoformat()
    path = f"/v1/metrics/{krr.name}/{route}"
    assert admin.get(path, params={"start": widest, "end": TODAY}).status_code == 200
    refused = admin.get(path, params={"start": too_wide, "end": TODAY})
    assert refused.status_code == 422
    assert f"more than {limit} periods" in refused.json()["detail"]
