"""Run the collector under uvicorn, refusing a non-loopback address without an admin token.

Migrations run once here before any worker starts, so workers never race on the schema. With
several workers the Prometheus counters are shared through files in a directory made here,
before any worker imports prometheus_client (see ``telemetry``). The uvicorn configuration is
the hardened one both servers run (:mod:`deniable.service.launch`: no access log, a header
deadline, a header size limit and a connection cap), from the collector's settings;
:func:`server_config` builds it for ``serve`` and the test suite alike.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from deniable.client.errors import DeniableError
from deniable.service import launch
from deniable.service.launch import fit_file_limit, run_server
from deniable.service.listening import is_loopback
from deniable.service.protocol import HardenedConfig

from .listening import DEFAULT_LISTENING, Listening
from .settings import Settings
from .startup import port_problem, summary
from .storage import migrate
from .telemetry import MULTIPROCESS_DIRECTORY


class RefusedToServe(DeniableError, RuntimeError):
    """Serving as asked would expose admin calls without a token, cannot keep metrics, or
    finds its port in use.

    A :class:`~deniable.client.errors.DeniableError`, so the CLI reports it as one line; still
    a ``RuntimeError`` for callers that caught it as one.
    """


APP_FACTORY = "deniable.collector.app:create_app"
"""What each worker process imports to build its app when there are several."""


def server_config(
    app: Any, settings: Settings, listening: Listening = DEFAULT_LISTENING, **changes: Any
) -> HardenedConfig:
    """The uvicorn configuration the collector runs with, from ``settings``, listening as
    ``listening`` says with ``changes`` to its fields (such as ``log_level="warning"``).

    ``app`` is an app, or :data:`APP_FACTORY` for several workers; the rest is the hardened
    launch of :func:`deniable.service.launch.server_config`, with the settings' header timeout,
    connection cap and shutdown timeout.
    """
    return launch.server_config(
        app,
        **asdict(replace(listening, **changes)),
        header_timeout=settings.header_timeout,
        max_connections=settings.max_connections,
        shutdown_timeout=settings.shutdown_timeout,
    )


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


def serve(settings: Settings, listening: Listening = DEFAULT_LISTENING, **changes: Any) -> None:
    """Check the port, migrate, print the start-up summary, then serve the collector where
    ``listening`` says, with ``changes`` to its fields (such as ``host="0.0.0.0"``), with its
    number of worker processes (blocks).

    A port in use is refused (:class:`RefusedToServe`) before the database is touched."""
    from .app import create_app
    from .dashboard.session import REVOCATIONS_VARIABLE
    from .dashboard.session import SECRET_VARIABLE as SESSION_SECRET_VARIABLE

    listening = replace(listening, **changes)
    check_exposure(settings, listening.host)
    problem = port_problem(listening)
    if problem is not None:
        raise RefusedToServe(problem)
    if settings.migrate_on_start:
        migrate(settings.database_url)
    print(summary(settings, listening), file=sys.stderr, flush=True)
    settings = settings.model_copy(
        update={
            "migrate_on_start": False,
            "max_connections": fit_file_limit(settings.max_connections),
        }
    )
    with shared_metrics(listening.workers):
        if listening.workers <= 1:
            run_server(server_config(create_app(settings), settings, listening, workers=1))
            return
        os.environ.update(settings_environment(settings))
        # One dashboard session secret for all workers: a cookie one signed the others accept;
        # one directory of signed-out sessions: a sign-out on one holds on the others.
        os.environ.setdefault(SESSION_SECRET_VARIABLE, secrets.token_hex(32))
        with tempfile.TemporaryDirectory(prefix="deniable-sessions-") as revocations:
            os.environ.setdefault(REVOCATIONS_VARIABLE, revocations)
            run_server(server_config(APP_FACTORY, settings, listening))
