"""The OpenAPI document /docs draws (issue 25): every operation under a tag a reader would
look for, with an id and a summary a person chose, and the tokens each one takes, so that
Swagger UI's Authorize button can send them and "Try it out" works against a collector with
tokens."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    viewer_collector,
)

GENERATED_ID = re.compile(r"_(get|post|put|patch|delete)$|__|^[a-z]+_[a-z_]+$")
"""FastAPI's generated operation ids: ``post_reports_v1_reports_post``, ``healthz_healthz_get``."""

BEARER = {"type": "http", "scheme": "bearer"}


@pytest.fixture(scope="module")
def document(databases: DatabaseFactory) -> Iterator[dict[str, Any]]:
    """The served OpenAPI document of a collector with all three tokens."""
    with viewer_collector(databases.new("sqlite")) as running, running.client() as anyone:
        answer = anyone.get("/openapi.json")
        assert answer.status_code == 200
        yield answer.json()


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(method, path, operation) of every operation in ``document``."""
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield method, path, operation


def test_every_operation_has_a_tag_a_chosen_id_and_a_summary(document: dict[str, Any]) -> None:
    declared = [tag["name"] for tag in document["tags"]]
    assert "default" not in declared and all(tag.get("description") for tag in document["tags"])
    ids = []
    for method, path, operation in operations(document):
        where = f"{method.upper()} {path}"
        assert len(operation.get("tags", [])) == 1, where
        assert operation["tags"][0] in declared, where
        assert not GENERATED_ID.search(operation["operationId"]), (where, operation["operationId"])
        summary = operation.get("summary", "")
        assert summary and summary != operation["operationId"], where
        assert summary.lower() != " ".join(operation["operationId"].split("_")).lower(), where
        ids.append(operation["operationId"])
    assert len(ids) == len(set(ids)) >= 13
    by_id = {op["operationId"]: (m, p) for m, p, op in operations(document)}
    assert by_id["uploadReports"] == ("post", "/v1/reports")
    assert by_id["getEstimate"] == ("get", "/v1/metrics/{name}/estimate")


def test_the_security_schemes_say_how_each_token_is_sent(document: dict[str, Any]) -> None:
    schemes = document["components"]["securitySchemes"]
    assert set(schemes) == {"viewerToken", "adminToken", "ingestKey", "shufflerToken"}
    for scheme in schemes.values():
        assert {k: scheme[k] for k in BEARER} == BEARER and "Authorization: Bearer" in scheme[
            "description"
        ]
    security = {op["operationId"]: op.get("security") for _, _, op in operations(document)}
    viewer = [{"viewerToken": []}, {"adminToken": []}]
    assert security["getEstimate"] == security["getSeries"] == viewer
    assert security["getPrivacyAccount"] == viewer
    assert security["registerMetric"] == security["exportReports"] == [{"adminToken": []}]
    assert security["uploadShuffled"] == [{"shufflerToken": []}]
    assert security["uploadReports"] == [{"ingestKey": []}, {"adminToken": []}]
    assert security["listMetrics"] is None and security["checkLiveness"] is None


def test_an_operation_called_as_documented_is_let_in(databases: DatabaseFactory) -> None:
    """What "Try it out" sends with each scheme's token is what the collector accepts: the
    operations a scheme is listed on answer something other than 401 with its token."""
    settings = collector_settings(databases.new("sqlite"), viewer_token=VIEWER_TOKEN)
    running = RunningCollector(settings).start()
    tokens = {"viewerToken": VIEWER_TOKEN, "adminToken": ADMIN_TOKEN, "ingestKey": INGEST_KEY}
    checked = []
    try:
        with running.client() as anyone:
            document = anyone.get("/openapi.json").json()
            for method, template, operation in operations(document):
                if method != "get":
                    continue
                path = template.replace("{name}", "no_such_metric")  # 404 once let in
                for requirement in operation.get("security") or []:
                    (scheme,) = requirement
                    headers = {"Authorization": f"Bearer {tokens[scheme]}"}
                    answer = anyone.request(method, path, headers=headers)
                    assert answer.status_code not in (401, 403), (path, scheme, answer.text)
                    checked.append((path, scheme))
                if operation.get("security"):
                    assert anyone.request(method, path).status_code == 401, path
    finally:
        running.stop()
    assert len(checked) == 9  # estimate, series, scrape, privacy: viewer and admin; export: admin
