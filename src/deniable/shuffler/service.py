"""The shuffler's background work: form batches that are ready, wait a random delay, forward.

One thread, started with the app: each round it deletes the reports whose wait has expired
(``max_wait_hours``), finishes the batches a previous run formed but did not forward whole (a
crash, a collector that was down; one the collector refused waits a growing backoff and never
holds up the others, and is deleted, logged at ERROR, ``max_wait_hours`` after its first
refusal), then it looks every ``check_interval`` seconds for batch keys with reports of at
least ``min_batch`` devices, forms the batches (up to :data:`FORM_GROUP` in one transaction)
and forwards each after a uniformly random delay in [0, ``max_delay``] from the OS CSPRNG. Batches are released
whole and never as a stream. Up to :data:`FORWARDERS` batches (each waiting its own delay, each
with its parts in order) are forwarded at once, so the collector opens several parts together
on its cores; a round ends when every batch it started is forwarded, refused or stopped.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from .forwarder import Forwarder, Outcome
from .settings import ShufflerSettings
from .store import Batch, Store

log = logging.getLogger("deniable.shuffler")

_RANDOM = secrets.SystemRandom()
FORWARDERS = 4
"""Batches forwarded at once."""
FORM_GROUP = 32
"""The most batches formed in one transaction: their rows lie spread over the store's pages,
so forming them together writes each page once, not once per batch."""


class Releaser:
    """Forms and forwards batches in a background thread until stopped."""

    def __init__(self, store: Store, settings: ShufflerSettings) -> None:
        self.store = store
        self.settings = settings
        self.forwarder = Forwarder(
            store, settings.collector_url, settings.token_secret(), settings.retry_cap
        )
        self._stop = threading.Event()
        self._refused_lock = threading.Lock()
        self._refused: dict[str, tuple[float, int]] = {}
        """Batches the collector refused: when to try each again, and how often it refused."""
        self._thread = threading.Thread(target=self._run, name="deniable-releaser", daemon=True)

    def _forward(self, batch: Batch) -> Outcome:
        """Forward ``batch``; if the collector refuses it, try it again after a backoff that
        doubles with each refusal up to ``retry_cap`` (other batches go on meanwhile)."""
        outcome = self.forwarder.forward(batch, self._stop)
        if outcome is Outcome.REFUSED:
            self.store.refused(batch)
            with self._refused_lock:
                refusals = self._refused.get(batch.id, (0.0, 0))[1] + 1
                wait = _RANDOM.uniform(0, min(self.settings.retry_cap, 0.1 * 2**refusals))
                self._refused[batch.id] = (time.monotonic() + wait, refusals)
        else:
            with self._refused_lock:
                self._refused.pop(batch.id, None)
        return outcome

    def _delayed(self, batch: Batch) -> Outcome:
        """Wait the batch's random delay, then forward it (STOPPED if stopped meanwhile)."""
        if self._stop.wait(_RANDOM.uniform(0, self.settings.max_delay)):
            return Outcome.STOPPED
        return self._forward(batch)

    def _all(self, jobs: Iterable[Callable[[], Outcome]]) -> bool:
        """Run ``jobs`` on up to :data:`FORWARDERS` threads (a job is taken only when a thread
        is free); False if any was stopped."""
        stopped = False
        with ThreadPoolExecutor(FORWARDERS, thread_name_prefix="deniable-forward") as pool:
            running: set[Future[Outcome]] = set()
            for job in jobs:
                if self._stop.is_set():
                    break
                if len(running) >= FORWARDERS:
                    done, running = _first_done(running)
                    stopped |= any(f.result() is Outcome.STOPPED for f in done)
                running.add(pool.submit(job))
            stopped |= any(f.result() is Outcome.STOPPED for f in running)
        return not stopped and not self._stop.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self.forwarder.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.round()
            except Exception as exc:
                log.error("release round failed (%s); trying again", type(exc).__name__)
            self._stop.wait(self.settings.check_interval)

    def round(self) -> None:
        """Expire, finish unfinished batches, then form and forward every batch that is
        ready."""
        self.store.settle()
        expired = self.store.expire()
        if expired:
            log.info("deleted %d reports that waited past their expiry", expired)
        for key, reports in self.store.expire_refused():
            log.error(
                "deleted a batch of %d reports of %s that the collector refused for"
                " DENIABLE_SHUFFLER_MAX_WAIT_HOURS (%d hours) since its first refusal",
                reports,
                key.metric,
                self.store.limits.max_wait_hours,
            )
        unfinished = self.store.unfinished()
        self._refused = {
            batch.id: self._refused[batch.id] for batch in unfinished if batch.id in self._refused
        }
        due = [
            batch
            for batch in unfinished
            if self._refused.get(batch.id, (0.0, 0))[0] <= time.monotonic()
        ]
        if not self._all(lambda batch=batch: self._forward(batch) for batch in due):
            return
        self._all(lambda batch=batch: self._delayed(batch) for batch in self._formed())

    def _formed(self) -> Iterable[Batch]:
        """Form the batches that are ready, up to :data:`FORM_GROUP` in one transaction, and
        yield them to be forwarded."""
        settings = self.settings
        keys = self.store.waiting_keys(settings.min_batch)
        while keys and not self._stop.is_set():
            formed, keys = self.store.form_batches(
                keys,
                settings.min_batch,
                settings.max_batch,
                settings.max_part,
                settings.part_bytes,
                FORM_GROUP,
            )
            yield from formed


def _first_done(
    running: set[Future[Outcome]],
) -> tuple[set[Future[Outcome]], set[Future[Outcome]]]:
    """(done, still running) once at least one of ``running`` is done."""
    done, pending = wait(running, return_when=FIRST_COMPLETED)
    return set(done), set(pending)
