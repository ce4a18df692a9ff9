"""Run the collector under uvicorn, refusing a non-loopback address without an admin token.

Access logs stay off (they hold client addresses); migrations run once here before any
worker starts, so workers never race on the schema; after SIGTERM in-flight requests get
``settings.shutdown_timeout`` seconds, so a stuck one cannot outlast the orchestrator's grace.
With several workers the Prometheus counters are shared through files in a directory made
here, before any worker imports prometheus_client (see ``telemetry``).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from . import DEFAULT_PORT
from .settings import Settings
from .storage import migrate
from .telemetry import MULTIPROCESS_DIRECTORY


class RefusedToServe(RuntimeError):
    """Serving as asked would expose admin calls without a token, or cannot keep metrics."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings, host: str) -> None:
    """Raise :class:`RefusedToServe` for a non-loopback host without an admin token."""
    if not is_loopback(host) and settings.admin_secret() is None:
        raise RefusedToServe(
            f"refusing to listen on {host} without an admin token: set DENIABLE_ADMIN_TOKEN"
            " (or listen on 127.0.0.1)"
        )


def settings_environment(settings: Settings) -> dict[str, str]:
    """``DENIABLE_*`` variables that reproduce ``settings`` in a worker process."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        if hasattr(value, "get_secret_value"):
            value = value.get_secret_value()
        env[f"DENIABLE_{name.upper()}"] = (
            str(value).lower() if isinstance(value, bool) else str(value)
        )
    return env


def clear_metrics_directory(path: Path) -> None:
    """Make ``path`` an empty prometheus_client directory: stale files would add old counts.

    Only prometheus_client's ``*.db`` files are deleted; anything else is left alone.
    """
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
    except OSError as exc:
        raise RefusedToServe(
            f"{MULTIPROCESS_DIRECTORY}={path} is not a usable directory: {exc.strerror}"
        ) from None


@contextmanager
def shared_metrics(workers: int) -> Iterator[None]:
    """Give the workers one directory for Prometheus metrics while the server runs.

    An operator's ``PROMETHEUS_MULTIPROC_DIR`` is cleared and kept; otherwise, with several
    workers, a private directory (mode 0700) is made, exported before the workers start (they
    are spawned, so they inherit it), and removed with its files when the server exits.
    """
    given = os.environ.get(MULTIPROCESS_DIRECTORY)
    if given:
        clear_metrics_directory(Path(given))
    if given or workers <= 1:
        yield
        return
    made = tempfile.mkdtemp(prefix="deniable-metrics-")
    os.environ[MULTIPROCESS_DIRECTORY] = made
    try:
        yield
    finally:
        os.environ.pop(MULTIPROCESS_DIRECTORY, None)
        shutil.rmtree(made, ignore_errors=True)


def serve(
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    workers: int = 1,
    log_level: str = "info",
) -> None:
    """Migrate, then serve the collector on ``host:port`` with ``workers`` processes (blocks)."""
    from .app import create_app

    check_exposure(settings, host)
    if settings.migrate_on_start:
        migrate(settings.database_url)
    settings = settings.model_copy(update={"migrate_on_start": False})
    options: dict[str, object] = {
        "host": host,
        "port": port,
        "access_log": False,
        "proxy_headers": False,
        "server_header": False,
        "log_level": log_level,
        "timeout_graceful_shutdown": settings.shutdown_timeout,
    }
    with shared_metrics(workers):
        if workers <= 1:
            uvicorn.run(create_app(settings), **options)  # type: ignore[arg-type]
            return
        os.environ.update(settings_environment(settings))
        uvicorn.run("deniable.collector.app:create_app", factory=True, workers=workers, **options)  # type: ignore[arg-type]
