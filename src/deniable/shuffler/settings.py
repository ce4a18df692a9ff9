"""The shuffler's configuration, read from ``DENIABLE_SHUFFLER_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from deniable.service.origins import origins_of
from deniable.service.tokens import read_token_file, token_problem

from .store import Limits

DEFAULT_MIN_BATCH = 1000
"""Reports from this many distinct devices, at least, make a batch by default."""

SECRET_FILES = {"token_file": "token", "upload_key_file": "upload_key"}
"""Settings naming a file that holds a secret (a mounted secret), and the secret each fills."""


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
    upload_key: SecretStr | None = None
    """Key devices must send with ``POST /v1/sealed`` (``Authorization: Bearer``); it ships
    in apps, so it must differ from ``token``. ``deniable shuffle`` refuses to start without
    one."""
    upload_key_previous: SecretStr | None = None
    """The upload key being rotated out, still accepted beside the current one."""
    upload_key_file: Path | None = None
    """File holding the upload key, e.g. a mounted secret (one trailing newline dropped)."""
    keys_refresh: float = Field(default=60.0, gt=0, le=86_400)
    """Seconds between two fetches of the collector's ``GET /v1/keys``, the one key set this
    shuffler serves every device at its own ``GET /v1/keys``."""
    keys_keep: float = Field(default=3600.0, ge=0, le=30 * 86_400)
    """Seconds a key id stays accepted after the shuffler last served it (a device seals to
    the key it fetched up to the SDKs' 10-minute refresh before it sends)."""
    cors_origins: Annotated[list[str], NoDecode] = []
    """Web origins (comma-separated) whose pages may call ``GET /v1/keys`` and
    ``POST /v1/sealed`` across origins; none by default."""
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
    def _read_secret_files(cls, data: Any) -> Any:
        """Fill the token and the upload key from their files, read as the collector reads its
        own (:func:`deniable.service.tokens.read_token_file`: a trailing ``\\n`` or ``\\r\\n``
        dropped)."""
        if not isinstance(data, dict):
            return data
        for file_field, field in SECRET_FILES.items():
            if data.get(file_field) in (None, ""):
                continue
            file_name, name = f"DENIABLE_SHUFFLER_{file_field.upper()}", field.upper()
            if data.get(field) not in (None, ""):
                raise ValueError(f"DENIABLE_SHUFFLER_{name} and {file_name} are both set")
            try:
                secret = read_token_file(data[file_field])
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"{file_name}: cannot read it: {type(exc).__name__}") from None
            data = {**data, field: secret, file_field: None}
        return data

    @field_validator("token", "upload_key", "upload_key_previous")
    @classmethod
    def _strong_token(cls, value: SecretStr | None, info: Any) -> SecretStr | None:
        if value is not None and (problem := token_problem(value.get_secret_value())):
            raise ValueError(f"DENIABLE_SHUFFLER_{info.field_name.upper()} {problem}")
        return value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: Any) -> list[str]:
        return origins_of(value, "DENIABLE_SHUFFLER_CORS_ORIGINS")

    @model_validator(mode="after")
    def _keys_differ(self) -> ShufflerSettings:
        """The upload key ships in apps: equal to the token, every device could forward batches
        to the collector; a previous key alone would leave uploads open."""
        token, keys = self.token_secret(), self.upload_keys()
        if token is not None and token in keys:
            raise ValueError(
                "DENIABLE_SHUFFLER_UPLOAD_KEY equals DENIABLE_SHUFFLER_TOKEN: each role needs its"
                " own token, generate another one"
            )
        if self.upload_key_previous is not None and self.upload_key is None:
            raise ValueError(
                "DENIABLE_SHUFFLER_UPLOAD_KEY_PREVIOUS is set but DENIABLE_SHUFFLER_UPLOAD_KEY is"
                " not: a rotation needs the new value as well"
            )
        return self

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

    def upload_keys(self) -> list[str]:
        """The keys ``POST /v1/sealed`` accepts (current, then previous); empty when open."""
        keys = (self.upload_key, self.upload_key_previous)
        return [
            key.get_secret_value() for key in keys if key is not None and key.get_secret_value()
        ]

    def limits(self) -> Limits:
        """The store's bounds."""
        return Limits(self.max_bytes, self.device_waiting, self.max_wait_hours)

    def token_secret(self) -> str | None:
        """The token, or None when none is set (forwarding is then refused by the collector)."""
        return None if self.token is None else self.token.get_secret_value() or None


def summary(settings: ShufflerSettings, host: str, port: int) -> str:
    """The start-up block ``deniable shuffle`` prints: where it answers, the collector it
    forwards to, its store, whether its token and upload key are set (never their values),
    the minimum batch and the longest delay, one fact a line."""
    shown = f"[{host}]" if ":" in host else host
    token = (
        "set (DENIABLE_SHUFFLER_TOKEN; the collector's must be the same)"
        if settings.token_secret()
        else "none (DENIABLE_SHUFFLER_TOKEN unset: the collector refuses every batch)"
    )
    upload = "set (devices must send it)" if settings.upload_keys() else "none (anyone may upload)"
    return "\n".join(
        (
            f"deniable shuffler on http://{shown}:{port}  (devices: Client(shuffler=...))",
            f"  collector     {settings.collector_url}",
            f"  store         {settings.store}",
            f"  token         {token}",
            f"  upload key    {upload}",
            f"  min batch     {settings.min_batch:,} devices",
            f"  max delay     {settings.max_delay:g} s",
            f"  sealing keys  fetched from {settings.collector_url}/v1/keys every"
            f" {settings.keys_refresh:g} s",
        )
    )
