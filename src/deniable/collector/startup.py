"""What a collector checks and says before it serves: the port is free, then one summary block.

The port is tried before the database is touched, so a port in use fails in one line instead
of after a migration (and an SQLite file created for nothing) and uvicorn's start-up log. The
summary says where the collector answers, on which database (never its password), whether
admin calls and uploads need a secret, how long reports are kept, and what a shuffler finds:
the sealing keys loaded, whether its token is set (never the token) and the minimum batch.
"""

from __future__ import annotations

import errno
import socket

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from .listening import Listening
from .sealingkeys import KeyFileError, current_key, read_keys
from .settings import Settings


def port_problem(listening: Listening) -> str | None:
    """Why ``listening``'s address and port cannot be bound now (in use), or None.

    Binds (with ``SO_REUSEADDR``, as uvicorn does, so a closed connection in TIME_WAIT does
    not count) every address the host resolves to, then lets go. Port 0 (any free port) is
    never in use; any other failure (a host that does not resolve, an address not here) is
    left for the server to report.
    """
    if listening.port == 0:
        return None
    try:
        addresses = socket.getaddrinfo(
            listening.host, listening.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        return None
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return (
                        f"port {listening.port} on {listening.host} is already in use: stop"
                        " what listens there or choose another --port"
                    )
    return None


def public_database(database_url: str) -> str:
    """The database URL with its password masked (``***``), fit for a log line."""
    try:
        return make_url(database_url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(unparsable database URL)"


def sealing_keys_text(settings: Settings) -> str:
    """The sealing keys as the summary states them: how many the file holds and the current
    one's id, none (sealed reports cannot be opened), or why the file cannot be used."""
    path = settings.sealing_keys_file
    if path is None:
        return "none (DENIABLE_SEALING_KEYS_FILE unset: shuffled reports cannot be opened)"
    try:
        keys = read_keys(path)
        current = current_key(keys).id
    except KeyFileError as exc:
        return f"unusable: {exc}"
    return f"{len(keys)} loaded from {path} (current {current})"


def shuffler_text(settings: Settings) -> str:
    """Whether a shuffler may forward batches: its token set or not (never the token), and the
    smallest batch accepted."""
    if not settings.shuffler_tokens():
        return "token none (DENIABLE_SHUFFLER_TOKEN unset: POST /v1/shuffled refuses every call)"
    return f"token set, min batch {settings.shuffle_min_batch:,} devices"


def summary(settings: Settings, listening: Listening) -> str:
    """The start-up block: URL, API docs, database, auth, retention, sealing keys and the
    shuffler's token and minimum batch, one fact a line."""
    host = f"[{listening.host}]" if ":" in listening.host else listening.host
    url = f"http://{host}:{listening.port}"
    admin = "set" if settings.admin_secret() else "none (admin calls are open: loopback only)"
    ingest = (
        "set (devices must send it)" if settings.ingest_secret() else "none (anyone may upload)"
    )
    if settings.viewer_secret() and settings.admin_secret():
        viewer = "set (it reads and signs in to the dashboard)"
    else:
        viewer = "none (reads need the admin token)" if settings.admin_secret() else "none (open)"
    days = settings.retention_days
    return "\n".join(
        (
            f"deniable collector on {url}  (API docs: {url}/docs)",
            f"  database      {public_database(settings.database_url)}",
            f"  dashboard     {url}/dashboard/",
            f"  admin token   {admin}",
            f"  viewer token  {viewer}",
            f"  ingest key    {ingest}",
            f"  retention     {days} days (older reports are refused and deleted by retention)",
            f"  sealing keys  {sealing_keys_text(settings)}",
            f"  shuffler      {shuffler_text(settings)}",
            f"  workers       {listening.workers}",
        )
    )
