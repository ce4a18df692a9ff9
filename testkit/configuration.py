"""The secrets and settings test collectors run with, whether in a thread or in a process."""

from __future__ import annotations

from typing import Any

from deniable.collector import Settings

ADMIN_TOKEN = "admin-secret-for-tests"
"""The admin token of test collectors."""
INGEST_KEY = "ingest-key-for-tests"
"""The ingest key of test collectors."""
VIEWER_TOKEN = "viewer-secret-for-tests-4b9e"
"""The read-only viewer token (``DENIABLE_VIEWER_TOKEN``) of test collectors that set one:
pass ``viewer_token=VIEWER_TOKEN`` to :func:`collector_settings`."""


def collector_settings(database_url: str, **overrides: Any) -> Settings:
    """Test settings: the given database, an admin token and an ingest key."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_token": ADMIN_TOKEN,
        "ingest_key": INGEST_KEY,
    }
    values.update(overrides)
    return Settings(**values)
