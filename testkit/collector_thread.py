"""The collector in a thread of the test process: a real uvicorn server on a loopback port.

In-process servers start fast, share the test's clock and expose the app's state; tests that
kill or signal a collector use ``collector_process`` instead.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import uvicorn

from deniable.collector import Settings, create_app
from deniable.collector.serve import server_config

from .clock import Clock
from .http_clients import authorized_client
from .ports import LOOPBACK, bind_spare, loopback_url

START_TIMEOUT = 30.0
"""Seconds a collector gets to finish starting up."""


class RunningCollector:
    """A real uvicorn server running the collector on a free loopback port, in a thread.

    It runs with the configuration ``deniable serve`` uses (``server_config``): the same
    protocol, header deadline and connection cap.
    """

    def __init__(
        self, settings: Settings, clock: Clock | None = None, *, thin_paths: bool = True
    ) -> None:
        """``thin_paths=False`` answers every route through the whole middleware stack (to
        hold the thin paths to what the stack answers)."""
        self.settings = settings
        self.clock = clock or Clock()
        self.thin_paths = thin_paths
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, port: int = 0) -> RunningCollector:
        """Start serving (on ``port``, or a free one); returns once the app has finished
        starting up."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if port:
            sock.bind((LOOPBACK, port))
        else:
            bind_spare(sock)
        self.url = loopback_url(sock.getsockname()[1])
        self.app = create_app(self.settings, clock=self.clock)
        if not self.thin_paths:
            self.app.fast_paths = ()
        config = server_config(self.app, self.settings, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test collector did not start")
            time.sleep(0.01)
        return self

    def open_connections(self) -> int:
        """How many client connections the server holds open right now."""
        assert self._server is not None, "the collector is not running"
        return len(self._server.server_state.connections)

    def app_state(self) -> Any:
        """The running app's shared state (``deniable.collector.context.Collector``)."""
        return self.app.state.collector

    def stop(self) -> None:
        """Shut the server down gracefully and wait for it."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=30)
        self._server = None
        self._thread = None

    def restart(self) -> None:
        """Stop, then start a new app instance on the same database (new port)."""
        self.stop()
        self.start()

    def client(
        self, token: str | None = None, headers: dict[str, str] | None = None
    ) -> httpx.Client:
        """An httpx client for this server, with a bearer token if given."""
        return authorized_client(self.url, token, headers)
