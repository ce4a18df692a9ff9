"""The collector's configuration, read from ``DENIABLE_*`` environment variables.

One object holds every knob (database, pool, tokens, limits, retention, shutdown), so the app
factory, the ``serve`` helper and the CLI agree on names and defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from deniable.service.listening import DEFAULT_SHUTDOWN_TIMEOUT
from deniable.service.origins import origins_of
from deniable.service.tokens import read_token_file, token_problem

DEFAULT_DATABASE_URL = "sqlite:///deniable.db"
"""An SQLite file in the working directory: zero set-up (WAL mode)."""

DEFAULT_POOL_SIZE = 5
"""Connections per engine: 12 PostgreSQL replicas hold at most 60 of the default 100."""

TOKEN_ROLES = {
    "admin": ("admin_token", "admin_token_previous"),
    "viewer": ("viewer_token",),
    "ingest": ("ingest_key", "ingest_key_previous"),
    "shuffler": ("shuffler_token",),
}
"""The settings each role's tokens live in; a value may serve one role only."""

DEFAULT_RETENTION_DAYS = 90
"""Days raw reports are kept by default, and how late a report may arrive."""

MAX_RANGE_PERIODS = 1100
"""The most periods an estimate's range may hold by default (three years of days): the API
and the CLI's offline estimates refuse longer ranges alike."""

MAX_SERIES_CELLS = 50_000
"""The most periods × categories one series answers by default: about 6 MB of JSON, under a
second, tens of MB of memory (181 periods of a 10,000-category metric, 1.8 million cells, took
1.7 GB and 23 s before the limit)."""

MAX_ESTIMATE_CELLS = 2_000_000
"""The most periods × categories of counts one estimate reads by default (16 MB of counts)."""

DASHBOARD_PAGE_METRICS = 25
"""Metrics per page of the dashboard's overview by default."""

TOKEN_FIELDS = (
    "admin_token",
    "admin_token_previous",
    "viewer_token",
    "ingest_key",
    "ingest_key_previous",
    "shuffler_token",
)
"""The settings that hold secrets devices or operators present as bearer tokens."""

TOKEN_FILES = {
    "admin_token_file": "admin_token",
    "viewer_token_file": "viewer_token",
    "ingest_key_file": "ingest_key",
    "shuffler_token_file": "shuffler_token",
}
"""Settings naming a file that holds a token (a mounted secret), and the token each fills."""


MIN_SLICE_REPORTS = 100
"""The default :attr:`Settings.min_slice_reports`: below about 100 reports a slice's
randomized estimate is mostly noise (at eps = 1 its interval spans most of [0, 1]), and a
small slice of public attributes (one app version in one country) singles out few people."""


class Settings(BaseSettings):
    """Collector settings; every field can be set as ``DENIABLE_<FIELD>`` in the environment.

    ``admin_token_previous`` and ``ingest_key_previous`` are accepted besides the current token
    and key while a rotation is under way (docs/operations.md, token rotation).
    """

    model_config = SettingsConfigDict(
        env_prefix="DENIABLE_",
        extra="ignore",
        hide_input_in_errors=True,
        use_attribute_docstrings=True,
    )

    database_url: str = DEFAULT_DATABASE_URL
    """Where metrics, reports and counts are stored: sqlite:///FILE, postgresql://USER@HOST/DB,
    or a plain file path (an SQLite file)."""
    pool_size: int = Field(default=DEFAULT_POOL_SIZE, ge=1, le=1000)
    """Most database connections each worker process holds."""
    admin_token: SecretStr | None = None
    """Token for admin calls (registering and archiving metrics, export, retention); it reads
    estimates too but never signs in to the dashboard. Without one every call is open, so the
    collector listens on loopback only."""
    admin_token_previous: SecretStr | None = None
    """The admin token being rotated out, still accepted beside the current one."""
    viewer_token: SecretStr | None = None
    """Read-only token (estimates, series, the privacy account) and the one that signs in to the
    dashboard: it never registers, archives, exports or deletes; it must differ from the admin
    token and the ingest key."""
    ingest_key: SecretStr | None = None
    """Key devices must send with reports (the admin token is accepted too); none: open. It
    ships in apps, so it must differ from the admin and viewer tokens."""
    ingest_key_previous: SecretStr | None = None
    """The ingest key being rotated out, still accepted beside the current one."""
    admin_token_file: Path | None = None
    """File holding the admin token, e.g. a mounted secret (one trailing newline dropped)."""
    viewer_token_file: Path | None = None
    """File holding the viewer token, e.g. a mounted secret (one trailing newline dropped)."""
    ingest_key_file: Path | None = None
    """File holding the ingest key, e.g. a mounted secret (one trailing newline dropped)."""
    retention_days: int = Field(default=DEFAULT_RETENTION_DAYS, ge=1, le=36500)
    """Days raw reports are kept, and how late they may arrive."""
    max_batch: int = Field(default=1000, ge=1)
    """The most reports one upload may carry."""
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    """The largest request body a route reads (an upload, a metric registration); 413 past it."""
    migrate_on_start: bool = True
    """Apply the database migrations before serving (off when a separate job runs them)."""
    max_range_periods: int = Field(default=MAX_RANGE_PERIODS, ge=1)
    """The most periods an estimate or series range may hold."""
    max_series_cells: int = Field(default=MAX_SERIES_CELLS, ge=100)
    """The most periods × categories one series answers (the API's ``/series``, a dashboard
    metric page and its CSVs, an overview page): 422 past it, naming the limit."""
    max_estimate_cells: int = Field(default=MAX_ESTIMATE_CELLS, ge=100)
    """The most periods × categories of stored counts one estimate reads: 422 past it (a
    breakdown: slices × periods × categories)."""
    min_slice_reports: int = Field(default=MIN_SLICE_REPORTS, ge=1)
    """The fewest reports a slice of a breakdown needs to be shown; a smaller slice says
    "suppressed" and never a number, not even its count (docs/privacy.md, "Dimensions")."""
    dashboard_page_metrics: int = Field(default=DASHBOARD_PAGE_METRICS, ge=1, le=1000)
    """The most metrics one page of the dashboard's overview shows."""
    max_concurrent_reads: int = Field(default=4, ge=1, le=256)
    """Estimates, series, privacy accounts and dashboard pages one process computes at once
    (collector/readgate.py): each is bounded, and this bounds their sum."""
    max_reads_per_metric: int = Field(default=2, ge=1, le=256)
    """Of those, the most that read one metric (or one path reading no single metric: the
    scrape, the overview): one metric's expensive reads then leave the other slots to other
    metrics' (collector/readgate.py). Above ``max_concurrent_reads`` it is that. The reads
    of no single metric together take at most ``max_concurrent_reads`` less this less one
    (at least one), so they cannot fill the slots one metric leaves."""
    read_cache_bytes: int = Field(default=32 << 20, ge=0, le=1 << 34)
    """Bytes of estimate documents one process keeps to answer a repeated read (the
    dashboard, the scrape and the CLI ask the same questions) until a write changes what it
    read (collector/readcache.py); 0 keeps none. Keys, documents and a fixed allowance per
    entry count; a document over an eighth of it is not kept."""
    read_queue_timeout: float = Field(default=10.0, gt=0, le=600)
    """Seconds a read waits for its turn before it is answered 503 with Retry-After."""
    shutdown_timeout: int = Field(default=DEFAULT_SHUTDOWN_TIMEOUT, ge=1, le=3600)
    """Seconds in-flight requests get after SIGTERM."""
    header_timeout: float = Field(default=10.0, gt=0, le=600)
    """Seconds a connection gets to send a request's headers, from its opening or the previous
    response; then it is closed (stalled sockets must not hold file descriptors)."""
    body_timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds a route gets to read a whole request body once the headers are in; then 408."""
    max_connections: int = Field(default=4096, ge=1, le=1_000_000)
    """Open connections per process; a connection past it gets 503 and is closed at once."""
    shuffler_token: SecretStr | None = None
    """Token the shuffler (``deniable shuffle``) forwards released batches with; the only one
    ``POST /v1/shuffled`` accepts (none: that route refuses every call)."""
    shuffler_token_file: Path | None = None
    """File holding the shuffler token, e.g. a mounted secret (one trailing newline dropped)."""
    sealing_keys_file: Path | None = None
    """The collector's sealing keys (``deniable keys generate``; a JSON file of mode 0600):
    its current public key is served at ``GET /v1/keys``, and its keys open sealed reports."""
    sealing_key_grace_days: int = Field(default=30, ge=0, le=3650)
    """Days a rotated-out sealing key is still served at ``GET /v1/keys`` (not current); it
    opens the reports sealed to it for as long as it is in the keys file, since the shuffler
    may hold them longer than any grace period."""
    shuffle_min_batch: int = Field(default=1, ge=1)
    """The smallest shuffled batch ``POST /v1/shuffled`` accepts (set it to the shuffler's
    ``min_batch``: a smaller batch is refused 422, whoever sent it)."""
    cors_origins: Annotated[list[str], NoDecode] = []
    """Web origins (``https://app.example``, comma-separated) whose pages may call the device
    routes (``GET /v1/metrics``, ``GET /v1/keys``, ``POST /v1/reports``) across origins; none
    by default (a page then reaches the collector on its own origin)."""
    prometheus_metric_labels: bool = False
    """Label ``/metrics`` counts by metric name (off: one ``all`` label; the endpoint is open)."""

    @field_validator("database_url")
    @classmethod
    def _path_as_url(cls, value: str) -> str:
        """A plain file path (``./collector.db``) means an SQLite file: ``sqlite:///ABS_PATH``."""
        return database_url_of(value)

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: Any) -> list[str]:
        return origins_of(value, "DENIABLE_CORS_ORIGINS")

    @model_validator(mode="before")
    @classmethod
    def _read_token_files(cls, data: Any) -> Any:
        """Fill a token from its file (one trailing newline dropped), so it stays out of ``ps``."""
        if not isinstance(data, dict):
            return data
        for file_field, token_field in TOKEN_FILES.items():
            path = data.get(file_field)
            if path in (None, ""):
                continue
            if data.get(token_field) not in (None, ""):
                raise ValueError(
                    f"DENIABLE_{token_field.upper()} and DENIABLE_{file_field.upper()} are both"
                    " set: give one"
                )
            try:
                token = read_token_file(path)
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(
                    f"DENIABLE_{file_field.upper()}: cannot read {path}: {type(exc).__name__}"
                ) from None
            data = {**data, token_field: token, file_field: None}
        return data

    @field_validator(*TOKEN_FIELDS)
    @classmethod
    def _strong_token(cls, value: SecretStr | None, info: Any) -> SecretStr | None:
        """Refuse a token that is short, padded with whitespace or a documentation placeholder."""
        if value is None or not value.get_secret_value():
            return value
        problem = token_problem(value.get_secret_value())
        if problem is not None:
            raise ValueError(f"DENIABLE_{info.field_name.upper()} {problem}")
        return value

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

    @model_validator(mode="after")
    def _roles_differ(self) -> Settings:
        """One value in two roles would give every holder of the weaker one the stronger one
        (an app's ingest key equal to the admin token makes every device an admin): refuse
        it, naming both settings."""
        seen: dict[str, tuple[str, str]] = {}
        for role, fields in TOKEN_ROLES.items():
            for name in fields:
                value = _secret(getattr(self, name))
                if value is None:
                    continue
                other = seen.get(value)
                if other is not None and other[0] != role:
                    raise ValueError(
                        f"DENIABLE_{name.upper()} equals the {other[0]} token"
                        f" (DENIABLE_{other[1].upper()}): each role needs its own token,"
                        " generate another one"
                    )
                seen.setdefault(value, (role, name))
        return self

    def admin_tokens(self) -> list[str]:
        """Tokens accepted for admin calls (current, then previous); empty when admin calls are
        open (loopback only)."""
        return _present(self.admin_secret(), _secret(self.admin_token_previous))

    def viewer_tokens(self) -> list[str]:
        """Tokens accepted for reads (estimates, series, the dashboard): the viewer token and
        the admin tokens; empty when reads are open, as admin calls are (no admin token)."""
        admins = self.admin_tokens()
        if not admins:
            return []
        viewer = self.viewer_secret()
        return [viewer, *admins] if viewer is not None else admins

    def viewer_secret(self) -> str | None:
        """The viewer token, or None when none is configured."""
        return _secret(self.viewer_token)

    def ingest_tokens(self) -> list[str]:
        """Tokens accepted for uploads: the ingest keys or the admin tokens; empty when open."""
        keys = _present(self.ingest_secret(), _secret(self.ingest_key_previous))
        return [] if not keys else [*keys, *self.admin_tokens()]

    def shuffler_tokens(self) -> list[str]:
        """The token ``POST /v1/shuffled`` accepts (empty: none is configured, and the route
        refuses every call)."""
        return _present(_secret(self.shuffler_token), None)

    def admin_secret(self) -> str | None:
        """The admin token, or None when admin calls are open (loopback development only)."""
        return _secret(self.admin_token)

    def ingest_secret(self) -> str | None:
        """The ingest key, or None when uploads need no key."""
        return _secret(self.ingest_key)


def database_url_of(value: str) -> str:
    """``value`` if it is a URL (it has a scheme), else the URL of the SQLite file at that path
    (made absolute, so the URL names the same file whatever the working directory)."""
    if "://" in value or not value.strip():
        return value
    return f"sqlite:///{Path(value).expanduser().resolve()}"


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


def settings_problem(error: ValidationError) -> str:
    """One line naming each invalid setting and why, for a start-up error (never the value)."""
    parts = []
    for item in error.errors(include_url=False, include_input=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        field = ".".join(str(part) for part in item["loc"])
        parts.append(
            message
            if not field or "DENIABLE_" in message
            else f"DENIABLE_{field.upper()}: {message}"
        )
    return "invalid collector setting: " + "; ".join(parts)
