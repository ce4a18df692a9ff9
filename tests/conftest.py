"""Shared fixtures: real databases (an SQLite file, a PostgreSQL database) and real collectors.

The helpers behind them live in ``testkit``. PostgreSQL tests need a server at
``DENIABLE_TEST_PG_URL`` (default 127.0.0.1:5432, user postgres). They are skipped with a
reason when none is reachable, unless ``DENIABLE_REQUIRE_POSTGRES`` is set (CI sets it), in
which case they fail instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from testkit import (
    ADMIN_TOKEN,
    BACKENDS,
    INGEST_KEY,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    postgres_problem,
)


@pytest.fixture(scope="session")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseFactory]:
    """Factory of empty test databases (SQLite files, PostgreSQL databases)."""
    factory = DatabaseFactory(tmp_path_factory.mktemp("databases"), postgres_problem())
    yield factory
    factory.drop_all()


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


@pytest.fixture(autouse=True)
def _no_inherited_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see no ``COLUMNS`` unless they set it: pytest-xdist's workers inherit
    ``COLUMNS=80``, which would narrow the CLI's piped tables (120 columns by default)."""
    monkeypatch.delenv("COLUMNS", raising=False)
