"""One read statement run on the driver's own cursor, for the hottest read (an estimate's
counts): SQLAlchemy's ``Connection``, its autobegin and its result set-up cost about twice the
driver's execute of a one-period read (docs/performance.md).

Errors still surface as SQLAlchemy's: when the driver raises, the statement is run again
through SQLAlchemy (a read, so running it twice changes nothing), whose error, translated by
the engine's own ``handle_error`` hooks (a missing schema, a missing database) and classed as
:class:`sqlalchemy.exc.OperationalError` and its kin, is what the caller sees, and what the
503 answers depend on. A pool that cannot hand out a connection in time raises SQLAlchemy's
``TimeoutError`` itself, as before.

On PostgreSQL the statement runs in autocommit (one statement is its own transaction, as
consistent as one inside ``BEGIN``): the read is the statement alone, without ``BEGIN``
before it and the pool's ``ROLLBACK`` when the connection goes back (the pool's pre-ping on
checkout stays).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, text

_BIND = re.compile(r":(\w+)")
"""A named bind parameter as a ``text()`` statement writes it (``:name``)."""


@functools.cache
def driver_sql(sql: str, paramstyle: str) -> str:
    """``sql`` (binds written ``:name``, no ``%``) in the driver's ``paramstyle``: SQLite's
    ``named`` takes it as it is, psycopg's ``pyformat`` as ``%(name)s``."""
    if paramstyle == "named":
        return sql
    if paramstyle == "pyformat" and "%" not in sql:
        return _BIND.sub(r"%(\1)s", sql)
    raise ValueError(f"no driver form of this statement for paramstyle {paramstyle}")


def driver_rows(engine: Engine, sql: str, arguments: Mapping[str, Any]) -> Sequence[Any]:
    """All rows of the read ``sql`` (binds written ``:name``) with ``arguments``, as the
    driver's tuples, on a connection of ``engine``'s pool; a driver error is raised as
    SQLAlchemy raises it (the statement run again through SQLAlchemy)."""
    dialect = engine.dialect
    statement = driver_sql(sql, "named" if dialect.name == "sqlite" else dialect.paramstyle)
    try:
        connection = engine.raw_connection()
    except dialect.loaded_dbapi.Error:
        return _through_sqlalchemy(engine, sql, arguments)
    driver = connection.driver_connection
    alone = dialect.name == "postgresql" and driver is not None
    try:
        if alone:
            driver.autocommit = True  # no BEGIN, and no ROLLBACK on return
        cursor = connection.cursor()
        try:
            cursor.execute(statement, arguments)
            return cursor.fetchall()
        finally:
            cursor.close()
            if alone:
                driver.autocommit = False
    except dialect.loaded_dbapi.Error:
        connection.invalidate()
        return _through_sqlalchemy(engine, sql, arguments)
    finally:
        connection.close()


def _through_sqlalchemy(engine: Engine, sql: str, arguments: Mapping[str, Any]) -> Sequence[Any]:
    """:func:`driver_rows` through SQLAlchemy's ``Connection``: its rows, or its error."""
    with engine.connect() as connection:
        return connection.execute(text(sql), dict(arguments)).all()
