"""The test PostgreSQL server: where it is, whether it answers, and scratch databases on it.

``DENIABLE_TEST_PG_URL`` names a database the tests and benches may connect to in order to
create and drop their own (default: the ``test`` database of 127.0.0.1:5432, user postgres).
``DENIABLE_TEST_DB_PREFIX`` (letters, digits and ``_``) starts the name of every database they
create, so that on a shared server they are told apart from others' and dropped by pattern.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
from psycopg import sql

PG_URL_VARIABLE = "DENIABLE_TEST_PG_URL"
"""The environment variable naming the test PostgreSQL."""

PG_ADMIN_URL = os.environ.get(PG_URL_VARIABLE, "postgresql://postgres@127.0.0.1:5432/test")
"""A database on the test server from which scratch databases are created and dropped."""

PREFIX_VARIABLE = "DENIABLE_TEST_DB_PREFIX"
"""The environment variable whose value starts every scratch database's name."""

MAX_NAME = 63
"""PostgreSQL's longest identifier, in bytes."""

MAX_PARALLEL_DROPS = 8
"""Connections used at once to drop scratch databases (the server allows 100)."""


def postgres_problem() -> str | None:
    """None if PostgreSQL answers at ``PG_ADMIN_URL``, else why not (one line)."""
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3, autocommit=True) as connection:
            connection.execute("SELECT 1")
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return None


def database_url(name: str) -> str:
    """The URL of database ``name`` on the test server."""
    return PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name


def name_prefix() -> str:
    """``DENIABLE_TEST_DB_PREFIX`` (empty when unset), read at each call; ValueError if it is
    not letters, digits and underscores or leaves no room for the rest of a name."""
    prefix = os.environ.get(PREFIX_VARIABLE, "")
    if prefix and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,30}", prefix):
        raise ValueError(
            f"{PREFIX_VARIABLE} must be letters, digits and _ (at most 31, not starting with a"
            " digit)"
        )
    return prefix.lower()


def create_database(prefix: str) -> str:
    """Create an empty database named ``DENIABLE_TEST_DB_PREFIX``, ``prefix`` and a random
    suffix; its name."""
    start, suffix = name_prefix(), f"_{uuid.uuid4().hex[:12]}"
    name = start + prefix[: MAX_NAME - len(start) - len(suffix)] + suffix
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name


def _drop_database(name: str) -> None:
    """Drop database ``name``, closing any connection still open to it."""
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def drop_databases(names: list[str]) -> None:
    """Drop the databases ``names`` at once.

    Each DROP DATABASE waits for a checkpoint; drops sent together share one, so 10 take about
    2 s instead of 18 s one after the other.
    """
    if not names:
        return
    with ThreadPoolExecutor(max_workers=min(len(names), MAX_PARALLEL_DROPS)) as pool:
        list(pool.map(_drop_database, names))


@contextlib.contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """Create an empty database, yield its URL, and drop it (with its connections) after."""
    name = create_database(prefix)
    try:
        yield database_url(name)
    finally:
        drop_databases([name])
