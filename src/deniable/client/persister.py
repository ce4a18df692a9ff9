"""Durability: moves what the recorder queued into the outbox, with the ledger changes behind it.

The reports, the budget counts (and memo entries) that admitted them and the event state
(day aggregates, the windows reported, the days active) are committed in one SQLite transaction, so after a kill either both exist or neither; a failed commit puts them
back for the next one. A background thread does this every ``persist_interval`` seconds, and
``flush``, ``close`` and the interpreter's exit do it once more.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from .outbox import Outbox
from .recorder import Recorder
from .stats import Counters

log = logging.getLogger("deniable.client")


@dataclass(frozen=True)
class Persister:
    """Commits the recorder's queue to the outbox; :meth:`persist` is safe from any thread.

    Reports are stored in chunks of at most ``chunk_size()`` reports (the uploader's current
    batch cap) and ``max_bytes``; the outbox then keeps at most ``max_queue`` reports besides
    the batch in flight, dropping the oldest (counted in ``dropped_queue_full``).
    """

    recorder: Recorder
    outbox: Outbox
    counters: Counters
    _: KW_ONLY
    max_queue: int
    chunk_size: Callable[[], int]
    max_bytes: int
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """Serializes commits (from the thread, ``flush``, ``close`` and ``atexit``)."""

    def persist(self) -> None:
        """Commit the in-memory queue and its ledger changes in one SQLite transaction."""
        with self.lock:
            reports, delta, events = self.recorder.drain()
            if not reports and not delta and not events:
                return
            try:
                dropped = self.outbox.commit(
                    reports,
                    delta,
                    events=events,
                    max_queue=self.max_queue,
                    per_chunk=self.chunk_size(),
                    max_bytes=self.max_bytes,
                )
            except Exception as exc:
                self.recorder.put_back(reports, delta, events)
                log.warning("could not write the outbox (%s); will retry", type(exc).__name__)
                return
            finally:
                self.recorder.drained()
            if dropped:
                with self.counters.lock:
                    self.counters.dropped_queue_full += dropped
                log.warning("outbox full: dropped the %d oldest reports", dropped)

    def run(self, stop: threading.Event, interval: float, after_commit: Callable[[], None]) -> None:
        """The background thread: persist every ``interval`` seconds until ``stop``, calling
        ``after_commit`` each time (the uploader decides whether to wake)."""
        while not stop.wait(interval):
            self.persist()
            after_commit()
