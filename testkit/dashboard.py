"""The dashboard's test clients: a collector whose dashboard the viewer token signs in to, and a
browser-like httpx client signed in to it (one home for what many dashboard tests need)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

import httpx

from .clock import Clock
from .collector_thread import RunningCollector
from .configuration import VIEWER_TOKEN, collector_settings


class Served(Protocol):
    """Anything that says where a collector answers (a ``RunningCollector``, a test's seeded
    collector)."""

    @property
    def url(self) -> str: ...


@contextlib.contextmanager
def viewer_collector(
    database_url: str, clock: Clock | None = None, **overrides: Any
) -> Iterator[RunningCollector]:
    """A collector on ``database_url`` with the test tokens and the viewer token (settings
    ``overrides`` on top), started for the block and stopped after it."""
    settings = collector_settings(database_url, viewer_token=VIEWER_TOKEN, **overrides)
    server = RunningCollector(settings, clock=clock).start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def signed_in(
    server: Served | str, token: str = VIEWER_TOKEN, timeout: float = 30
) -> Iterator[httpx.Client]:
    """A browser-like client (it keeps cookies and follows no redirect) of ``server``, a
    collector (anything with its ``url``) or its URL, signed in to the dashboard with
    ``token`` (the viewer's)."""
    url = server if isinstance(server, str) else server.url
    with httpx.Client(base_url=url, trust_env=False, timeout=timeout) as client:
        answer = client.post("/dashboard/sign-in", data={"token": token})
        assert answer.status_code == 303, answer.text
        yield client
