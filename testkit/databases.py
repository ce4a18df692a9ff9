"""Empty databases of each backend (an SQLite file, a PostgreSQL database) for tests and benches.

A test that needs PostgreSQL is skipped with the reason when the test server does not answer,
unless ``DENIABLE_REQUIRE_POSTGRES`` is set (CI sets it): then it fails instead.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .postgres import PG_ADMIN_URL, create_database, database_url, drop_databases, fresh_database

BACKENDS = ("sqlite", "postgresql")
"""The database backends the collector supports, each test running on both."""


def require_postgres(problem: str | None) -> None:
    """Skip (or, when ``DENIABLE_REQUIRE_POSTGRES`` is set, fail) if ``problem`` says why
    PostgreSQL is unavailable; do nothing when it is None."""
    if problem is None:
        return
    message = f"PostgreSQL unreachable at {PG_ADMIN_URL} ({problem})"
    if os.environ.get("DENIABLE_REQUIRE_POSTGRES"):
        pytest.fail(message + " and DENIABLE_REQUIRE_POSTGRES is set")
    pytest.skip(message, allow_module_level=True)


def sqlite_url(directory: Path, name: str) -> str:
    """The URL of the SQLite file ``name``.db in ``directory``."""
    return f"sqlite:///{directory / (name + '.db')}"


class DatabaseFactory:
    """Makes empty databases for tests and removes them at the end of the session."""

    def __init__(self, directory: Path, postgres_problem: str | None) -> None:
        self.directory = directory
        self.postgres_problem = postgres_problem
        self._pg_databases: list[str] = []

    def require(self, backend: str) -> None:
        """Skip (or, in CI, fail) the calling test if ``backend`` is not available."""
        if backend == "postgresql":
            require_postgres(self.postgres_problem)

    def new(self, backend: str) -> str:
        """The URL of a new, empty database of ``backend``."""
        self.require(backend)
        if backend == "sqlite":
            return sqlite_url(self.directory, f"deniable_test_{uuid.uuid4().hex[:12]}")
        name = create_database("deniable_test")
        self._pg_databases.append(name)
        return database_url(name)

    def drop_all(self) -> None:
        """Drop every PostgreSQL database this factory made."""
        drop_databases(self._pg_databases)


@contextlib.contextmanager
def scratch_database(backend: str, directory: Path, prefix: str) -> Iterator[str]:
    """The URL of an empty database of ``backend`` (a file in ``directory`` for SQLite), for
    as long as the block runs; a PostgreSQL one is dropped after."""
    if backend == "sqlite":
        yield sqlite_url(directory, prefix)
        return
    with fresh_database(prefix) as url:
        yield url
