"""No report id or payload reaches a log line, even when a write fails inside the database.

Issue 12 item 7. A database error's text holds the SQL statement and, unless the engine hides
them, its parameters (the batch's ids and payloads); PostgreSQL adds a DETAIL line with the
failing row. The collector runs here with every logger at DEBUG (the root logger, SQLAlchemy's,
uvicorn's), uploads and exports reports, then has the database refuse every insert (a trigger
on SQLite, a CHECK constraint on PostgreSQL) and uploads again: the log must hold none of the
reports' ids or payloads.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text

from deniable.client import MetricSpec
from deniable.collector.storage.engine import normalize_url
from testkit import (
    ADMIN_TOKEN,
    TEST_NOW,
    RunningCollector,
    collector_settings,
    make_reports,
    register,
    unique_name,
)

TODAY = TEST_NOW.date().isoformat()
LOUD_LOGGERS = ("sqlalchemy", "uvicorn", "uvicorn.error", "uvicorn.access")
"""Loggers set to DEBUG besides the root: SQLAlchemy and uvicorn pin their own levels."""
SEPARATE_LOGGERS = ("uvicorn", "uvicorn.access")
"""uvicorn's loggers do not propagate to the root logger: the capture is attached to them too."""


@pytest.fixture
def captured(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log record at DEBUG and above, from the root logger, SQLAlchemy's and uvicorn's."""
    caplog.set_level(logging.DEBUG)
    loud = [logging.getLogger(name) for name in LOUD_LOGGERS]
    levels = [logger.level for logger in loud]
    separate = [logging.getLogger(name) for name in SEPARATE_LOGGERS]
    for logger in loud:
        logger.setLevel(logging.DEBUG)
    for logger in separate:
        logger.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        for logger in separate:
            logger.removeHandler(caplog.handler)
        for logger, level in zip(loud, levels, strict=True):
            logger.setLevel(level)


def refuse_inserts(database_url: str) -> None:
    """Make the database refuse every new report, underneath the running collector."""
    url = make_url(normalize_url(database_url))
    if url.get_backend_name() == "sqlite":
        with sqlite3.connect(url.database) as connection:
            connection.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON reports BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        return
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text("ALTER TABLE reports ADD CONSTRAINT refuse CHECK (period = 'never') NOT VALID")
            )
    finally:
        engine.dispose()


def secrets_of(reports: list[dict[str, Any]]) -> list[str]:
    """What must never be logged: each id (text and hex) and each payload."""
    out = []
    for report in reports:
        out += [report["id"], report["id"].replace("-", ""), report["payload"]]
    return out


def test_no_report_id_or_payload_is_logged_when_a_write_fails(
    databases: Any, backend: str, captured: pytest.LogCaptureFixture
) -> None:
    server = RunningCollector(collector_settings(databases.new(backend))).start()
    try:
        with server.client(ADMIN_TOKEN) as client:
            spec = register(
                client,
                MetricSpec.categorical(
                    unique_name("priv"), [f"c{i}" for i in range(96)], epsilon=1.0, mechanism="oue"
                ),
            )
            stored = make_reports(spec, list(range(40)), TODAY, seed=1)
            assert client.post("/v1/reports", json={"reports": stored}).status_code == 202
            page = client.get(f"/v1/admin/metrics/{spec.name}/reports")
            assert sorted(r["id"] for r in page.json()["reports"]) == sorted(
                r["id"] for r in stored
            )
            refuse_inserts(server.settings.database_url)
            refused = make_reports(spec, list(range(40, 80)), TODAY, seed=2)
            response = client.post("/v1/reports", json={"reports": refused})
    finally:
        server.stop()
    assert response.status_code in (500, 503), response.text
    assert "refuse" not in response.text
    faults = [r for r in captured.records if r.name == "deniable.collector" and r.levelno >= 40]
    assert faults, "the failed write was not logged"
    assert any("sqlalchemy" in r.name for r in captured.records), "SQLAlchemy's log not captured"
    text_logged = captured.text + "\n".join(
        "\n".join(map(str, (r.getMessage(), r.exc_text or ""))) for r in captured.records
    )
    assert len(stored[0]["payload"]) == 16  # 12 bytes of base64: no accidental match in a log
    leaked = [secret for secret in secrets_of(stored + refused) if secret in text_logged]
    assert leaked == []
