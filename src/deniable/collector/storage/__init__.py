"""The collector's storage: tables, engines, migrations, ingestion, count queries, retention.

Code outside the collector (the CLI) uses only what this package root exports: opening a
database, migrating it, and the read queries below; the tables, engine, ingestion (prepare,
kindrows, increments, sqliteupserts, pgupserts, transaction), writer and migrations modules
are private to the collector.
"""

from .engine import Database, open_database
from .migrator import migrate
from .queries import count_reports, load_spec, read_reports, read_sums, report_pages
from .shuffled import batch_groups, read_batches, recent_batches

__all__ = [
    "Database",
    "batch_groups",
    "count_reports",
    "load_spec",
    "migrate",
    "open_database",
    "read_batches",
    "read_reports",
    "read_sums",
    "recent_batches",
    "report_pages",
]
