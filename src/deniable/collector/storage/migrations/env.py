"""Alembic environment: upgrades the connection handed in by :func:`migrate`, or one it opens."""

from __future__ import annotations

import os

from alembic import context

from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.partitions import include_name
from deniable.collector.storage.tables import metadata

config = context.config


def _run(connection: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against ``config.attributes['connection']`` or ``DENIABLE_DATABASE_URL``."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from deniable.collector.storage.migrator import run_locked

    url = config.get_main_option("sqlalchemy.url") or os.environ.get("DENIABLE_DATABASE_URL")
    if not url:
        raise SystemExit("set DENIABLE_DATABASE_URL to the database to migrate")
    run_locked(normalize_url(url), lambda conn: _run(conn))


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run against a database")
run_migrations_online()
