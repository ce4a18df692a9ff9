"""Event metrics on the collector (issue 40): the rule is registered, refused with its own
words, stored as the spec's JSON form and served; an estimate over one window of an event
metric that reports empty windows counts devices (an ``any`` metric's devices with the event
too), over more windows reports, and a metric of recorded values says nothing new; the
dashboard, the Prometheus scrape and a breakdown by dimension follow. Over real HTTP."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from deniable.client import MetricSpec
from deniable.collector.storage import open_database
from deniable.collector.storage.tables import metrics
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    make_numeric_reports,
    make_reports,
    register,
    signed_in,
    unique_name,
    viewer_collector,
)

TODAY = TEST_NOW.date()
DAYS = tuple((TODAY - dt.timedelta(days=back)).isoformat() for back in (2, 1))
ACTIVE, WITH_EVENT = 4000, 1000
"""Devices reporting each day of :data:`DAYS`, and how many of them saw the event."""


def any_body(name: str, **events: object) -> dict[str, object]:
    return {
        "name": name,
        "type": "boolean",
        "epsilon": 1.0,
        "events": {"aggregate": "any", "window": 7, **events},
    }


def test_an_event_rule_is_registered_stored_as_json_and_served(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    name = unique_name("used_search")
    answer = admin.post("/v1/metrics", json=any_body(name))
    assert answer.status_code == 201, answer.text
    rule = {"aggregate": "any", "window": 7, "report_empty": True}
    assert answer.json()["events"] == rule
    expected = MetricSpec.boolean(name, epsilon=1.0).with_events("any", window=7)
    assert answer.json()["fingerprint"] == expected.fingerprint
    assert admin.get(f"/v1/metrics/{name}").json()["events"] == rule
    served = next(m for m in admin.get("/v1/metrics").json()["metrics"] if m["name"] == name)
    assert served == expected.to_dict()
    database = open_database(collector.settings.database_url)
    try:
        with database.reader.connect() as connection:
            stored = connection.execute(
                select(metrics.c.spec).where(metrics.c.name == name)
            ).scalar_one()
    finally:
        database.dispose()
    assert json.loads(stored)["events"] == rule
    again = admin.post("/v1/metrics", json=any_body(name, report_empty=True))
    assert again.status_code == 200, "the same rule, its default spelled out"
    plain = unique_name("plain")
    assert admin.post("/v1/metrics", json={**any_body(plain), "events": None}).status_code == 201
    assert "events" not in admin.get(f"/v1/metrics/{plain}").json()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            {"type": "numeric", "lower": 0, "upper": 10, "events": {"aggregate": "any"}},
            "a numeric metric cannot aggregate events by any",
        ),
        (
            {"type": "boolean", "period": "week", "events": {"aggregate": "any", "window": 7}},
            "its period must be day",
        ),
        (
            {
                "type": "histogram",
                "edges": [0, 1, 5, 10],
                "events": {"aggregate": "count", "report_empty": False},
            },
            "events.report_empty must be true for count",
        ),
        (
            {
                "type": "numeric",
                "lower": 0,
                "upper": 10,
                "events": {"aggregate": "mean", "report_empty": True},
            },
            "events.report_empty cannot be true for mean",
        ),
        ({"type": "boolean", "events": {"aggregate": "any", "window": 3}}, "events.window"),
        ({"type": "boolean", "events": {"aggregate": "often"}}, "events.aggregate must be one"),
        ({"type": "boolean", "events": {"aggregate": "any", "every": 2}}, "events.every"),
        ({"type": "boolean", "events": {"aggregate": "any", "window": "7"}}, "events.window"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_problem(
    admin: httpx.Client, body: dict[str, object], problem: str
) -> None:
    name = unique_name("bad_rule")
    answer = admin.post("/v1/metrics", json={"name": name, "epsilon": 1.0, **body})
    assert answer.status_code == 422, answer.text
    assert problem in answer.json()["detail"]
    assert admin.get(f"/v1/metrics/{name}").status_code == 404


def test_the_openapi_document_describes_the_rule(collector: RunningCollector) -> None:
    with collector.client() as anyone:
        document = anyone.get("/openapi.json").json()
    assert "#/$defs/" not in json.dumps(document), "every reference resolves in the document"
    schemas = document["components"]["schemas"]
    body = document["paths"]["/v1/metrics"]["post"]["requestBody"]["content"]
    events = body["application/json"]["schema"]["properties"]["events"]
    assert "ONE report per window" in events["description"]
    rule = next(option for option in events["anyOf"] if option.get("type") == "object")
    assert set(rule["properties"]) == {"aggregate", "window", "report_empty"}
    assert "rolling" in rule["properties"]["window"]["description"]
    assert (
        "ONE report per window" in schemas["MetricSpecOut"]["properties"]["events"]["description"]
    )
    assert "counted" in schemas["EventRangeEstimate"]["properties"]


@dataclass(frozen=True)
class Seeded:
    server: RunningCollector
    actives: MetricSpec
    crashes: MetricSpec
    recorded: MetricSpec


@pytest.fixture(scope="module")
def seeded(databases: DatabaseFactory) -> Iterator[Seeded]:
    """A collector with an ``any`` metric over 7 rolling days broken down by platform, a
    numeric ``count`` per calendar day, and the same boolean of recorded values; each day of
    :data:`DAYS` has :data:`ACTIVE` reports of each, :data:`WITH_EVENT` true."""
    with viewer_collector(databases.new("sqlite")) as server:
        with server.client(ADMIN_TOKEN) as admin:
            actives = register(
                admin,
                MetricSpec.boolean(
                    "ev_actives", epsilon=1.0, dimensions={"platform": ["ios", "web"]}
                ).with_events("any", window=7),
            )
            crashes = register(
                admin,
                MetricSpec.numeric("ev_crashes", lower=0, upper=10, epsilon=1.0).with_events(
                    "count"
                ),
            )
            recorded = register(admin, MetricSpec.boolean("ev_recorded", epsilon=1.0))
        values = [1] * WITH_EVENT + [0] * (ACTIVE - WITH_EVENT)
        with server.client(INGEST_KEY) as device:
            for i, day in enumerate(DAYS):
                batch = make_reports(actives, values, day, i)
                for j, report in enumerate(batch):
                    report["dims"] = {"platform": "ios" if j % 2 else "web"}
                batch += make_reports(recorded, values, day, 10 + i)
                batch += make_numeric_reports(crashes, [j % 3 for j in range(ACTIVE)], day, 20 + i)
                for start in range(0, len(batch), 1000):
                    chunk = {"reports": batch[start : start + 1000]}
                    answer = device.post("/v1/reports", json=chunk)
                    assert answer.status_code == 202, answer.text
        yield Seeded(server, actives, crashes, recorded)


def estimate(seeded: Seeded, name: str, **params: str) -> dict:
    with seeded.server.client(VIEWER_TOKEN) as client:
        answer = client.get(f"/v1/metrics/{name}/estimate", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_one_window_of_an_any_metric_counts_devices_and_those_with_the_event(
    seeded: Seeded,
) -> None:
    day = DAYS[-1]
    document = estimate(seeded, seeded.actives.name, start=day, end=day)
    assert (document["counted"], document["n"], document["active_devices"]) == (
        "devices",
        ACTIVE,
        ACTIVE,
    )
    true = next(r for r in document["estimates"] if r["category"] == "true")
    found = document["devices_with_event"]
    assert found["estimate"] == pytest.approx(ACTIVE * true["frequency"])
    assert (found["low"], found["high"]) == pytest.approx(
        (ACTIVE * true["ci_low"], ACTIVE * true["ci_high"])
    )
    assert found["low"] <= WITH_EVENT <= found["high"], "the truth within its interval (seeded)"
    both = estimate(seeded, seeded.actives.name, start=DAYS[0], end=DAYS[-1])
    assert (both["counted"], both["n"]) == ("reports", 2 * ACTIVE)
    assert "active_devices" not in both and "devices_with_event" not in both
    crashes = estimate(seeded, seeded.crashes.name, start=day, end=day)
    assert crashes["counted"] == "devices" and "active_devices" not in crashes
    recorded = estimate(seeded, seeded.recorded.name, start=day, end=day)
    assert "counted" not in recorded, "a metric of recorded values' document is unchanged"
    added = {"counted", "active_devices", "devices_with_event"}
    assert set(document) == set(recorded) | added, "any boolean's shape, plus the counts"


def test_a_series_says_what_each_point_counts(seeded: Seeded) -> None:
    with seeded.server.client(VIEWER_TOKEN) as client:
        actives = client.get(f"/v1/metrics/{seeded.actives.name}/series").json()
        crashes = client.get(f"/v1/metrics/{seeded.crashes.name}/series").json()
        recorded = client.get(f"/v1/metrics/{seeded.recorded.name}/series").json()
    assert actives["counted"] == crashes["counted"] == "devices", "each point is one window"
    assert "counted" not in recorded
    assert [p["n"] for p in actives["series"] if p["period"] in DAYS] == [ACTIVE, ACTIVE]


def test_a_breakdown_of_an_event_metric_by_dimension(seeded: Seeded) -> None:
    day = DAYS[-1]
    document = estimate(seeded, seeded.actives.name, start=day, end=day, by="platform")
    slices = {s["values"]["platform"]: s["estimate"] for s in document["slices"]}
    assert slices["other"] is None or slices["other"]["n"] == 0
    assert slices["ios"]["n"] + slices["web"]["n"] == ACTIVE
    for value in ("ios", "web"):
        one = slices[value]
        assert (one["counted"], one["active_devices"]) == ("devices", one["n"])
        true = next(r for r in one["estimates"] if r["category"] == "true")
        assert true["ci_low"] <= WITH_EVENT / ACTIVE <= true["ci_high"]
        found = one["devices_with_event"]
        assert found["low"] <= WITH_EVENT / 2 <= found["high"]
    wide = estimate(seeded, seeded.actives.name, start=DAYS[0], end=day, by="platform")
    assert {s["estimate"]["counted"] for s in wide["slices"] if s["estimate"]} == {"reports"}


def test_the_dashboard_says_devices_for_one_window_and_reports_for_more(seeded: Seeded) -> None:
    with signed_in(seeded.server) as browser:
        day = DAYS[-1]
        page = browser.get(
            f"/dashboard/metrics/{seeded.actives.name}", params={"start": day, "end": day}
        )
        assert page.status_code == 200, page.text
        assert f"n = {ACTIVE:,} devices" in page.text
        assert "events: any per device, rolling 7 days" in page.text
        assert 'id="devices-note"' in page.text and f"of {ACTIVE:,} active devices" in page.text
        wide = browser.get(
            f"/dashboard/metrics/{seeded.actives.name}", params={"start": DAYS[0], "end": day}
        )
        assert f"n = {2 * ACTIVE:,} reports" in wide.text and "devices-note" not in wide.text
        mean = browser.get(
            f"/dashboard/metrics/{seeded.crashes.name}", params={"start": day, "end": day}
        )
        assert f"n = {ACTIVE:,} devices" in mean.text
        assert "events: count per device, calendar day" in mean.text
        recorded = browser.get(
            f"/dashboard/metrics/{seeded.recorded.name}", params={"start": day, "end": day}
        )
        assert f"n = {ACTIVE:,} reports ·" in recorded.text
        assert f"{ACTIVE:,} devices" not in recorded.text  # (the pooling help names devices)
        assert "devices-note" not in recorded.text
        sliced = browser.get(
            f"/dashboard/metrics/{seeded.actives.name}/breakdown",
            params={"start": day, "end": day, "by": "platform"},
        )
        assert sliced.status_code == 200, sliced.text
        assert " devices</title>" in sliced.text and " reports</title>" not in sliced.text
        overview = browser.get("/dashboard/")
        assert overview.status_code == 200
        assert f"{ACTIVE:,} devices" in overview.text


def test_the_csvs_count_devices_for_one_window_and_reports_for_more(seeded: Seeded) -> None:
    """The CSV columns say what they count (issue 41): ``devices`` and ``estimated_devices``
    where one window's reports are one per active device, ``reports`` and
    ``estimated_reports`` over more windows and for a metric of recorded values."""
    day, name = DAYS[-1], seeded.actives.name
    one = {"start": day, "end": day}
    with signed_in(seeded.server) as browser:

        def rows(path: str, **params: str) -> list[dict[str, str]]:
            answer = browser.get(f"/dashboard/metrics/{path}", params=params)
            assert answer.status_code == 200, answer.text
            return list(csv.DictReader(io.StringIO(answer.text)))

        devices = rows(f"{name}/estimate.csv", **one)
        sliced = rows(f"{name}/breakdown.csv", by="platform", **one)
        series = rows(f"{name}/series.csv", start=DAYS[0], end=day)
        pooled = rows(f"{name}/estimate.csv", start=DAYS[0], end=day)
        recorded = rows(f"{seeded.recorded.name}/estimate.csv", **one)
        crashes = rows(f"{seeded.crashes.name}/estimate.csv", **one)
    true = next(row for row in devices if row["category"] == "true")
    assert int(true["devices"]) == ACTIVE and "reports" not in true and "n" not in true
    assert float(true["estimated_devices"]) == pytest.approx(ACTIVE * float(true["frequency"]))
    assert all("devices" in row and "estimated_devices" in row for row in sliced)
    assert [int(row["devices"]) for row in series if row["category"] == "true"] == [ACTIVE] * 2
    for each in (pooled, recorded):
        assert "reports" in each[0] and "estimated_reports" in each[0] and "devices" not in each[0]
    assert int(pooled[0]["reports"]) == 2 * ACTIVE and "estimated_count" not in pooled[0]
    assert int(crashes[0]["devices"]) == ACTIVE and "mean" in crashes[0]


def test_the_scrape_adds_active_devices_of_event_metrics_only(seeded: Seeded) -> None:
    with seeded.server.client(VIEWER_TOKEN) as client:
        text = client.get("/v1/estimates/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    closed = (TODAY - dt.timedelta(days=1)).isoformat()
    for spec in (seeded.actives, seeded.crashes):
        key = ("deniable_estimate_active_devices", (("metric", spec.name), ("period", closed)))
        assert samples[key] == ACTIVE
        assert samples[("deniable_estimate_reports", (("metric", spec.name),))] == 2 * ACTIVE
    assert not any(
        name == "deniable_estimate_active_devices" and ("metric", seeded.recorded.name) in labels
        for name, labels in samples
    )
