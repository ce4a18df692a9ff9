"""A metric's unit, description and owner: stored beside its spec (never in its fingerprint),
answered by every API document of the metric, changed by registering the identical spec
again, refused at the edge when too long or not plain text, and added by migration 0006 to
databases that hold metrics already. Over real HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, inspect

from deniable.client import MetricSpec
from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.queries import load_about, load_registration, register_spec
from deniable.estimators.documents import MetricAbout
from testkit import DatabaseFactory, RunningCollector, unique_name
from tests.collector.test_migrations import _downgrade, assert_schema_is_the_tables

ABOUT = {"unit": "ms", "description": "Time to first paint of the home page", "owner": "web-perf"}


def numeric_body(name: str, **about: Any) -> dict[str, Any]:
    return {"name": name, "type": "numeric", "lower": 0, "upper": 5000, "epsilon": 1.0, **about}


def histogram_body(name: str, **about: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": "histogram",
        "edges": [0, 100, 250, 1000],
        "epsilon": 1.0,
        **about,
    }


def test_the_description_is_stored_beside_the_spec_and_in_every_document(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    name = unique_name("paint_ms")
    answer = admin.post("/v1/metrics", json=numeric_body(name, **ABOUT))
    assert answer.status_code == 201, answer.text
    assert {key: answer.json()[key] for key in ABOUT} == ABOUT
    bare = MetricSpec.numeric(name, lower=0, upper=5000, epsilon=1.0)
    assert answer.json()["fingerprint"] == bare.fingerprint, "the description is not in the spec"

    shown = admin.get(f"/v1/metrics/{name}").json()
    assert {key: shown[key] for key in ABOUT} == ABOUT
    described = admin.get("/v1/metrics", params={"describe": "true"}).json()["metrics"]
    listed = next(m for m in described if m["name"] == name)
    assert {key: listed[key] for key in ABOUT} == ABOUT
    served = next(m for m in admin.get("/v1/metrics").json()["metrics"] if m["name"] == name)
    assert served == bare.to_dict(), "devices fetch the specs alone"
    for path in ("estimate", "series"):
        document = admin.get(f"/v1/metrics/{name}/{path}").json()
        assert {key: document[key] for key in ABOUT} == ABOUT, path

    hist = unique_name("size_kb")
    assert admin.post("/v1/metrics", json=histogram_body(hist, unit="KB")).status_code == 201
    document = admin.get(f"/v1/metrics/{hist}/estimate").json()
    assert (document["unit"], document["description"], document["owner"]) == ("KB", None, None)
    assert "unit" not in admin.get(f"/v1/metrics/{hist}/estimate").json()["quantiles"][0]


def test_describing_again_keeps_the_fingerprint_and_what_devices_fetch(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    name = unique_name("temp_c")
    first = admin.post("/v1/metrics", json=numeric_body(name, unit="°C"))
    assert first.status_code == 201, first.text
    describe = {"describe": "true"}
    before = admin.get("/v1/metrics", params=describe)
    devices = admin.get("/v1/metrics")
    assert before.headers["ETag"] != devices.headers["ETag"]
    again = admin.post("/v1/metrics", json=numeric_body(name, unit="°F", owner="hardware"))
    assert again.status_code == 200, again.text
    assert again.json()["fingerprint"] == first.json()["fingerprint"]
    shown = admin.get(f"/v1/metrics/{name}").json()
    assert (shown["unit"], shown["owner"], shown.get("description")) == ("°F", "hardware", None)
    unchanged = admin.get("/v1/metrics", headers={"If-None-Match": devices.headers["ETag"]})
    assert unchanged.status_code == 304, "devices have nothing new to fetch"
    tag = {"If-None-Match": before.headers["ETag"]}
    after = admin.get("/v1/metrics", params=describe, headers=tag)
    assert after.status_code == 200, "a new description is a new described list"
    listed = next(m for m in after.json()["metrics"] if m["name"] == name)
    assert listed["unit"] == "°F"
    document = admin.get(f"/v1/metrics/{name}/estimate").json()
    assert document["unit"] == "°F"


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        (numeric_body("x", unit="milliseconds per request"), "unit", "at most 16 characters"),
        (numeric_body("x", unit="m\x1b[2Js"), "unit", "control characters"),
        (numeric_body("x", description="line one\nline two"), "description", "control"),
        (numeric_body("x", description="d" * 501), "description", "at most 500 characters"),
        (numeric_body("x", owner="\u2028"), "owner", "control characters"),
        (numeric_body("x", owner="   "), "owner", "blank"),
        (numeric_body("x", owner=7), "owner", "string"),
        ({"name": "x", "type": "boolean", "epsilon": 1.0, "unit": "ms"}, "unit", "only numeric"),
    ],
)
def test_a_bad_description_is_refused_naming_its_field_and_nothing_is_stored(
    collector: RunningCollector, admin: httpx.Client, body: dict[str, Any], field: str, says: str
) -> None:
    name = unique_name("refused")
    answer = admin.post("/v1/metrics", json={**body, "name": name})
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith(f"{field}:") and says in detail, detail
    assert "\x1b" not in answer.text and "line two" not in answer.text
    assert admin.get(f"/v1/metrics/{name}").status_code == 404
    fine = {key: value for key, value in body.items() if key not in ABOUT}
    assert admin.post("/v1/metrics", json={**fine, "name": name}).status_code == 201


def test_migration_0006_adds_the_columns_to_a_registry_and_drops_them_again(
    databases: DatabaseFactory, backend: str
) -> None:
    """A 0005 database's metrics upgrade undescribed, take a description, and keep their spec
    through the downgrade (which drops the three columns)."""
    url = databases.new(backend)
    migrate(url, "0005")
    spec = MetricSpec.numeric("kept_through_0006", lower=0, upper=10, epsilon=1.0)
    now = dt.datetime.now(dt.UTC)
    database = open_database(url)
    try:
        register_spec(database, spec, now)
    finally:
        database.dispose()
    migrate(url)
    assert_schema_is_the_tables(url)
    database = open_database(url)
    try:
        assert load_about(database, spec.name).as_dict() == dict.fromkeys(ABOUT)
        assert not register_spec(database, spec, now, MetricAbout(**ABOUT))
        assert load_about(database, spec.name) == MetricAbout(**ABOUT)
        registration = load_registration(database, spec.name)
        assert registration is not None and registration.fingerprint == spec.fingerprint
    finally:
        database.dispose()
    _downgrade(url, "0005")
    engine = create_engine(normalize_url(url))
    try:
        columns = {c["name"] for c in inspect(engine).get_columns("metrics")}
    finally:
        engine.dispose()
    assert columns.isdisjoint(ABOUT) and {"name", "spec", "fingerprint"} <= columns
    migrate(url)
    assert_schema_is_the_tables(url)


def test_every_estimate_model_in_the_openapi_schema_declares_the_description(
    tmp_path: Any,
) -> None:
    """Every answer of the estimate and series routes carries ``unit``, ``description`` and
    ``owner`` (DESIGN.md, "Metric descriptions"), so each model the OpenAPI schema gives them
    declares those fields as :class:`MetricAbout` does: the by-slice ones (breakdown,
    comparison, series by slice) at their end, where their answers carry them."""
    from deniable.collector import create_app
    from deniable.collector.queries.breakdown import BreakdownEstimate
    from deniable.collector.queries.changes import PeriodComparison
    from deniable.collector.queries.slices import SliceSeries
    from testkit import collector_settings

    app = create_app(collector_settings(f"sqlite:///{tmp_path}/about.db"))
    paths = app.openapi()["paths"]
    schemas = app.openapi()["components"]["schemas"]
    described = list(MetricAbout().as_dict())
    for path in ("/v1/metrics/{name}/estimate", "/v1/metrics/{name}/series"):
        answer = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        models = [ref["$ref"].rsplit("/", 1)[1] for ref in answer["anyOf"]]
        assert len(models) >= 4
        for model in models:
            assert set(described) <= set(schemas[model]["properties"]), (path, model)
    about_fields = [(f.name, f.type, f.default) for f in dataclasses.fields(MetricAbout)]
    for model in (BreakdownEstimate, PeriodComparison, SliceSeries):
        last = [(f.name, f.type, f.default) for f in dataclasses.fields(model)][-3:]
        assert last == about_fields, model
