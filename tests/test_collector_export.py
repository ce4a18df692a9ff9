"""The admin export of raw reports (keyset pages) and series options, over real HTTP on each backend."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from conftest import ADMIN_TOKEN, INGEST_KEY, RunningCollector, make_reports, register, unique_name
from deniable.client import MetricSpec
from deniable.collector.storage import open_database
from deniable.collector.storage.queries import read_reports
from sqlalchemy import Connection, event

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
    return [{"id": r["id"], "period": r["period"], "payload": r["payload"]} for r in ordered]


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
    single = admin.get(f"/v1/metrics/{spec.name}/series", params=window)
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


KEYSET_INDEX = "ix_reports_metric_period_id"


def _plan(connection: Connection, dialect: str, statement: str, parameters: Any) -> list[str]:
    """The plan of ``statement`` as lines: SQLite's query plan details, PostgreSQL's plan nodes.

    PostgreSQL runs with sequential scans off, so a small test table still shows the plan a
    large one gets; each node is "<Node Type> <Index Name> <Index Cond>".
    """
    if dialect == "sqlite":
        rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
        return [row[3] for row in rows]
    connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
    plan = connection.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters).scalar()
    nodes, lines = [plan[0]["Plan"]], []
    while nodes:
        node = nodes.pop()
        lines.append(
            " ".join(str(node.get(k, "")) for k in ("Node Type", "Index Name", "Index Cond"))
        )
        nodes.extend(node.get("Plans", []))
    return lines


@pytest.mark.parametrize(
    ("start", "end", "cursor_day"),
    [
        (None, None, None),
        (DAYS[0], DAYS[2], None),
        (None, None, DAYS[1]),
        (DAYS[0], DAYS[2], DAYS[1]),
    ],
)
def test_export_pages_read_the_keyset_index_in_order_without_sorting(
    collector: RunningCollector,
    stored: tuple[MetricSpec, list[dict[str, Any]]],
    start: str | None,
    end: str | None,
    cursor_day: str | None,
) -> None:
    """A page deep into a big period costs ``limit`` index entries, not a sort of the period.

    The export's own statement is captured as it runs and explained: it must read the
    (metric, period, id) index in order, and with a cursor seek to it by (period, id).
    """
    spec, reports = stored
    after = None
    if cursor_day is not None:
        last = _expected([r for r in reports if r["period"] == cursor_day])[10]
        after = (last["period"], last["id"])
    database = open_database(collector.settings.database_url)
    executed: list[tuple[str, Any]] = []
    event.listen(
        database.reader,
        "before_cursor_execute",
        lambda _conn, _cursor, statement, parameters, _context, _many: executed.append(
            (statement, parameters)
        ),
    )
    try:
        rows = read_reports(database, spec.name, start=start, end=end, after=after, limit=20)
        assert len(rows) == 20 and (after is None or (rows[0][1], rows[0][0]) > after)
        [(statement, parameters)] = [e for e in executed if "FROM reports" in e[0]]
        with database.reader.connect() as connection:
            plan = _plan(connection, database.dialect, statement, parameters)
    finally:
        database.dispose()
    assert not any(
        "TEMP B-TREE" in line or line.startswith(("Sort", "Incremental Sort")) for line in plan
    ), plan
    scans = [line for line in plan if KEYSET_INDEX in line]
    assert len(scans) == 1 and not scans[0].startswith("Bitmap"), plan
    if after is not None:
        assert "(period,id)>(?,?)" in scans[0] or "ROW(" in scans[0], plan


@pytest.mark.parametrize("start", [DAYS[0], DAYS[1], DAYS[2]])
def test_a_cursor_and_a_start_resume_at_the_later_of_the_two(
    admin: httpx.Client, stored: tuple[MetricSpec, list[dict[str, Any]]], start: str
) -> None:
    """A cursor in the second day with a start before, on, or after that day."""
    spec, reports = stored
    first = admin.get(_path(spec.name), params={"limit": 100}).json()
    last = first["reports"][-1]
    assert last["period"] == DAYS[1]
    rest, _ = _export(admin, spec.name, start=start, limit=1000, after=first["next"])
    expected = [
        r for r in _expected(reports) if (r["period"], r["id"]) > (last["period"], last["id"])
    ]
    assert rest == [r for r in expected if r["period"] >= start]
