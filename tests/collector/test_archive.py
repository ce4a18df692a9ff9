"""Archiving a metric (issue 14): no more reports, gone from the served list, data kept.

On SQLite and on PostgreSQL, through the real HTTP API.
"""

from __future__ import annotations

import httpx

from deniable.client import MetricSpec
from testkit import RunningCollector, make_reports, register, unique_name

TODAY = "2026-11-21"


def test_an_archived_metric_takes_no_reports_and_leaves_the_list_but_stays_readable(
    admin: httpx.Client, uploader: httpx.Client, collector: RunningCollector
) -> None:
    spec = register(
        admin, MetricSpec.categorical(unique_name("typo"), ["a", "b", "c"], epsilon=1.0)
    )
    kept = make_reports(spec, [0, 1, 2, 0], TODAY, seed=1)
    assert uploader.post("/v1/reports", json={"reports": kept}).status_code == 202
    with collector.client() as anyone:
        etag = anyone.get("/v1/metrics").headers["etag"]

    archived = admin.post(f"/v1/metrics/{spec.name}/archive")
    assert archived.status_code == 200, archived.text
    body = archived.json()
    assert (body["name"], body["fingerprint"], body["already_archived"]) == (
        spec.name,
        spec.fingerprint,
        False,
    )
    again = admin.post(f"/v1/metrics/{spec.name}/archive").json()
    assert again["already_archived"] is True and again["archived_at"] == body["archived_at"]

    late = make_reports(spec, [1], TODAY, seed=2)
    other = register(admin, MetricSpec.boolean(unique_name("live"), epsilon=1.0))
    refused = uploader.post(
        "/v1/reports", json={"reports": make_reports(other, [1], TODAY, seed=3) + late}
    )
    assert refused.status_code == 422, refused.text
    [problem] = refused.json()["detail"]
    assert problem["index"] == 1 and problem["reason"].startswith("metric archived")
    assert spec.name in problem["reason"]

    with collector.client() as anyone:
        listed = anyone.get("/v1/metrics", headers={"If-None-Match": etag})
        assert listed.status_code == 200 and listed.headers["etag"] != etag
        names = {m["name"] for m in listed.json()["metrics"]}
        assert spec.name not in names and other.name in names
        assert anyone.get(f"/v1/metrics/{spec.name}").json()["fingerprint"] == spec.fingerprint
    estimate = admin.get(f"/v1/metrics/{spec.name}/estimate", params={"start": TODAY})
    assert estimate.status_code == 200 and estimate.json()["n"] == len(kept)
    exported = admin.get(f"/v1/admin/metrics/{spec.name}/reports", params={"start": TODAY})
    assert exported.status_code == 200, exported.text


def test_an_archived_name_is_never_registered_again(admin: httpx.Client) -> None:
    spec = register(admin, MetricSpec.boolean(unique_name("gone"), epsilon=1.0))
    assert admin.post(f"/v1/metrics/{spec.name}/archive").status_code == 200
    for again in (spec, MetricSpec.boolean(spec.name, epsilon=2.0)):
        answer = admin.post("/v1/metrics", json=again.fingerprint_fields())
        assert answer.status_code == 409, answer.text
        assert "archived" in answer.json()["detail"]


def test_archive_needs_the_admin_token_and_a_registered_metric(
    admin: httpx.Client, collector: RunningCollector
) -> None:
    spec = register(admin, MetricSpec.boolean(unique_name("kept"), epsilon=1.0))
    with collector.client() as anyone:
        assert anyone.post(f"/v1/metrics/{spec.name}/archive").status_code == 401
    missing = admin.post(f"/v1/metrics/{unique_name('nosuch')}/archive")
    assert missing.status_code == 404 and "not registered" in missing.json()["detail"]


def test_a_spec_cached_before_the_archive_does_not_let_reports_in(
    admin: httpx.Client, uploader: httpx.Client, collector: RunningCollector
) -> None:
    """The archive lands in the database behind the cache (another worker, a direct update):
    the write transaction still refuses the reports, with the same 422."""
    from deniable.collector.storage.queries import archive_metric

    spec = register(admin, MetricSpec.boolean(unique_name("cached"), epsilon=1.0))
    warm = make_reports(spec, [1], TODAY, seed=4)
    assert uploader.post("/v1/reports", json={"reports": warm}).status_code == 202
    state = collector.app_state()
    assert archive_metric(state.database, spec.name, state.clock()) is not None
    refused = uploader.post("/v1/reports", json={"reports": make_reports(spec, [0], TODAY, 5)})
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["reason"].startswith("metric archived")
