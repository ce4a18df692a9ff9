"""The database changes underneath a running collector: its cached specs must never win.

Issue 12 item 4. A collector caches specs (they never change while registered), but the
database can be dropped and migrated again, and a metric registered again with another spec.
Then a report made under the old spec, or for a metric that is gone, must be refused (422)
and nothing of it stored; estimates and served specs follow the database; and while the
schema is missing every route answers 503, never 500. Each test runs its own collector on a
fresh database of each backend, and changes the schema underneath with plain SQL.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text

from deniable.client import MetricSpec
from deniable.client.spec import canonical_json
from deniable.collector.storage import migrate, open_database
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import register_spec
from deniable.collector.storage.tables import metadata
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from testkit import (
    ADMIN_TOKEN,
    RunningCollector,
    collector_settings,
    make_reports,
    post_reports,
    register,
    unique_name,
)

TODAY = "2026-11-21"
TABLES = (*(table.name for table in reversed(metadata.sorted_tables)), "alembic_version")
"""Every table of the schema (the collector's ``tables``) and Alembic's version table."""


@pytest.fixture
def server(databases: Any, backend: str) -> Iterator[RunningCollector]:
    """A collector of its own on a fresh database (the tests drop its tables)."""
    running = RunningCollector(collector_settings(databases.new(backend))).start()
    yield running
    running.stop()


@pytest.fixture
def admin(server: RunningCollector) -> Iterator[httpx.Client]:
    """An admin client of ``server`` (the admin token may upload too)."""
    with server.client(ADMIN_TOKEN) as client:
        yield client


def drop_schema(database_url: str) -> None:
    """Drop every table of the collector's schema, as a dropped and recreated database has none."""
    engine = create_engine(normalize_url(database_url))
    try:
        with engine.begin() as connection:
            for table in TABLES:
                connection.execute(text(f"DROP TABLE IF EXISTS {table}"))
    finally:
        engine.dispose()


def recreate(database_url: str) -> None:
    """Drop the schema and migrate again: an empty registry under the running collector."""
    drop_schema(database_url)
    migrate(database_url)


def categorical(name: str, categories: list[str], epsilon: float = 1.0) -> MetricSpec:
    return MetricSpec.categorical(name, categories, epsilon=epsilon, mechanism="krr")


def report(spec: MetricSpec, payload: Any) -> dict[str, Any]:
    """One report of ``spec`` with exactly this payload."""
    return {
        "id": str(uuid.uuid4()),
        "metric": spec.name,
        "fingerprint": spec.fingerprint,
        "period": TODAY,
        "payload": payload,
    }


def exported_ids(client: httpx.Client, name: str) -> list[str]:
    response = client.get(f"/v1/admin/metrics/{name}/reports")
    assert response.status_code == 200, response.text
    return [row["id"] for row in response.json()["reports"]]


def estimate(client: httpx.Client, name: str) -> dict[str, Any]:
    response = client.get(f"/v1/metrics/{name}/estimate", params={"start": TODAY, "end": TODAY})
    assert response.status_code == 200, response.text
    return response.json()


# --- ingestion refuses what the database's current registry refuses ---------------------------


def test_reports_under_a_replaced_or_vanished_spec_are_422_and_not_stored(
    server: RunningCollector, admin: httpx.Client
) -> None:
    old = register(admin, categorical(unique_name("re"), ["a", "b", "c"]))
    gone = register(admin, MetricSpec.boolean(unique_name("gone"), epsilon=1.0))
    assert post_reports(admin, [report(old, 0), report(gone, 1)]).status_code == 202
    assert estimate(admin, old.name)["n"] == 1  # both specs are cached now

    recreate(server.settings.database_url)
    new = register(admin, categorical(old.name, ["a", "b"]))
    assert new.fingerprint != old.fingerprint

    stale = post_reports(admin, [report(new, 1), report(old, 2)])
    assert stale.status_code == 422, stale.text
    [problem] = stale.json()["detail"]
    assert problem["index"] == 1 and "fingerprint" in problem["reason"]

    vanished = post_reports(admin, [report(gone, 1)])
    assert vanished.status_code == 422, vanished.text
    assert vanished.json()["detail"] == [
        {"index": 0, "reason": f"metric {gone.name!r} is not registered"}
    ]

    assert exported_ids(admin, new.name) == []
    assert estimate(admin, new.name)["n"] == 0
    register(admin, gone)
    assert exported_ids(admin, gone.name) == []


def test_a_stale_report_in_a_group_commit_fails_alone(
    server: RunningCollector, admin: httpx.Client
) -> None:
    """Concurrent batches may share one transaction: only the stale one is refused."""
    old = register(admin, categorical(unique_name("grp"), ["a", "b", "c"]))
    other = register(admin, categorical(unique_name("ok"), ["a", "b", "c"]))
    assert post_reports(admin, [report(old, 0)]).status_code == 202
    recreate(server.settings.database_url)
    register(admin, categorical(old.name, ["a", "b"]))
    other = register(admin, other)
    good = [make_reports(other, [0, 1, 2] * 50, TODAY, seed) for seed in range(8)]
    results: dict[int, int] = {}

    def upload(i: int, batch: list[dict[str, Any]]) -> None:
        with server.client(ADMIN_TOKEN) as client:
            results[i] = post_reports(client, batch).status_code

    batches = [*good, [report(old, 2)]]
    threads = [threading.Thread(target=upload, args=item) for item in enumerate(batches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {**{i: 202 for i in range(8)}, 8: 422}
    assert estimate(admin, other.name)["n"] == 8 * 150
    assert exported_ids(admin, old.name) == []


# --- reads follow the database ---------------------------------------------------------------


def test_specs_and_estimates_follow_a_re_registration(
    server: RunningCollector, admin: httpx.Client
) -> None:
    old = register(admin, categorical(unique_name("est"), ["a", "b", "c"]))
    assert post_reports(admin, make_reports(old, [0, 1, 2], TODAY, seed=1)).status_code == 202
    assert admin.get(f"/v1/metrics/{old.name}").json()["fingerprint"] == old.fingerprint
    assert len(estimate(admin, old.name)["estimates"]) == 3

    recreate(server.settings.database_url)
    new = register(admin, categorical(old.name, ["x", "y"], epsilon=2.0))
    reports = make_reports(new, [0, 1, 1, 0, 1], TODAY, seed=2)
    accepted = post_reports(admin, reports)
    assert accepted.status_code == 202, accepted.text

    served = admin.get(f"/v1/metrics/{old.name}")
    assert served.status_code == 200 and served.json()["fingerprint"] == new.fingerprint
    answer = estimate(admin, new.name)
    assert answer["n"] == 5 and answer["epsilon"] == 2.0
    assert [row["category"] for row in answer["estimates"]] == ["x", "y"]
    assert sorted(exported_ids(admin, new.name)) == sorted(r["id"] for r in reports)


def test_an_estimate_from_a_stale_cached_spec_is_made_again_from_the_current_one(
    server: RunningCollector, admin: httpx.Client
) -> None:
    """An estimate starts from the spec as cached, unchecked (queries/estimate.py): the name
    registered again underneath (plain SQL, so the collector's cache still holds the old
    spec), its refusal under the old spec and its counts' fingerprint check both lead to the
    estimate of the current spec, never to an answer of the old one, nor a 503."""
    old = register(admin, MetricSpec.numeric(unique_name("est"), lower=0, upper=10, epsilon=1.0))
    path = f"/v1/metrics/{old.name}/estimate"
    asked = {"start": TODAY, "end": TODAY, "method": "consistent"}
    refused = admin.get(path, params=asked)
    assert refused.status_code == 422 and "unbiased" in refused.text
    assert admin.get(path, params={"start": TODAY, "end": TODAY}).status_code == 200

    recreate(server.settings.database_url)
    new = categorical(old.name, ["x", "y"], epsilon=2.0)
    database = open_database(server.settings.database_url)
    try:
        register_spec(database, new, dt.datetime(2026, 11, 21, tzinfo=dt.UTC))
    finally:
        database.dispose()
    answer = admin.get(path, params=asked)  # refused under the cached numeric spec
    assert answer.status_code == 200, answer.text
    assert [row["category"] for row in answer.json()["estimates"]] == ["x", "y"]

    recreate(server.settings.database_url)
    newer = categorical(old.name, ["p", "q", "r"])
    database = open_database(server.settings.database_url)
    try:
        register_spec(database, newer, dt.datetime(2026, 11, 21, tzinfo=dt.UTC))
    finally:
        database.dispose()
    answer = admin.get(path, params={"start": TODAY, "end": TODAY})  # counts of another spec
    assert answer.status_code == 200, answer.text
    assert [row["category"] for row in answer.json()["estimates"]] == ["p", "q", "r"]


def test_storage_refuses_to_write_or_read_under_a_stale_spec(databases: Any, backend: str) -> None:
    """The write transaction and the count read check the spec themselves (no cache involved)."""
    from deniable.collector.storage.queries import SpecChanged, read_counts

    url = databases.new(backend)
    migrate(url)
    database = open_database(url)
    try:
        now = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
        old = categorical(unique_name("st"), ["a", "b", "c"])
        register_spec(database, old, now)
        database.dispose()
        recreate(url)
        new = categorical(old.name, ["a", "b"])
        register_spec(database, new, now)
        stale = [ValidReport(str(uuid.uuid4()), old.name, TODAY, 2)]
        with pytest.raises(SpecChanged) as refused:
            batch = prepare_batch(stale, {old.name: old}, dt.date(2026, 11, 21))
            store_batches(database, [batch])
        assert refused.value.metrics == [old.name]
        with pytest.raises(SpecChanged):
            read_counts(database, old, [TODAY])
        n, counts = read_counts(database, new, [TODAY])
        assert n.tolist() == [0] and counts.tolist() == [[0, 0]]
    finally:
        database.dispose()


# --- a missing schema is 503 ----------------------------------------------------------------


def test_every_route_answers_503_while_the_schema_is_missing(
    server: RunningCollector, admin: httpx.Client
) -> None:
    spec = register(admin, categorical(unique_name("miss"), ["a", "b", "c"]))
    assert post_reports(admin, [report(spec, 0)]).status_code == 202
    assert estimate(admin, spec.name)["n"] == 1

    drop_schema(server.settings.database_url)
    calls = {
        "list": admin.get("/v1/metrics"),
        "spec": admin.get(f"/v1/metrics/{spec.name}"),
        "register": admin.post(
            "/v1/metrics", json=categorical(unique_name("x"), ["a", "b"]).fingerprint_fields()
        ),
        "estimate": admin.get(f"/v1/metrics/{spec.name}/estimate"),
        "export": admin.get(f"/v1/admin/metrics/{spec.name}/reports"),
        "upload": post_reports(admin, [report(spec, 1)]),
    }
    for route, response in calls.items():
        assert response.status_code == 503, (route, response.status_code, response.text)
        assert "deniable migrate" in response.json()["detail"], route

    migrate(server.settings.database_url)
    assert admin.get("/v1/metrics").json() == {"metrics": []}
    refused = post_reports(admin, [report(spec, 1)])
    assert refused.status_code == 422, refused.text
    assert "not registered" in refused.json()["detail"][0]["reason"]


def test_an_uncached_estimate_answers_503_while_the_schema_is_missing(
    databases: Any, backend: str
) -> None:
    """Read cache off, an estimate's counts are read on the driver's own cursor (its
    version read no longer goes first): the driver's error still says to migrate."""
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url, read_cache_bytes=0)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            spec = register(admin, categorical(unique_name("miss"), ["a", "b", "c"]))
            assert post_reports(admin, [report(spec, 0)]).status_code == 202
            assert estimate(admin, spec.name)["n"] == 1
            drop_schema(url)
            for _ in range(2):  # the first read meets the error, the second a fresh connection
                response = admin.get(f"/v1/metrics/{spec.name}/estimate")
                assert response.status_code == 503, response.text
                assert "deniable migrate" in response.json()["detail"]
    finally:
        server.stop()


# --- PostgreSQL: a re-registration cannot slip into a write transaction -----------------------


def _waiting_on_lock(observer: Engine) -> bool:
    """Whether a session of the database waits for a lock (the collector's ingest, here)."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    with observer.connect() as connection:
        return bool(connection.execute(query).scalar_one())


def test_postgres_ingest_waits_for_a_concurrent_re_registration(
    server: RunningCollector, admin: httpx.Client, backend: str
) -> None:
    """While a registry change holds the metric's row, a write under the old spec waits for it,
    then refuses the report instead of storing it under a spec that no longer exists."""
    if backend != "postgresql":
        pytest.skip("SQLite serializes every writer (BEGIN IMMEDIATE)")
    old = register(admin, categorical(unique_name("lock"), ["a", "b", "c"]))
    first = report(old, 0)
    assert post_reports(admin, [first]).status_code == 202
    new = categorical(old.name, ["a", "b"])
    upload: Future[httpx.Response] = Future()

    def send() -> None:
        with server.client(ADMIN_TOKEN) as client:
            upload.set_result(post_reports(client, [report(old, 2)]))

    engine = create_engine(normalize_url(server.settings.database_url))
    try:
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM metrics WHERE name = :n"), {"n": old.name})
            threading.Thread(target=send, daemon=True).start()
            deadline = time.monotonic() + 60
            while not upload.done() and not _waiting_on_lock(engine):
                assert time.monotonic() < deadline, "the upload neither finished nor waited"
                time.sleep(0.02)
            connection.execute(
                text(
                    "INSERT INTO metrics (name, spec, fingerprint, created_at)"
                    " VALUES (:name, :spec, :fingerprint, now())"
                ),
                {
                    "name": new.name,
                    "spec": canonical_json(new.fingerprint_fields()),
                    "fingerprint": new.fingerprint,
                },
            )
        response = upload.result(timeout=60)
    finally:
        engine.dispose()
    assert response.status_code == 422, response.text
    assert "fingerprint" in response.json()["detail"][0]["reason"]
    assert exported_ids(admin, old.name) == [first["id"]]
