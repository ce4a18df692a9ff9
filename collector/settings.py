"""The collector's configuration, read from ``DENIABLE_*`` environment variables.

One object holds every knob (database, pool, tokens, limits, retention, shutdown), so the app
factory, the ``serve`` helper and the CLI agree on names and defaults.
"""

from __future__ import annotations

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .storage.engine import DEFAULT_POOL_SIZE

DEFAULT_DATABASE_URL = "sqlite:///deniable.db"
"""An SQLite file in the working directory: zero set-up (WAL mode)."""

DEFAULT_SHUTDOWN_TIMEOUT = 25
"""Seconds in-flight requests get after SIGTERM: inside Kubernetes' default 30 s grace period."""


class Settings(BaseSettings):
    """Collector settings; every field can be set as ``DENIABLE_<FIELD>`` in the environment.

    ``admin_token_previous`` and ``ingest_key_previous`` are accepted besides the current token
    and key while a rotation is under way (docs/operations.md, token rotation).
    """

    model_config = SettingsConfigDict(
        env_prefix="DENIABLE_", extra="ignore", hide_input_in_errors=True
    )

    database_url: str = DEFAULT_DATABASE_URL
    pool_size: int = Field(default=DEFAULT_POOL_SIZE, ge=1, le=1000)
    admin_token: SecretStr | None = None
    admin_token_previous: SecretStr | None = None
    ingest_key: SecretStr | None = None
    ingest_key_previous: SecretStr | None = None
    retention_days: int = Field(default=90, ge=1, le=36500)
    max_batch: int = Field(default=1000, ge=1)
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    migrate_on_start: bool = True
    max_range_periods: int = Field(default=1100, ge=1)
    shutdown_timeout: int = Field(default=DEFAULT_SHUTDOWN_TIMEOUT, ge=1, le=3600)

    @model_validator(mode="after")
    def _previous_needs_current(self) -> Settings:
        """A previous token alone would leave the current role open: refuse it."""
        pairs = (
            ("admin_token", self.admin_token, self.admin_token_previous),
            ("ingest_key", self.ingest_key, self.ingest_key_previous),
        )
        for name, current, previous in pairs:
            if _secret(previous) is not None and _secret(current) is None:
                raise ValueError(
                    f"DENIABLE_{name.upper()}_PREVIOUS is set but DENIABLE_{name.upper()} is not:"
                    " a rotation needs the new value as well"
                )
        return self

    def admin_tokens(self) -> list[str]:
        """Tokens accepted for admin calls (current, then previous); empty when admin calls are
        open (loopback only)."""
        return _present(self.admin_secret(), _secret(self.admin_token_previous))

    def ingest_tokens(self) -> list[str]:
        """Tokens accepted for uploads: the ingest keys or the admin tokens; empty when open."""
        keys = _present(self.ingest_secret(), _secret(self.ingest_key_previous))
        return [] if not keys else [*keys, *self.admin_tokens()]

    def admin_secret(self) -> str | None:
        """The admin token, or None when admin calls are open (loopback development only)."""
        return _secret(self.admin_token)

    def ingest_secret(self) -> str | None:
        """The ingest key, or None when uploads need no key."""
        return _secret(self.ingest_key)


def _secret(value: SecretStr | None) -> str | None:
    if value is None:
        return None
    text = value.get_secret_value()
    return text or None


def _present(current: str | None, previous: str | None) -> list[str]:
    """``current`` and ``previous`` where set (``previous`` only alongside ``current``)."""
    if current is None:
        return []
    return [current] if previous is None or previous == current else [current, previous]
