"""Which INSERT construct a SQL dialect takes: PostgreSQL's or SQLite's, both with
``ON CONFLICT``. One place for the choice, so a statement built once per dialect (the read
versions' and the arrivals' upserts, kept by :func:`functools.cache`) and
:meth:`.engine.Database.insert` choose alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Insert
from sqlalchemy.dialects import postgresql, sqlite


def insert_of(dialect: str) -> Callable[[Any], Insert]:
    """``dialect``'s INSERT construct (``postgresql``'s for PostgreSQL, else SQLite's)."""
    return postgresql.insert if dialect == "postgresql" else sqlite.insert
