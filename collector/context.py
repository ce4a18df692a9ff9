"""What every request handler needs: settings, database, spec cache, telemetry and the clock."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from deniable.client.spec import METRIC_NAME, MetricSpec
from fastapi import Request

from .settings import Settings
from .storage import Database
from .storage.queries import load_spec
from .storage.writer import GroupWriter
from .telemetry import Telemetry

Clock = Callable[[], dt.datetime]
"""Returns the current time (UTC); injectable so tests can place the server in time."""


def utc_now() -> dt.datetime:
    """The real clock."""
    return dt.datetime.now(dt.UTC)


@dataclass
class SpecCache:
    """Registered specs by name, cached after the first read (specs never change)."""

    database: Database
    _specs: dict[str, MetricSpec] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, name: str) -> MetricSpec | None:
        """The spec named ``name``, from the cache or the database; None if unregistered."""
        spec = self._specs.get(name)
        if spec is None and METRIC_NAME.fullmatch(name):
            spec = load_spec(self.database, name)
            if spec is not None:
                with self._lock:
                    self._specs[name] = spec
        return spec


@dataclass
class Collector:
    """The running collector's shared parts, stored on ``app.state.collector``."""

    settings: Settings
    database: Database
    telemetry: Telemetry
    clock: Clock
    specs: SpecCache
    writer: GroupWriter

    def today(self) -> dt.date:
        """The server's current UTC date."""
        now = self.clock()
        if now.tzinfo is not None:
            now = now.astimezone(dt.UTC)
        return now.date()


def collector(request: Request) -> Collector:
    """The collector serving ``request``."""
    return request.app.state.collector
