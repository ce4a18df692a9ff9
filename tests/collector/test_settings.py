"""Operational settings against real servers: the connection pool cap on PostgreSQL, the
graceful-shutdown timeout of ``deniable serve``, and zero-downtime token rotation over HTTP."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from pydantic import ValidationError
from sqlalchemy import text

from deniable.client import MetricSpec
from deniable.collector import Settings
from deniable.collector.serve import settings_environment
from deniable.collector.storage import open_database
from deniable.collector.storage.engine import APPLICATION_NAME
from testkit import (
    LOOPBACK,
    CollectorProcess,
    DatabaseFactory,
    RunningCollector,
    make_reports,
    register,
    unique_name,
)

POSTGRES_MAX_CONNECTIONS = 100
"""PostgreSQL's default ``max_connections``; 3 of them are reserved for superusers."""
SUPERUSER_RESERVED = 3
MAX_REPLICAS = 12
"""deploy/k8s/hpa.yaml's ``maxReplicas``, which the default pool size must fit."""


# ---------------------------------------------------------------- settings


def test_new_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DENIABLE_POOL_SIZE", "7")
    monkeypatch.setenv("DENIABLE_SHUTDOWN_TIMEOUT", "9")
    monkeypatch.setenv("DENIABLE_ADMIN_TOKEN", "admin-token-new-0123")
    monkeypatch.setenv("DENIABLE_ADMIN_TOKEN_PREVIOUS", "admin-token-old-0123")
    monkeypatch.setenv("DENIABLE_INGEST_KEY", "ingest-key-new-01234")
    monkeypatch.setenv("DENIABLE_INGEST_KEY_PREVIOUS", "ingest-key-old-01234")
    settings = Settings()
    assert (settings.pool_size, settings.shutdown_timeout) == (7, 9)
    assert settings.admin_tokens() == ["admin-token-new-0123", "admin-token-old-0123"]
    assert settings.ingest_tokens() == [
        "ingest-key-new-01234",
        "ingest-key-old-01234",
        "admin-token-new-0123",
        "admin-token-old-0123",
    ]


def test_defaults_fit_twelve_replicas_and_the_kubernetes_grace_period() -> None:
    settings = Settings()
    migration_job = 1
    assert (
        MAX_REPLICAS * settings.pool_size + migration_job
        <= POSTGRES_MAX_CONNECTIONS - SUPERUSER_RESERVED
    )
    assert settings.shutdown_timeout == 25
    assert settings.admin_tokens() == [] and settings.ingest_tokens() == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pool_size", "0"),
        ("pool_size", "-3"),
        ("pool_size", "many"),
        ("pool_size", "100000"),
        ("shutdown_timeout", "0"),
        ("shutdown_timeout", "ten"),
    ],
)
def test_invalid_values_are_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    monkeypatch.setenv(f"DENIABLE_{field.upper()}", value)
    with pytest.raises(ValidationError, match=field):
        Settings()


@pytest.mark.parametrize("role", ["admin_token", "ingest_key"])
def test_a_previous_token_without_a_current_one_is_refused_without_echoing_it(
    role: str,
) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(**{f"{role}_previous": "leaked-old-secret"})  # type: ignore[arg-type]
    assert f"DENIABLE_{role.upper()}_PREVIOUS" in str(caught.value)
    assert "leaked-old-secret" not in str(caught.value)


def test_worker_environment_reproduces_the_new_settings() -> None:
    settings = Settings(
        pool_size=3,
        shutdown_timeout=11,
        admin_token="admin-token-new-0123",  # type: ignore[arg-type]
        admin_token_previous="admin-token-old-0123",  # type: ignore[arg-type]
        ingest_key="ingest-key-new-01234",  # type: ignore[arg-type]
        ingest_key_previous="ingest-key-old-01234",  # type: ignore[arg-type]
    )
    env = settings_environment(settings)
    assert env["DENIABLE_POOL_SIZE"] == "3" and env["DENIABLE_SHUTDOWN_TIMEOUT"] == "11"
    rebuilt = Settings(**{k.removeprefix("DENIABLE_").lower(): v for k, v in env.items()})  # type: ignore[arg-type]
    assert rebuilt.admin_tokens() == settings.admin_tokens()
    assert rebuilt.ingest_tokens() == settings.ingest_tokens()


# ---------------------------------------------------------------- connection pool cap


def _connections_to(database_url: str) -> int:
    """The collector's connections open to the database of ``database_url``.

    Only those its engine names (``APPLICATION_NAME``) count: an autovacuum worker analysing
    the freshly written tables also shows in pg_stat_activity under the database's name, and
    is none of the collector's.
    """
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            " AND application_name = %s AND pid <> pg_backend_pid()",
            (name, APPLICATION_NAME),
        ).fetchone()
    assert row is not None
    return int(row[0])


@contextmanager
def _peak_connections(database_url: str) -> Iterator[list[int]]:
    """Sample the database's connection count every 20 ms; yields the list of samples."""
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(_connections_to(database_url))
            stop.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join(timeout=10)


@pytest.mark.parametrize("pool_size", [2, 4])
def test_pool_size_caps_postgresql_connections_under_concurrent_use(
    databases: DatabaseFactory, pool_size: int
) -> None:
    url = databases.new("postgresql")
    database = open_database(url, pool_size=pool_size)
    hold_seconds = 0.3

    def hold() -> None:
        with database.reader.connect() as connection:
            connection.execute(text("SELECT pg_sleep(:s)"), {"s": hold_seconds})

    try:
        started = time.monotonic()
        with _peak_connections(url) as samples, ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: hold(), range(8)))
        elapsed = time.monotonic() - started
    finally:
        database.dispose()
    assert max(samples) == pool_size, samples
    assert elapsed >= (8 / pool_size) * hold_seconds * 0.9, "requests queued for a connection"


def test_collector_holds_at_most_pool_size_connections_over_http(
    databases: DatabaseFactory,
) -> None:
    url = databases.new("postgresql")
    server = RunningCollector(Settings(database_url=url, pool_size=2)).start()
    try:
        with server.client() as client:
            spec = register(client, MetricSpec.boolean(unique_name("pool"), epsilon=1.0))
            read = register(client, MetricSpec.boolean(unique_name("read"), epsilon=1.0))
            seeded = {"reports": make_reports(read, [1] * 20, "2026-11-21", seed=99)}
            assert client.post("/v1/reports", json=seeded).status_code == 202

            def work(i: int) -> int:
                batch = {"reports": make_reports(spec, [i % 2] * 50, "2026-11-21", seed=i)}
                upload = client.post("/v1/reports", json=batch)
                estimate = client.get(f"/v1/metrics/{read.name}/estimate")
                assert upload.status_code == 202, upload.text
                assert estimate.status_code == 200, estimate.text
                return 50

            with _peak_connections(url) as samples, ThreadPoolExecutor(16) as pool:
                stored = sum(pool.map(work, range(48)))
            final = client.get(f"/v1/metrics/{spec.name}/estimate").json()
    finally:
        server.stop()
    assert 1 <= max(samples) <= 2, samples
    assert final["n"] == stored


# ---------------------------------------------------------------- serve via the CLI


def test_a_stuck_request_is_cut_off_after_the_shutdown_timeout(tmp_path: Path) -> None:
    timeout = 2
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'cli.db'}", shutdown_timeout=timeout)
    with (
        CollectorProcess(settings, tmp_path) as server,
        socket.create_connection((LOOPBACK, server.port)) as stuck,
    ):
        stuck.sendall(
            b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100000\r\n\r\n{"reports": ['
        )
        time.sleep(0.5)
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        server.process.wait(timeout=timeout + 15)
        elapsed = time.monotonic() - started
    assert elapsed >= timeout * 0.75, "shutdown waited for the request in flight"
    assert elapsed < timeout + 10, f"took {elapsed:.1f} s: the shutdown timeout was not applied"


# ---------------------------------------------------------------- token rotation

OLD_ADMIN, NEW_ADMIN = "admin-before-rotation", "admin-after-rotation"
OLD_KEY, NEW_KEY = "ingest-before-rotation", "ingest-after-rotation"


def _upload(url: str, token: str, spec: MetricSpec, seed: int) -> int:
    """Upload 10 fresh reports of ``spec`` with ``token``; the response status."""
    batch = {"reports": make_reports(spec, [1] * 10, "2026-11-21", seed=seed)}
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{url}/v1/reports", json=batch, headers=headers, trust_env=False).status_code


def _estimate_status(url: str, token: str, name: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    response = httpx.get(f"{url}/v1/metrics/{name}/estimate", headers=headers, trust_env=False)
    return response.status_code


def test_token_rotation_accepts_both_then_only_the_new_one(
    databases: DatabaseFactory, tmp_path: Path
) -> None:
    url = databases.new("sqlite")
    spec = MetricSpec.boolean(unique_name("rotate"), epsilon=1.0)

    before = RunningCollector(Settings(database_url=url, admin_token=OLD_ADMIN, ingest_key=OLD_KEY))  # type: ignore[arg-type]
    before.start()
    try:
        with before.client(OLD_ADMIN) as admin:
            spec = register(admin, spec)
        assert _upload(before.url, OLD_KEY, spec, seed=1) == 202
        assert _upload(before.url, NEW_KEY, spec, seed=2) == 401
    finally:
        before.stop()

    rotating = Settings(
        database_url=url,
        admin_token=NEW_ADMIN,  # type: ignore[arg-type]
        admin_token_previous=OLD_ADMIN,  # type: ignore[arg-type]
        ingest_key=NEW_KEY,  # type: ignore[arg-type]
        ingest_key_previous=OLD_KEY,  # type: ignore[arg-type]
    )
    with CollectorProcess(rotating, tmp_path) as server:
        during = server.url
        assert _upload(during, OLD_KEY, spec, seed=3) == 202
        assert _upload(during, NEW_KEY, spec, seed=4) == 202
        assert _upload(during, "not-a-key", spec, seed=5) == 401
        assert _estimate_status(during, OLD_ADMIN, spec.name) == 200
        assert _estimate_status(during, NEW_ADMIN, spec.name) == 200
        assert _estimate_status(during, OLD_KEY, spec.name) == 401

    after = RunningCollector(Settings(database_url=url, admin_token=NEW_ADMIN, ingest_key=NEW_KEY))  # type: ignore[arg-type]
    after.start()
    try:
        assert _upload(after.url, OLD_KEY, spec, seed=6) == 401
        assert _upload(after.url, NEW_KEY, spec, seed=7) == 202
        assert _estimate_status(after.url, OLD_ADMIN, spec.name) == 401
        with after.client(NEW_ADMIN) as admin:
            result = admin.get(f"/v1/metrics/{spec.name}/estimate").json()
    finally:
        after.stop()
    accepted_uploads = 4
    assert result["n"] == accepted_uploads * 10


def test_cors_origins_are_exact_origins_and_none_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DENIABLE_CORS_ORIGINS", raising=False)
    assert Settings().cors_origins == []
    monkeypatch.setenv("DENIABLE_CORS_ORIGINS", "https://app.example, http://localhost:3000/")
    assert Settings().cors_origins == ["https://app.example", "http://localhost:3000"]
    for bad in ("*", "https://app.example/page", "app.example", "https://*.example"):
        monkeypatch.setenv("DENIABLE_CORS_ORIGINS", bad)
        with pytest.raises(ValidationError, match=r"DENIABLE_CORS_ORIGINS: .* is not an origin"):
            Settings()
