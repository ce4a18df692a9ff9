"""Run the collector under uvicorn, refusing a non-loopback address without an admin token.

Access logs stay off (they hold client addresses); migrations run once here before any
worker starts, so workers never race on the schema; after SIGTERM in-flight requests get
``settings.shutdown_timeout`` seconds, so a stuck one cannot outlast the orchestrator's grace.
With several workers the Prometheus counters are shared through files in a directory made
here, before any worker imports prometheus_client (see ``telemetry``).

Hostile clients meet the HTTP protocol of :class:`CollectorProtocol`: a connection must send
each request's headers within ``settings.header_timeout`` seconds and in at most
``MAX_HEADER_BYTES``, and past ``settings.max_connections`` open connections a new one gets
503 and is closed at once, so stalled sockets neither pile up file descriptors nor starve
well-formed uploads. :func:`server_config` builds the one uvicorn configuration that both
``serve`` and the test suite run.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import uvicorn
from uvicorn.main import STARTUP_FAILURE
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState
from uvicorn.supervisors import Multiprocess

from deniable.client.errors import DeniableError

from .listening import DEFAULT_LISTENING, Listening
from .settings import Settings
from .startup import port_problem, summary
from .storage import migrate
from .telemetry import MULTIPROCESS_DIRECTORY

log = logging.getLogger("deniable.collector")


class RefusedToServe(DeniableError, RuntimeError):
    """Serving as asked would expose admin calls without a token, cannot keep metrics, or
    finds its port in use.

    A :class:`~deniable.client.errors.DeniableError`, so the CLI reports it as one line; still
    a ``RuntimeError`` for callers that caught it as one.
    """


APP_FACTORY = "deniable.collector.app:create_app"
"""What each worker process imports to build its app when there are several."""

MAX_HEADER_BYTES = 64 * 1024
"""The most bytes a request's line and headers may hold (tokens and the SDK's headers need
well under 2 KiB); past it, 431 and the connection is closed. httptools itself would buffer
a header line without end, and accept any size that arrives in one read."""


class HeadersTooLarge(Exception):
    """Raised inside the parser's callbacks once a request's headers pass ``MAX_HEADER_BYTES``:
    it stops the parse before the app is called, and the protocol answers 431."""


RESERVED_DESCRIPTORS = 256
"""File descriptors kept for everything but client connections: listening sockets, database
connections, SQLite and Prometheus files, logs."""

CAP_WARNING_INTERVAL = 60.0
"""Seconds between two warnings that the connection cap is reached (one line, no address)."""


class CollectorConfig(uvicorn.Config):
    """uvicorn's configuration plus the two limits :class:`CollectorProtocol` enforces."""

    def __init__(self, app: Any, *, header_timeout: float, max_connections: int, **options: Any):
        super().__init__(app, **options)
        self.header_timeout = header_timeout
        self.max_connections = max_connections


def _canned_response(status: int, phrase: str, message: str) -> bytes:
    """A complete HTTP/1.1 answer that closes the connection, for refusals outside the app
    (the API's problem shape, ``{"detail": ...}``)."""
    body = json.dumps({"detail": message}).encode("ascii")
    return (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode("ascii") + body


OVER_CAPACITY = _canned_response(
    503, "Service Unavailable", "too many open connections: retry later"
)
HEADERS_TOO_LARGE = _canned_response(
    431, "Request Header Fields Too Large", f"request headers exceed {MAX_HEADER_BYTES} bytes"
)


class CollectorProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools) with a header deadline, a header size limit
    and a cap on open connections.

    Each request's headers must be complete within ``header_timeout`` seconds of the
    connection opening or of the previous response, else the connection is closed (uvicorn
    only times out idle keep-alive connections, never one that stalls mid-request). A
    connection opened past ``max_connections`` is answered 503 and closed at once, so it holds
    no file descriptor; the connections already open are served as before.
    """

    warned_at: ClassVar[float] = float("-inf")

    def __init__(
        self,
        config: CollectorConfig,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.header_timeout = config.header_timeout
        self.max_connections = config.max_connections
        self.header_deadline: asyncio.TimerHandle | None = None
        self.reading_headers = False
        self.header_bytes = 0
        self.message_began = False
        self.parsed_header_bytes = 0
        self.headers_too_large = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Refuse the connection past the cap; otherwise start the clock for its headers."""
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self._warn_at_cap()
            self._refuse(OVER_CAPACITY)
            return
        self._start_header_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the header clock of a closed connection."""
        self._stop_header_clock()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse ``data``; refuse a request whose headers go on past ``MAX_HEADER_BYTES``."""
        self.message_began = False
        super().data_received(data)
        if not self.reading_headers or self.message_began or self.transport.is_closing():
            return
        self.header_bytes += len(data)
        if self.header_bytes > MAX_HEADER_BYTES:
            self._refuse(HEADERS_TOO_LARGE)

    def on_message_begin(self) -> None:
        """A request line begins: count its header bytes from the next read on, and the
        parsed ones from now."""
        super().on_message_begin()
        self.reading_headers = True
        self.message_began = True
        self.header_bytes = 0
        self.parsed_header_bytes = 0

    def on_url(self, url: bytes) -> None:
        """Count the target's bytes toward the header limit (it may come in pieces)."""
        self._count_parsed(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count a header line (name, value, ``: `` and CRLF) toward the header limit, so
        headers that arrive in one read are held to it too."""
        self._count_parsed(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count_parsed(self, size: int) -> None:
        """Add ``size`` parsed bytes; stop the parse past ``MAX_HEADER_BYTES``."""
        self.parsed_header_bytes += size
        if self.parsed_header_bytes > MAX_HEADER_BYTES:
            self.headers_too_large = True
            raise HeadersTooLarge

    def send_400_response(self, msg: str) -> None:
        """Answer a parse error 400, or 431 when the parse stopped at the header limit."""
        if self.headers_too_large:
            self._refuse(HEADERS_TOO_LARGE)
            return
        super().send_400_response(msg)

    def on_headers_complete(self) -> None:
        """The headers are in: the deadline is met; the app now reads the body on its own."""
        self.reading_headers = False
        self._stop_header_clock()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """After a response, the next request's headers are due within ``header_timeout``."""
        super().on_response_complete()
        idle = self.cycle is None or self.cycle.response_complete
        if idle and not self.transport.is_closing():
            self._start_header_clock()

    def _start_header_clock(self) -> None:
        """Give the connection ``header_timeout`` seconds, from now, to complete its headers."""
        self._stop_header_clock()
        self.header_deadline = self.loop.call_later(self.header_timeout, self._headers_overdue)

    def _stop_header_clock(self) -> None:
        """Cancel the header deadline, if one is running."""
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _headers_overdue(self) -> None:
        """Close a connection whose request headers did not arrive in time."""
        self.header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def _refuse(self, answer: bytes) -> None:
        """Send a canned answer and close the connection."""
        self._stop_header_clock()
        self.transport.write(answer)
        self.transport.close()

    @classmethod
    def _warn_at_cap(cls) -> None:
        """Warn that connections are being refused, at most once per ``CAP_WARNING_INTERVAL``."""
        now = time.monotonic()
        if now - cls.warned_at >= CAP_WARNING_INTERVAL:
            cls.warned_at = now
            log.warning(
                "connection cap reached: new connections get 503 (DENIABLE_MAX_CONNECTIONS)"
            )


def server_config(
    app: Any, settings: Settings, listening: Listening = DEFAULT_LISTENING, **changes: Any
) -> CollectorConfig:
    """The uvicorn configuration the collector runs with, from ``settings``, listening as
    ``listening`` says with ``changes`` to its fields (such as ``log_level="warning"``).

    ``app`` is an app, or :data:`APP_FACTORY` for several workers. Access logs stay off (they
    hold client addresses), proxy headers are ignored, and the protocol is
    :class:`CollectorProtocol` with the settings' header timeout and connection cap.
    """
    where = replace(listening, **changes)
    return CollectorConfig(
        app,
        header_timeout=settings.header_timeout,
        max_connections=settings.max_connections,
        host=where.host,
        port=where.port,
        workers=where.workers,
        factory=isinstance(app, str),
        http=CollectorProtocol,
        ws="none",
        lifespan="on",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        log_level=where.log_level,
        timeout_graceful_shutdown=settings.shutdown_timeout,
    )


def run_server(config: CollectorConfig) -> None:
    """Run uvicorn with ``config`` until stopped, as ``uvicorn.run`` does (several workers
    under its supervisor); exit with uvicorn's start-up failure status if the app did not
    start."""
    server = uvicorn.Server(config)
    try:
        if config.workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            server.run()
    except KeyboardInterrupt:
        pass
    if config.workers == 1 and not server.started:
        sys.exit(STARTUP_FAILURE)


def fit_file_limit(connections: int) -> int:
    """Raise this process's soft open-file limit to fit ``connections`` client connections;
    the number of connections that fit (fewer, with a warning, if the hard limit is lower)."""
    try:
        import resource
    except ImportError:
        return connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = connections + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return connections
    fitting = max(1, soft - RESERVED_DESCRIPTORS)
    log.warning(
        "the open-file limit (%d) fits %d connections, not DENIABLE_MAX_CONNECTIONS=%d:"
        " serving at most %d (raise `ulimit -n` to serve more)",
        soft,
        fitting,
        connections,
        fitting,
    )
    return fitting


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
