"""Starting a collector (issue 14): a port in use fails in one line before the database is
touched, a plain file path is an SQLite database, start-up prints one summary block, and the
root redirects to the API docs."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from deniable.collector import Listening, Settings
from deniable.collector.startup import port_problem, public_database, summary
from testkit import (
    ADMIN_TOKEN,
    LOOPBACK,
    CollectorProcess,
    RunningCollector,
    collector_settings,
    spare_port,
)
from testkit.ports import bind_spare
from testkit.service_process import DENIABLE, inherited_environment


def test_a_port_in_use_fails_in_one_line_before_the_database_is_made(tmp_path: Path) -> None:
    database = tmp_path / "collector.db"
    with socket.socket() as taken:
        bind_spare(taken)
        taken.listen()
        port = taken.getsockname()[1]
        assert port_problem(Listening(LOOPBACK, port)) is not None
        out = subprocess.run(
            [*DENIABLE, "serve", "--port", str(port), "--database", str(database)],
            capture_output=True,
            text=True,
            timeout=60,
            env=inherited_environment(),
        )
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert f"port {port} on {LOOPBACK} is already in use" in out.stderr
    assert "startup complete" not in out.stderr and not database.exists()


def test_a_free_port_and_port_zero_pass_the_check() -> None:
    assert port_problem(Listening(LOOPBACK, spare_port())) is None
    assert port_problem(Listening(LOOPBACK, 0)) is None


def test_a_plain_path_is_an_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert Settings(database_url="./collector.db").database_url == (
        f"sqlite:///{tmp_path / 'collector.db'}"
    )
    assert Settings(database_url="sqlite:///x.db").database_url == "sqlite:///x.db"
    monkeypatch.setenv("DENIABLE_DATABASE_URL", "data/c.db")
    assert Settings().database_url == f"sqlite:///{tmp_path / 'data' / 'c.db'}"


def test_serve_takes_a_path_prints_one_summary_and_sends_the_root_to_the_dashboard(
    tmp_path: Path,
) -> None:
    database = tmp_path / "collector.db"
    settings = collector_settings(str(database), retention_days=30)
    server = CollectorProcess(settings, tmp_path).start()
    try:
        with httpx.Client(base_url=server.url, trust_env=False) as client:
            root = client.get("/", follow_redirects=False)
            assert root.status_code in (302, 307) and root.headers["location"] == "/dashboard/"
            # Signed out, the dashboard sends a browser on to its sign-in form.
            signed_out = client.get("/", follow_redirects=True)
            assert signed_out.status_code == 200 and 'id="sign-in"' in signed_out.text
            listed = client.get("/v1/metrics")
            assert listed.status_code == 200
            docs = client.get("/docs")
            assets = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
            assert docs.status_code == 200 and len(assets) >= 3
            for asset in assets:  # every file of the docs page comes from the collector
                assert asset.startswith("/docs-assets/"), asset
                assert client.get(asset).status_code == 200
        log = server.log_tail()
    finally:
        server.stop()
    assert database.exists()
    assert f"deniable collector on {server.url}" in log and f"{server.url}/docs" in log
    assert f"{server.url}/dashboard/" in log
    assert f"sqlite:///{database}" in log
    assert "admin token   set" in log and "ingest key    set" in log and "30 days" in log
    assert ADMIN_TOKEN not in log


def test_the_summary_never_shows_a_password_or_a_token() -> None:
    settings = Settings(
        database_url="postgresql://deniable:s3cret-pw@db.internal/deniable",
        admin_token="a-long-admin-token-0123456789",
    )
    text = summary(settings, Listening("0.0.0.0", 8080, 2))
    assert "s3cret-pw" not in text and "a-long-admin-token" not in text
    assert "postgresql://deniable:***@db.internal/deniable" in text
    assert "admin token   set" in text and "workers       2" in text
    assert "ingest key    none (anyone may upload)" in text and "uploads    off" not in text
    assert public_database("not a url at all::") == "(unparsable database URL)"


def test_the_root_redirect_is_not_in_the_api_schema(collector: RunningCollector) -> None:
    with collector.client() as client:
        assert "/" not in client.get("/openapi.json").json()["paths"]
