"""The admin export of raw reports (keyset pages) and series options, over real HTTP on each backend."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from deniable.client import MetricSpec
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    RunningCollector,
    make_reports,
    register,
    unique_name,
)

DAYS = ["2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21"]


def _path(name: str) -> str:
    return f"/v1/admin/metrics/{name}/reports"


def _upload(uploader: httpx.Client, reports: list[dict[str, Any]]) -> None:
    for start in range(0, len(reports), 1000):
        response = uploader.post("/v1/reports", json={"reports": reports[start : start + 1000]})
        assert response.status_code == 202, response.text


def _export(admin: httpx.Client, name: str, **params: Any) -> tuple[list[dict[str, Any]], int]:
    """Every report of the export, following ``next``; and how many pages it took."""
    exported: list[dict[str, Any]] = []
    pages = 0
    cursor = None
    while True:
        response = admin.get(_path(name), params={**params, "after": cursor} if cursor else params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"reports", "next"}
        pages += 1
        assert pages <= 1000, "the cursor does not advance"
        if exported and body["reports"]:
            last, first = exported[-1], body["reports"][0]
            assert (last["period"], last["id"]) < (first["period"], first["id"])
        exported.extend(body["reports"])
        cursor = body["next"]
        if cursor is None:
            return exported, pages
        assert len(body["reports"]) == params["limit"]


@pytest.fixture(scope="module")
def stored(collector: RunningCollector) -> tuple[MetricSpec, list[dict[str, Any]]]:
    """An olh metric (dict payloads) with 301 reports over four days, and a neighbour metric."""
    with collector.client(ADMIN_TOKEN) as admin, collector.client(INGEST_KEY) as uploader:
        return _store(admin, uploader)


def _store(admin: httpx.Client, uploader: httpx.Client) -> tuple[MetricSpec, list[dict[str, Any]]]:
    spec = register(
        admin,
        MetricSpec.categorical(unique_name("exp"), list("abcdef"), epsilon=1.0, mechanism="olh"),
    )
    reports: list[dict[str, Any]] = []
    for i, day in enumerate(DAYS):
        reports += make_reports(spec, [(j + i) % 6 for j in range(70 + i)], day, seed=i)
    neighbour = register(admin, MetricSpec.boolean(unique_name("exp"), epsilon=1.0))
    reports += make_reports(neighbour, [1] * 40, DAYS[1], seed=9)
    _upload(uploader, reports[::2])
    _upload(uploader, reports[1::2] + reports[:50])
    return spec, [r for r in reports if r["metric"] == spec.name]


def _expected(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ordered = sorted(reports, key=lambda r: (r["period"], r["id"]))
    return [
        {"id": r["id"], "period": r["period"], "payload": r["payload"], "dims": None}
        for r in ordered
    ]


@pytest.mark.parametrize("limit", [1, 37, 301, 50_000])
def test_pages_cover_every_stored_report_once_in_order(
    admin: httpx.Client, stored: tuple[MetricSpec, list[dict[str, Any]]], limit: int
) -> None:
    spec, reports = stored
    if limit == 1:
        reports = [r for r in reports if r["period"] == DAYS[0]]
        exported, pages = _export(admin, spec.name, limit=limit, end=DAYS[0])
    else:
        exported, pages = _export(admin, spec.name, limit=limit)
    assert exported == _expected(reports)
    assert pages == -(-len(reports) // limit)


def test_the_default_page_and_a_period_range(
    admin: httpx.Client, stored: tuple[MetricSpec, list[dict[str, Any]]]
) -> None:
    spec, reports = stored
    whole = admin.get(_path(spec.name)).json()
    assert whole["next"] is None and whole["reports"] == _expected(reports)
    middle = [r for r in reports if DAYS[1] <= r["period"] <= DAYS[2]]
    exported, _ = _export(admin, spec.name, start=DAYS[1], end=DAYS[2], limit=50)
    assert exported == _expected(middle)
    assert admin.get(
        _path(spec.name), params={"start": "2026-01-01", "end": "2026-01-31"}
    ).json() == {
        "reports": [],
        "next": None,
    }


def test_week_metrics_take_week_labels_or_dates(
    admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(admin, MetricSpec.boolean(unique_name("wk"), epsilon=1.0, period="week"))
    reports = make_reports(spec, [0, 1] * 10, "2026-W46", 1) + make_reports(
        spec, [1] * 5, "2026-W47", 2
    )
    _upload(uploader, reports)
    by_label, _ = _export(admin, spec.name, start="2026-W47", limit=3)
    by_date, _ = _export(admin, spec.name, start="2026-11-18", limit=3)
    assert by_label == by_date == _expected([r for r in reports if r["period"] == "2026-W47"])


def test_export_needs_the_admin_token(
    collector: RunningCollector, stored: tuple[MetricSpec, list[dict[str, Any]]]
) -> None:
    spec, _ = stored
    for token in (None, "wrong", INGEST_KEY):
        with collector.client(token) as client:
            response = client.get(_path(spec.name))
        assert response.status_code == 401, (token, response.text)
        assert "reports" not in response.json()


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({"after": "not a cursor!"}, 422, "after is not a cursor"),
        ({"after": _cursor("2026-11-21")}, 422, "after is not a cursor"),
        ({"after": _cursor("2026-W47/0b8c0c1e-3f0c-4a43-9f59-2a1f3c1f6d11")}, 422, "cursor"),
        ({"after": _cursor("2026-11-21/0B8C0C1E-3F0C-4A43-9F59-2A1F3C1F6D11")}, 422, "cursor"),
        ({"after": "\u00e9t\u00e9"}, 422, "cursor"),
        ({"start": "2026-W47"}, 422, "start is not"),
        ({"end": "yesterday"}, 422, "end is not"),
        ({"start": "2026-11-21", "end": "2026-11-20"}, 422, "after end"),
        ({"limit": 0}, 422, "limit"),
        ({"limit": 50_001}, 422, "limit"),
        ({"limit": "many"}, 422, "limit"),
    ],
)
def test_bad_parameters_are_a_clear_422(
    admin: httpx.Client,
    stored: tuple[MetricSpec, list[dict[str, Any]]],
    params: dict[str, Any],
    status: int,
    words: str,
) -> None:
    spec, _ = stored
    response = admin.get(_path(spec.name), params=params)
    assert response.status_code == status, response.text
    assert words in response.text


def test_an_unknown_metric_is_404(admin: httpx.Client) -> None:
    response = admin.get(_path("no_such_metric_here"))
    assert response.status_code == 404
    assert "no_such_metric_here" in response.json()["detail"]


def test_a_cursor_resumes_after_its_report(
    admin: httpx.Client, stored: tuple[MetricSpec, list[dict[str, Any]]]
) -> None:
    """A cursor names a position, not a page number: reports stored before it never reappear."""
    spec, reports = stored
    first = admin.get(_path(spec.name), params={"limit": 100}).json()
    rest, _ = _export(admin, spec.name, limit=1000, after=first["next"])
    assert first["reports"] + rest == _expected(reports)


def test_series_takes_simultaneous_like_estimate(
    admin: httpx.Client, stored: tuple[MetricSpec, list[dict[str, Any]]]
) -> None:
    """Each period of a simultaneous series is that period's simultaneous estimate, and wider."""
    spec, _ = stored
    window = {"start": DAYS[0], "end": DAYS[-1], "confidence": 0.9}
    joint = admin.get(f"/v1/metrics/{spec.name}/series", params={**window, "simultaneous": "true"})
    single = admin.get(
        f"/v1/metrics/{spec.name}/series", params={**window, "simultaneous": "false"}
    )
    assert joint.status_code == single.status_code == 200, (joint.text, single.text)
    assert (joint.json()["simultaneous"], single.json()["simultaneous"]) == (True, False)
    for both, each in zip(joint.json()["series"], single.json()["series"], strict=True):
        day = both["period"]
        estimate = admin.get(
            f"/v1/metrics/{spec.name}/estimate",
            params={"start": day, "end": day, "confidence": 0.9, "simultaneous": "true"},
        ).json()
        assert both["n"] == estimate["n"] > 0
        assert both["estimates"] == estimate["estimates"]
        widths = []
        for wide, narrow in zip(both["estimates"], each["estimates"], strict=True):
            assert wide["frequency"] == narrow["frequency"]
            assert wide["ci_low"] <= narrow["ci_low"] and wide["ci_high"] >= narrow["ci_high"]
            widths.append(wide["ci_high"] - wide["ci_low"] - narrow["ci_high"] + narrow["ci_low"])
        assert max(widths) > 0.01, day
    refused = admin.get(f"/v1/metrics/{spec.name}/series", params={"simultaneous": "maybe"})
    assert refused.status_code == 422 and "simultaneous" in refused.text
