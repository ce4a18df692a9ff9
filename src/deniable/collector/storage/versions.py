"""Read versions: what a write transaction changed, so a cached read knows whether it is current.

Every write goes through :meth:`.engine.Database.writing`, which calls :func:`advance` in its
transaction before the commit: the versions of the metrics it names, or the ``""`` row when it
names none. :func:`read_version` is what the read cache keys a document by.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

from sqlalchemy import Connection, Engine, Insert, bindparam, update

from .dialects import insert_of
from .driverread import driver_rows
from .tables import read_versions

ANY_METRIC = ""
"""The row a write that names no metric advances; every read's key holds it too."""


@functools.cache
def _upsert(dialect: str) -> Insert:
    """Insert a metric's row at version 1, or add one to it: built once per dialect, since
    building it anew cost about 0.3 ms of every write transaction."""
    stmt = insert_of(dialect)(read_versions).values(metric=bindparam("metric"), version=1)
    return stmt.on_conflict_do_update(
        index_elements=["metric"], set_={"version": read_versions.c.version + 1}
    )


def advance(connection: Connection, metrics: Collection[str] | None) -> None:
    """Add one to the version of each of ``metrics`` (in name order, so two writers lock the
    rows in the same order), or to the ``""`` row's when ``metrics`` is None."""
    if metrics is None:
        bump = update(read_versions).where(read_versions.c.metric == ANY_METRIC)
        if connection.execute(bump.values(version=read_versions.c.version + 1)).rowcount:
            return
        metrics = [ANY_METRIC]
    upsert = _upsert(connection.dialect.name)
    for metric in sorted(set(metrics)):
        connection.execute(upsert, {"metric": metric})


_READ_VERSION = (
    f"SELECT metric, version FROM {read_versions.name}"
    " WHERE metric = :any_metric OR metric = :metric"
)
"""The ``""`` row and a metric's, read on the driver's cursor (:mod:`.driverread`): a
read-cache hit's one database statement."""


def read_version(engine: Engine, metric: str) -> tuple[int, int]:
    """The ``""`` row's version and ``metric``'s (0 for a row not yet written)."""
    found = dict(driver_rows(engine, _READ_VERSION, {"any_metric": ANY_METRIC, "metric": metric}))
    return int(found.get(ANY_METRIC, 0)), int(found.get(metric, 0))
