"""Shared fixtures: real databases (an SQLite file, a PostgreSQL database) and real collectors.

PostgreSQL tests need a server at ``DENIABLE_TEST_PG_URL`` (default 127.0.0.1:5432, user
postgres). They are skipped with a reason when none is reachable, unless
``DENIABLE_REQUIRE_POSTGRES`` is set (CI sets it), in which case they fail instead.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from deniable.client import MetricSpec, SeededRandomness
from deniable.collector import Settings, create_app
from deniable.collector.serve import server_config

PG_ADMIN_URL = os.environ.get("DENIABLE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ("sqlite", "postgresql")
ADMIN_TOKEN = "admin-secret-for-tests"
INGEST_KEY = "ingest-key-for-tests"
TEST_NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
"""The server clock of the shared test collectors (reports of 2026-11-21 are current)."""


def _postgres_reachable() -> str | None:
    """None if PostgreSQL answers at PG_ADMIN_URL, else why not."""
    import psycopg

    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    return None


class DatabaseFactory:
    """Makes empty databases for tests and removes them at the end of the session."""

    def __init__(self, directory: Path, postgres_problem: str | None) -> None:
        self.directory = directory
        self.postgres_problem = postgres_problem
        self._pg_databases: list[str] = []

    def require(self, backend: str) -> None:
        """Skip (or, in CI, fail) the calling test if ``backend`` is not available."""
        if backend == "postgresql" and self.postgres_problem is not None:
            message = f"PostgreSQL unreachable at {PG_ADMIN_URL} ({self.postgres_problem})"
            if os.environ.get("DENIABLE_REQUIRE_POSTGRES"):
                pytest.fail(message + " and DENIABLE_REQUIRE_POSTGRES is set")
            pytest.skip(message)

    def new(self, backend: str) -> str:
        """The URL of a new, empty database of ``backend``."""
        self.require(backend)
        name = f"deniable_test_{uuid.uuid4().hex[:12]}"
        if backend == "sqlite":
            return f"sqlite:///{self.directory / (name + '.db')}"
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._pg_databases.append(name)
        base = PG_ADMIN_URL.rsplit("/", 1)[0]
        return f"{base}/{name}"

    def drop_all(self) -> None:
        """Drop every PostgreSQL database this factory made."""
        if not self._pg_databases:
            return
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            for name in self._pg_databases:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseFactory]:
    """Factory of empty test databases (SQLite files, PostgreSQL databases)."""
    factory = DatabaseFactory(tmp_path_factory.mktemp("databases"), _postgres_reachable())
    yield factory
    factory.drop_all()


class Clock:
    """A settable server clock for collectors under test."""

    def __init__(self, now: dt.datetime = TEST_NOW) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, days: int) -> None:
        """Move the clock ``days`` days forward."""
        self.now += dt.timedelta(days=days)


class RunningCollector:
    """A real uvicorn server running the collector on a free loopback port, in a thread.

    It runs with the configuration ``deniable serve`` uses (``server_config``): the same
    protocol, header deadline and connection cap.
    """

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or Clock()
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> RunningCollector:
        """Start serving; returns once the app has finished starting up."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.app = create_app(self.settings, clock=self.clock)
        config = server_config(self.app, self.settings, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test collector did not start")
            time.sleep(0.01)
        return self

    def open_connections(self) -> int:
        """How many client connections the server holds open right now."""
        assert self._server is not None, "the collector is not running"
        return len(self._server.server_state.connections)

    def app_state(self) -> Any:
        """The running app's shared state (``deniable.collector.context.Collector``)."""
        return self.app.state.collector

    def stop(self) -> None:
        """Shut the server down gracefully and wait for it."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=30)
        self._server = None
        self._thread = None

    def restart(self) -> None:
        """Stop, then start a new app instance on the same database (new port)."""
        self.stop()
        self.start()

    def client(
        self, token: str | None = None, headers: dict[str, str] | None = None
    ) -> httpx.Client:
        """An httpx client for this server, with a bearer token if given."""
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, trust_env=False)


def collector_settings(database_url: str, **overrides: Any) -> Settings:
    """Test settings: the given database, an admin token and an ingest key."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_token": ADMIN_TOKEN,
        "ingest_key": INGEST_KEY,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest, databases: DatabaseFactory) -> str:
    """Each database backend in turn (PostgreSQL skipped only where unreachable and not required)."""
    databases.require(request.param)
    return request.param


@pytest.fixture(scope="session")
def collector(backend: str, databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector shared by a session's tests on one backend; tests use unique metric names."""
    server = RunningCollector(collector_settings(databases.new(backend))).start()
    yield server
    server.stop()


@pytest.fixture
def admin(collector: RunningCollector) -> Iterator[httpx.Client]:
    """An httpx client of the shared collector with the admin token."""
    with collector.client(ADMIN_TOKEN) as client:
        yield client


@pytest.fixture
def uploader(collector: RunningCollector) -> Iterator[httpx.Client]:
    """An httpx client of the shared collector with the ingest key."""
    with collector.client(INGEST_KEY) as client:
        yield client


def unique_name(prefix: str = "m") -> str:
    """A metric name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def register(client: httpx.Client, spec: MetricSpec) -> MetricSpec:
    """Register ``spec`` through the API and return the spec the collector resolved."""
    response = client.post("/v1/metrics", json=spec.fingerprint_fields())
    assert response.status_code in (200, 201), response.text
    return MetricSpec.from_dict(response.json())


def make_reports(
    spec: MetricSpec, values: Sequence[int], period: str, seed: int
) -> list[dict[str, Any]]:
    """Reports of true category indices ``values`` randomized by the real mechanism (seeded).

    Ids are fresh uuid4s: tests share databases, and seeded ids would collide across tests.
    """
    rng = SeededRandomness(seed)
    return [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": period,
            "payload": spec.randomizer.randomize(value, rng),
        }
        for value in values
    ]
