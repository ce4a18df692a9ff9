"""Bring a database to the newest schema with Alembic, safely from several replicas at once.

On PostgreSQL the upgrade runs inside one transaction that first takes a transaction-level
advisory lock, so replicas starting together queue instead of racing; SQLite serializes
through its write lock (``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

from .engine import normalize_url, open_database

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATION_LOCK_KEY = 0x64656E6961626C65 & 0x7FFFFFFFFFFFFFFF
"""The PostgreSQL advisory lock key ("deniable" in ASCII) that serializes migrations."""

_IN_PROCESS = threading.Lock()
"""Alembic's migration context is process-global: one migration at a time per process."""


def alembic_config() -> Config:
    """The Alembic configuration shipped inside the package (Alembic is imported only when a
    migration runs: it is slow to import, and most users of the storage never migrate)."""
    from alembic.config import Config

    ini = resources.files("deniable.collector.storage").joinpath("alembic.ini")
    with resources.as_file(ini) as path:
        config = Config(str(path))
    config.set_main_option("script_location", "deniable.collector.storage:migrations")
    return config


def run_locked(database_url: str, work: Callable[[Connection], None]) -> None:
    """Run ``work`` in one transaction holding the migration lock, then commit.

    The transaction is open before ``work`` starts, so Alembic runs every pending revision
    inside it: on SQLite it would otherwise commit each revision on its own (it treats SQLite's
    DDL as non-transactional), and a replica could read the version between two revisions and
    apply the second one again.
    """
    database = open_database(database_url, pool_size=1)
    try:
        with database.writer.connect() as connection, connection.begin():
            if database.dialect == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
            work(connection)
    finally:
        database.dispose()


def migrate(database_url: str, revision: str = "head") -> None:
    """Upgrade the database at ``database_url`` to ``revision`` (the newest by default)."""
    from alembic import command

    def upgrade(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    with _IN_PROCESS:
        run_locked(normalize_url(database_url), upgrade)
