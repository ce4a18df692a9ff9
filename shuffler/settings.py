"""The shuffler's configuration, read from ``DENIABLE_SHUFFLER_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deniable.collector.settings import token_problem
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .store import Limits

DEFAULT_MIN_BATCH = 1000
"""Reports from this many distinct devices, at least, make a batch by default."""


class ShufflerSettings(BaseSettings):
    """Shuffler settings; every field can be set as ``DENIABLE_SHUFFLER_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="DENIABLE_SHUFFLER_",
        extra="ignore",
        hide_input_in_errors=True,
        use_attribute_docstrings=True,
    )

    store: Path = Path("shuffler.db")
    """The shuffler's SQLite file (received, batched and forwarded sealed reports)."""
    collector_url: str = "http://127.0.0.1:8000"
    """Where released batches are forwarded (``POST /v1/shuffled``)."""
    token: SecretStr | None = None
    """The collector's ``DENIABLE_SHUFFLER_TOKEN``, sent with every forwarded part."""
    token_file: Path | None = None
    """File holding the token, e.g. a mounted secret (one trailing newline dropped)."""
    min_batch: int = Field(default=DEFAULT_MIN_BATCH, ge=1, le=10_000_000)
    """A batch is released only once reports of this many distinct devices wait for it."""
    max_batch: int = Field(default=100_000, ge=1, le=10_000_000)
    """The most reports one batch holds (at least ``min_batch``)."""
    max_delay: float = Field(default=60.0, ge=0, le=86_400)
    """A formed batch waits a uniformly random delay in [0, max_delay] seconds (OS CSPRNG)
    before it is forwarded."""
    check_interval: float = Field(default=1.0, gt=0, le=3600)
    """Seconds between looks for batches to form."""
    max_upload: int = Field(default=1000, ge=1, le=100_000)
    """The most sealed reports one device upload may hold (413 past it)."""
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    """The largest upload body read (413 past it)."""
    body_timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds an upload's body gets to arrive (408 past it)."""
    header_timeout: float = Field(default=10.0, gt=0, le=600)
    """Seconds a connection gets to send a request's headers (then it is closed), as the
    collector's protocol enforces it."""
    max_connections: int = Field(default=4096, ge=1, le=1_000_000)
    """Open connections at most; one past it gets 503 and is closed."""
    part_bytes: int = Field(default=900_000, ge=10_000)
    """About the most bytes one forwarded part's body holds (the collector reads 1 MiB)."""
    max_part: int = Field(default=1000, ge=1)
    """The most sealed reports one forwarded part holds (the collector's DENIABLE_MAX_BATCH)."""
    retry_cap: float = Field(default=30.0, gt=0, le=3600)
    """The longest wait between two attempts to forward a part."""
    max_bytes: int = Field(default=1 << 30, ge=1 << 20)
    """The most bytes of pages in use in the store's file: an upload that would pass it is
    refused whole (507) until batches and expiry free room."""
    device_waiting: int = Field(default=1000, ge=1, le=1_000_000)
    """The most reports one device pseudonym may have waiting for a batch (429 past it; at
    least ``max_upload``, so a device with none waiting can always send its largest upload)."""
    max_wait_hours: int = Field(default=168, ge=1, le=24 * 366)
    """Hours a report waits for a batch before it is deleted unsent (the hour of arrival
    rounded up; deleted within the hour after); a forwarded report's id is kept as long, so
    a resend in that time is a duplicate."""

    @model_validator(mode="before")
    @classmethod
    def _read_token_file(cls, data: Any) -> Any:
        """Fill the token from its file (one trailing newline dropped)."""
        if not isinstance(data, dict) or data.get("token_file") in (None, ""):
            return data
        if data.get("token") not in (None, ""):
            raise ValueError(
                "DENIABLE_SHUFFLER_TOKEN and DENIABLE_SHUFFLER_TOKEN_FILE are both set"
            )
        try:
            text = Path(data["token_file"]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(
                f"DENIABLE_SHUFFLER_TOKEN_FILE: cannot read it: {type(exc).__name__}"
            ) from None
        return {**data, "token": text.removesuffix("\n"), "token_file": None}

    @field_validator("token")
    @classmethod
    def _strong_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and (problem := token_problem(value.get_secret_value())):
            raise ValueError(f"DENIABLE_SHUFFLER_TOKEN {problem}")
        return value

    @field_validator("collector_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("DENIABLE_SHUFFLER_COLLECTOR_URL must start with http:// or https://")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _batches(self) -> ShufflerSettings:
        if self.max_batch < self.min_batch:
            raise ValueError(
                "DENIABLE_SHUFFLER_MAX_BATCH must be at least DENIABLE_SHUFFLER_MIN_BATCH"
            )
        if self.device_waiting < self.max_upload:
            raise ValueError(
                "DENIABLE_SHUFFLER_DEVICE_WAITING must be at least DENIABLE_SHUFFLER_MAX_UPLOAD"
                " (else a device's largest upload could never be stored)"
            )
        return self

    def limits(self) -> Limits:
        """The store's bounds."""
        return Limits(self.max_bytes, self.device_waiting, self.max_wait_hours)

    def token_secret(self) -> str | None:
        """The token, or None when none is set (forwarding is then refused by the collector)."""
        return None if self.token is None else self.token.get_secret_value() or None
