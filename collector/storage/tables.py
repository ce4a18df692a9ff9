"""The collector's tables: metric registry, raw reports, and the counts estimates read.

Raw reports hold no IP address and no header: only the report's own fields and the day it
arrived. ``period_counts`` and ``support_counts`` are kept up to date in the same transaction
as the report inserts, so an estimate reads at most k counts per period.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Date,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = MetaData(naming_convention=NAMING)

metrics = Table(
    "metrics",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("spec", Text, nullable=False),
    Column("fingerprint", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
"""One row per registered metric; ``spec`` is the canonical JSON of the resolved spec."""

reports = Table(
    "reports",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("metric", String(64), nullable=False),
    Column("period", String(10), nullable=False),
    Column("payload", Text, nullable=False),
    Column("received", Date, nullable=False),
    Index(None, "metric", "period"),
)
"""Raw randomized reports, append-only, unique by id (the idempotency key)."""

period_counts = Table(
    "period_counts",
    metadata,
    Column("metric", String(64), primary_key=True),
    Column("period", String(10), primary_key=True),
    Column("n", BigInteger, nullable=False),
)
"""How many distinct reports each (metric, period) has received."""

support_counts = Table(
    "support_counts",
    metadata,
    Column("metric", String(64), primary_key=True),
    Column("period", String(10), primary_key=True),
    Column("category", Integer, primary_key=True, autoincrement=False),
    Column("support", BigInteger, nullable=False),
)
"""C_v: how many reports of (metric, period) support category v (absent rows are 0)."""
