"""Group commit: one writer thread stores the batches waiting at that moment in one transaction.

A commit costs a disk flush (several milliseconds on SQLite's WAL); sharing it among the
requests that queued up meanwhile multiplies throughput, while each batch is still all or
nothing and each request is answered only after the commit that holds its batch. If a group
fails, its batches are retried one by one, so one batch's fault never fails another. The text
reports its groups appended are folded on a thread of its own (:class:`.BackgroundFolds`),
which first folds whatever an earlier process left pending.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from .engine import Database
from .prepare import PreparedBatch
from .textbacklog import BackgroundFolds, TextBacklog
from .transaction import StoredBatch, store_batches

log = logging.getLogger("deniable.collector")

MAX_GROUP_REPORTS = 10_000
"""A group stops growing past this many reports (keeps each transaction short)."""


@dataclass
class _Job:
    batch: PreparedBatch
    done: Future[StoredBatch] = field(default_factory=Future)


class GroupWriter:
    """Stores validated batches through one writer thread, committing queued batches together."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._backlog = TextBacklog()
        self._folds = BackgroundFolds(database, self._backlog)
        self._thread = threading.Thread(target=self._run, name="deniable-writer", daemon=True)
        self._thread.start()

    def store(self, batch: PreparedBatch) -> StoredBatch:
        """Store one batch; returns after the commit that holds it (raises if it failed)."""
        job = _Job(batch)
        self._queue.put(job)
        return job.done.result()

    def close(self) -> None:
        """Finish the queued work and stop the writer thread, then the fold thread."""
        self._queue.put(None)
        self._thread.join(timeout=60)
        self._folds.close()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            group = [job]
            size = len(job.batch.reports)
            stop = False
            while size < MAX_GROUP_REPORTS:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                group.append(more)
                size += len(more.batch.reports)
            self._commit(group)
            self._folds.after_commit()
            if stop:
                return

    def _commit(self, group: list[_Job]) -> None:
        try:
            results = self._store(group)
        except Exception as exc:
            if len(group) == 1:
                group[0].done.set_exception(exc)
                return
            log.warning(
                "group commit of %d batches failed (%s); retrying one by one",
                len(group),
                type(exc).__name__,
            )
            for job in group:
                self._commit([job])
            return
        for job, result in zip(group, results, strict=True):
            job.done.set_result(result)

    def _store(self, group: list[_Job]) -> list[StoredBatch]:
        return store_batches(self.database, [job.batch for job in group], self._backlog)
