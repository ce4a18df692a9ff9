"""``GET /v1/privacy`` and the registration warnings, against a real collector (uvicorn on
loopback, real HTTP) with its own database, so the registry is exactly what the tests put in.

Every expected document is :func:`deniable.estimators.privacy.privacy_document` of the specs
the collector serves, so the route is checked to add, drop or change nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import httpx
import pytest

from deniable.client import (
    WARNING_LEVEL_30_DAYS,
    DeviceSettings,
    MetricSpec,
    privacy_account,
)
from deniable.estimators.privacy import privacy_document
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    register,
    signed_in,
)

SPECS = (
    MetricSpec.boolean("dark_mode", epsilon=0.25),
    MetricSpec.categorical("browser", ["chrome", "safari", "other"], epsilon=0.5, period="week"),
    MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=0.25),
    MetricSpec.histogram("load_hist", [0, 100, 250, 500], epsilon=0.5, period="month"),
)
"""Together below the warning level with the SDK defaults (the first test checks it)."""


def start(databases: DatabaseFactory) -> RunningCollector:
    """A collector on a fresh SQLite database, with admin, viewer and ingest tokens."""
    settings = collector_settings(databases.new("sqlite"), viewer_token=VIEWER_TOKEN)
    return RunningCollector(settings).start()


@pytest.fixture(scope="module")
def server(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector holding SPECS, plus one archived metric."""
    running = start(databases)
    with running.client(ADMIN_TOKEN) as admin:
        for spec in SPECS:
            register(admin, spec)
        register(admin, MetricSpec.boolean("retired", epsilon=2.0))
        assert admin.post("/v1/metrics/retired/archive").status_code == 200
    yield running
    running.stop()


def served_specs(server: RunningCollector) -> list[MetricSpec]:
    """The specs the collector serves devices (archived ones left out)."""
    with server.client() as anyone:
        return [MetricSpec.from_dict(m) for m in anyone.get("/v1/metrics").json()["metrics"]]


def as_json(document: Any) -> Any:
    """A document's dataclass as the API's JSON answers it."""
    return json.loads(json.dumps(asdict(document)))


def test_the_fixture_registry_is_below_the_warning_level() -> None:
    assert privacy_account(SPECS).totals.per_30_days <= WARNING_LEVEL_30_DAYS


@pytest.mark.parametrize("token", [VIEWER_TOKEN, ADMIN_TOKEN])
def test_the_viewer_and_the_admin_read_the_account(server: RunningCollector, token: str) -> None:
    with server.client(token) as reader:
        response = reader.get("/v1/privacy")
    assert response.status_code == 200, response.text
    assert response.json() == as_json(privacy_document(served_specs(server)))


@pytest.mark.parametrize("token", [INGEST_KEY, None, "not-a-token-of-this-collector"])
def test_others_get_401(server: RunningCollector, token: str | None) -> None:
    with server.client(token) as caller:
        response = caller.get("/v1/privacy", params={"max_reports_per_period": "nonsense"})
    assert response.status_code == 401
    assert "nonsense" not in response.text


@pytest.mark.parametrize(
    ("query", "settings"),
    [
        ({}, DeviceSettings()),
        ({"max_reports_per_period": 3}, DeviceSettings(max_reports_per_period=3)),
        ({"memoize": "true"}, DeviceSettings(memoize=True)),
        ({"memoize": "false"}, DeviceSettings()),
        (
            {"memoize": "load_hist, browser"},
            DeviceSettings(memoize=frozenset({"browser", "load_hist"})),
        ),
        ({"lifetime_epsilon": 2.5}, DeviceSettings(lifetime_epsilon=2.5)),
        (
            {"max_reports_per_period": 2, "memoize": "TRUE", "lifetime_epsilon": 0.3},
            DeviceSettings(max_reports_per_period=2, memoize=True, lifetime_epsilon=0.3),
        ),
        (
            {"memoize": "true", "instantaneous_ratio": "None"},
            DeviceSettings(memoize=True, instantaneous_ratio=None),
        ),
        (
            {"memoize": "true", "instantaneous_ratio": "3.5"},
            DeviceSettings(memoize=True, instantaneous_ratio=3.5),
        ),
    ],
)
def test_the_document_is_the_builders_for_the_settings_asked(
    server: RunningCollector, query: dict[str, Any], settings: DeviceSettings
) -> None:
    with server.client(VIEWER_TOKEN) as viewer:
        response = viewer.get("/v1/privacy", params=query)
    assert response.status_code == 200, response.text
    document = response.json()
    assert document == as_json(privacy_document(served_specs(server), settings))
    assert document["settings"]["sdk_defaults"] == (settings == DeviceSettings())


def test_archived_metrics_are_not_in_the_account(server: RunningCollector) -> None:
    with server.client(VIEWER_TOKEN) as viewer:
        document = viewer.get("/v1/privacy").json()
    assert sorted(m["metric"] for m in document["metrics"]) == sorted(s.name for s in SPECS)
    with server.client(VIEWER_TOKEN) as viewer:
        refused = viewer.get("/v1/privacy", params={"memoize": "retired"})
    assert refused.status_code == 422 and "retired" in refused.json()["detail"]


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ({"max_reports_per_period": 0}, "max_reports_per_period"),
        ({"max_reports_per_period": "x"}, "max_reports_per_period"),
        ({"max_reports_per_period": 10**7}, "max_reports_per_period"),
        ({"lifetime_epsilon": 0}, "lifetime_epsilon"),
        ({"lifetime_epsilon": "nan"}, "lifetime_epsilon"),
        ({"lifetime_epsilon": "inf"}, "lifetime_epsilon"),
        ({"memoize": "yes please"}, "memoize"),
        ({"memoize": "browser,"}, "memoize"),
        ({"memoize": "no_such_metric"}, "memoize"),
        ({"instantaneous_ratio": "1"}, "instantaneous_ratio"),
        ({"instantaneous_ratio": "nan"}, "instantaneous_ratio"),
        ({"instantaneous_ratio": "off"}, "instantaneous_ratio"),
        ({"instantaneous_ratio": "x" * 33}, "instantaneous_ratio"),
    ],
)
def test_bad_values_are_422_naming_the_parameter(
    server: RunningCollector, query: dict[str, Any], names: str
) -> None:
    with server.client(VIEWER_TOKEN) as viewer:
        response = viewer.get("/v1/privacy", params=query)
    assert response.status_code == 422, response.text
    assert names in json.dumps(response.json()["detail"])


class Captured(logging.Handler):
    """Keeps the collector's log records."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_registration_warns_once_a_device_passes_the_level(databases: DatabaseFactory) -> None:
    """Below the level the answer's warnings are empty; the registration that takes the 30-day
    total with the SDK defaults past the level is warned with its figure, in the answer and in
    a WARNING log line; registering the same spec again is not (it changes no total)."""
    server = start(databases)
    captured = Captured()
    logger = logging.getLogger("deniable.collector")
    logger.addHandler(captured)
    try:
        with server.client(ADMIN_TOKEN) as admin:
            registered: list[MetricSpec] = []
            for spec in SPECS:
                answer = admin.post("/v1/metrics", json=spec.fingerprint_fields())
                assert answer.status_code == 201 and answer.json()["warnings"] == []
                registered.append(spec)
            assert not captured.records
            heavy = MetricSpec.categorical("country", ["a", "b", "c", "d"], epsilon=4.0)
            total = privacy_account([*registered, heavy]).totals.per_30_days
            assert total > WARNING_LEVEL_30_DAYS
            answer = admin.post("/v1/metrics", json=heavy.fingerprint_fields())
            assert answer.status_code == 201
            warnings = answer.json()["warnings"]
            assert len(warnings) == 1
            assert f"ε {total:g} over 30 days" in warnings[0]
            assert f"level of {WARNING_LEVEL_30_DAYS:g}" in warnings[0]
            assert "lifetime_epsilon" in warnings[0]
            again = admin.post("/v1/metrics", json=heavy.fingerprint_fields())
            assert again.status_code == 200 and again.json()["warnings"] == []
            assert [r.getMessage() for r in captured.records] == [
                f"metric country registered: {warnings[0]}"
            ]
            assert [r.levelno for r in captured.records] == [logging.WARNING]
    finally:
        logger.removeHandler(captured)
        server.stop()


def test_the_registration_answer_still_reads_as_a_spec(server: RunningCollector) -> None:
    """Clients of the answer read it as a spec (MetricSpec.from_dict ignores ``warnings``)."""
    with server.client(ADMIN_TOKEN) as admin:
        answer = admin.post("/v1/metrics", json=SPECS[0].fingerprint_fields())
    assert answer.status_code == 200
    assert MetricSpec.from_dict(answer.json()) == SPECS[0]
    assert isinstance(answer.json()["warnings"], list)


def test_the_openapi_document_describes_the_route(server: RunningCollector) -> None:
    with httpx.Client(base_url=server.url) as anyone:
        openapi = anyone.get("/openapi.json").json()
    paths, schemas = openapi["paths"], openapi["components"]["schemas"]
    parameters = {p["name"] for p in paths["/v1/privacy"]["get"]["parameters"]}
    assert parameters == {
        "max_reports_per_period",
        "memoize",
        "lifetime_epsilon",
        "instantaneous_ratio",
        "shuffle_batch",
        "shuffle_delta",
    }
    registered = paths["/v1/metrics"]["post"]["responses"]["201"]["content"]["application/json"]
    name = registered["schema"]["$ref"].rsplit("/", 1)[-1]
    assert "warnings" in schemas[name]["required"]


def test_without_a_shuffler_the_account_says_there_are_no_shuffled_batches(
    server: RunningCollector,
) -> None:
    with server.client(VIEWER_TOKEN) as viewer:
        document = viewer.get("/v1/privacy").json()
    assert document["shuffled"]["source"] == "none"
    assert document["shuffled"]["batches"] == []
    assert "No shuffled batches" in document["shuffled"]["statement"]
    assert "shuffler" not in document["statement"]


def test_an_assumed_batch_size_gives_each_metric_its_central_guarantee(
    server: RunningCollector,
) -> None:
    """Each metric's row is the accountant's bound for its own mechanism, and the statement
    says which guarantee holds against whom."""
    from deniable.estimators.shuffling import central_guarantee

    specs = served_specs(server)
    with server.client(VIEWER_TOKEN) as viewer:
        response = viewer.get(
            "/v1/privacy", params={"shuffle_batch": 50_000, "shuffle_delta": 1e-7}
        )
    assert response.status_code == 200, response.text
    shuffled = response.json()["shuffled"]
    assert shuffled["source"] == "assumed"
    rows = {row["metric"]: row for row in shuffled["batches"]}
    assert set(rows) == {spec.name for spec in specs}
    for spec in specs:
        mechanism = spec.numeric_randomizer if spec.type == "numeric" else spec.randomizer
        expected = central_guarantee(mechanism, 50_000, 1e-7)
        row = rows[spec.name]
        assert (row["n"], row["delta"], row["local_epsilon"]) == (50_000, 1e-7, spec.epsilon)
        assert row["central_epsilon"] == expected.epsilon and row["bound"] == expected.bound
    assert rows["dark_mode"]["bound"] == "strong-clone"
    assert rows["load_ms"]["bound"] == "fmt21-numerical"
    statement = response.json()["statement"]
    assert "against an analyst who sees only the released batches" in statement
    assert "Against the shuffler itself, or the shuffler and the collector together" in statement
    assert "n − 1 fake reports" in statement
    assert "count toward a batch's n but hide nobody" in statement


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"shuffle_batch": 1}, "shuffle_batch"),
        ({"shuffle_batch": 10**6 + 1}, "shuffle_batch"),
        ({"shuffle_batch": "1e5"}, "shuffle_batch"),
        ({"shuffle_batch": 1000, "shuffle_delta": 0.5}, "shuffle_delta"),
        ({"shuffle_batch": 1000, "shuffle_delta": "nan"}, "shuffle_delta"),
    ],
)
def test_a_bad_shuffle_query_is_a_422_naming_it(
    server: RunningCollector, params: dict, named: str
) -> None:
    with server.client(VIEWER_TOKEN) as viewer:
        response = viewer.get("/v1/privacy", params=params)
    assert response.status_code == 422
    assert named in response.text


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_many_released_batches_give_a_bounded_account(
    databases: DatabaseFactory, backend: str
) -> None:
    """Thousands of stored batches: the account lists only the most recent LISTED_BATCHES,
    counts all of them, and each metric's weakest is its smallest batch's bound (eps being
    non-increasing in n, it holds for every batch); shuffle_batch still replaces them."""
    import datetime as dt

    from deniable.collector.storage import open_database
    from deniable.collector.storage.shuffled import record_batch, record_part
    from deniable.estimators.shuffling import central_guarantee
    from deniable.estimators.shufflingaccount import LISTED_BATCHES, ShuffledBatch

    settings = collector_settings(databases.new(backend), viewer_token=VIEWER_TOKEN)
    running = RunningCollector(settings).start()
    spec = SPECS[1]
    with running.client(ADMIN_TOKEN) as admin:
        register(admin, spec)
    total = 1_200
    start_time = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    database = open_database(running.settings.database_url)
    try:
        for i in range(total):
            size = 1_000 + (i * 7919) % 5_000  # distinct sizes, smallest (1,000) first
            record_batch(
                database,
                ShuffledBatch(
                    metric=spec.name,
                    mechanism=spec.mechanism,
                    epsilon=spec.epsilon,
                    n=0,
                    batch=f"b{i:05d}",
                    fingerprint="f" * 16,
                    released_at=start_time + dt.timedelta(minutes=i),
                    declared=size,
                ),
                parts=1,
            )
            record_part(database, f"b{i:05d}", 0, 0, size)
    finally:
        database.dispose()
    try:
        with running.client(VIEWER_TOKEN) as viewer:
            shuffled = viewer.get("/v1/privacy").json()["shuffled"]
            assumed = viewer.get("/v1/privacy", params={"shuffle_batch": 100}).json()["shuffled"]
        with signed_in(running) as browser:
            page = browser.get("/dashboard/privacy").text
    finally:
        running.stop()
    assert shuffled["source"] == "released" and shuffled["batch_count"] == total
    assert [row["batch"] for row in shuffled["batches"]] == [
        f"b{i:05d}" for i in range(total - LISTED_BATCHES, total)
    ]
    for row in shuffled["batches"]:
        expected = central_guarantee(spec.randomizer, row["n"], row["delta"])
        assert row["central_epsilon"] == expected.epsilon
    (weakest,) = shuffled["metrics"]
    assert (weakest["batches"], weakest["smallest_batch"]) == (total, 1_000)
    assert weakest["central_epsilon"] == central_guarantee(spec.randomizer, 1_000).epsilon
    assert all(row["central_epsilon"] <= weakest["central_epsilon"] for row in shuffled["batches"])
    assert assumed["source"] == "assumed" and [r["n"] for r in assumed["batches"]] == [100]
    assert '<table id="shuffled"' in page and '<p id="shuffled-weakest"' in page
    listed = page.split('<table id="shuffled"', 1)[1].split("</table>", 1)[0]
    assert listed.count('<tr data-metric="browser">') == LISTED_BATCHES
    assert f"The {LISTED_BATCHES:,} most recent of {total:,} released batches are listed" in page
    assert f"({total:,} batches, the smallest of 1,000 devices)" in page
