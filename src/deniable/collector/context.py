"""What every request handler needs: settings, database, spec cache, telemetry and the clock."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fastapi import Request

from deniable.client.spec import METRIC_NAME, MetricSpec

from .readcache import ReadCache
from .settings import Settings
from .storage import Database
from .storage.queries import Registration, load_registration, spec_fingerprint
from .storage.writer import GroupWriter
from .telemetry import Telemetry

Clock = Callable[[], dt.datetime]
"""Returns the current time (UTC); injectable so tests can place the server in time."""


def utc_now() -> dt.datetime:
    """The real clock."""
    return dt.datetime.now(dt.UTC)


@dataclass
class SpecCache:
    """Registered specs by name, parsed once and kept while the database holds the same spec.

    A registered spec never changes, but the database can change underneath a running
    collector: dropped and migrated again, a name registered again with another spec. So the
    cache is never the last word. Ingestion reads :meth:`cached`, unchecked, because its write
    transaction checks every fingerprint it stores under: on ``SpecChanged`` the route forgets
    those names (:meth:`forget`) and validates again, and before it refuses a report for its
    fingerprint it asks whether the cached spec is still current (:meth:`changed`). The
    estimate of a range does the same with its count reads. Every other reader uses :meth:`get`, which compares the cached fingerprint with the database's first
    (one primary-key read).
    """

    database: Database
    _specs: dict[str, Registration] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cached(self, name: str) -> MetricSpec | None:
        """The spec named ``name`` as last read (None if unregistered): for ingestion, and for
        the estimate of a range, whose count reads check the fingerprint themselves
        (:func:`.queries.estimate.range_estimate`)."""
        entry = self._specs.get(name) or self._load(name)
        return entry.spec if entry is not None else None

    def archived(self, name: str) -> bool:
        """Whether the metric ``name`` was archived when last read: for ingestion only (its
        write transaction refuses a metric archived since, see :meth:`forget`)."""
        entry = self._specs.get(name) or self._load(name)
        return entry is not None and entry.archived

    def get(self, name: str) -> MetricSpec | None:
        """The spec the database registers as ``name`` now (None if none), parsed once."""
        entry = self._specs.get(name)
        if entry is not None and spec_fingerprint(self.database, name) == entry.fingerprint:
            return entry.spec
        entry = self._load(name)
        return entry.spec if entry is not None else None

    def changed(self, specs: Iterable[MetricSpec]) -> bool:
        """Whether any of ``specs`` is no longer the one registered under its name (every one
        is checked, so the cache holds the current specs afterwards)."""
        stale = False
        for spec in specs:
            current = self.get(spec.name)
            stale |= current is None or current.fingerprint != spec.fingerprint
        return stale

    def forget(self, names: Iterable[str]) -> None:
        """Drop ``names`` from the cache: the database said their specs changed (or that
        they were archived)."""
        with self._lock:
            for name in names:
                self._specs.pop(name, None)

    def _load(self, name: str) -> Registration | None:
        """Read the metric named ``name`` from the database and cache it (or forget a stale one)."""
        entry = load_registration(self.database, name) if METRIC_NAME.fullmatch(name) else None
        with self._lock:
            if entry is None:
                self._specs.pop(name, None)
            else:
                self._specs[name] = entry
        return entry


@dataclass
class Collector:
    """The running collector's shared parts, stored on ``app.state.collector``."""

    settings: Settings
    database: Database
    telemetry: Telemetry
    clock: Clock
    specs: SpecCache
    writer: GroupWriter
    read_cache: ReadCache = field(default_factory=lambda: ReadCache(0))
    """Estimate documents by request and read version (:mod:`.readcache`)."""
    cpu_turn: threading.Semaphore = field(default_factory=threading.Semaphore)
    """Held by a request thread while it parses, validates or prepares a batch: one at a
    time. That work holds the GIL anyway, so taking turns costs it nothing; but with a
    dozen such threads runnable, the writer thread waits behind them for the GIL after
    each of its database calls, and the writer is what bounds ingestion (docs/DESIGN.md,
    "Storage": with two dimensions over 90 periods on SQLite, the median of three runs rose
    from 33,391 to 36,092 reports/s)."""

    def today(self) -> dt.date:
        """The server's current UTC date."""
        now = self.clock()
        if now.tzinfo is not None:
            now = now.astimezone(dt.UTC)
        return now.date()


def collector(request: Request) -> Collector:
    """The collector serving ``request``."""
    return request.app.state.collector
