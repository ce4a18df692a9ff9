"""The collector's storage: tables, engines, migrations, ingestion, count queries, retention."""

from .engine import Database, open_database
from .schema import migrate

__all__ = ["Database", "migrate", "open_database"]
