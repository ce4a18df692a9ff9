"""The client's counters: :class:`Counters` as its parts keep them, :class:`ClientStats` as apps read them.

Every part of the client (recorder, persister, uploader, spec source) adds to one
:class:`Counters` under its lock, so a snapshot is consistent across parts.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field, fields


@dataclass(frozen=True)
class ClientStats:
    """A snapshot of the client's counters (counts of reports or ``record()`` calls, and of
    refused specs).

    Every admitted report ends in exactly one of ``delivered``, ``dropped_queue_full`` and
    ``dropped_rejected``, or is still ``queued``; ``duplicates`` is the part of ``delivered``
    the collector already held (a resend after a lost acknowledgement).
    """

    recorded: int
    """``record()`` calls that took their value: those that returned ``True`` (a report
    queued, or a value held until specs arrive, which ``held`` also counts meanwhile) and
    those the budget refused (``over_budget``). A held value is counted once, when recorded,
    not again when it is randomized."""
    admitted: int
    over_budget: int
    unknown_metric: int
    queued: int
    delivered: int
    duplicates: int
    dropped_queue_full: int
    dropped_rejected: int
    retries: int
    refused: int
    """Upload attempts answered 401, 403, 404 or another 4xx that blames the URL, the ingest
    key or a proxy rather than the reports (a 400 or 422 counts here when it is not the
    collector's own refusal, and a 2xx when it is not its acknowledgement): they are kept and
    retried (each also counts in ``retries``)."""
    specs_refused: int = 0
    """Specs a collector served that this client refused (each name and fingerprint once): a
    change to a spec it had accepted, or an eps above ``max_epsilon``."""
    spec_mismatches: int = 0
    """Metrics passed in code whose spec the collector does not serve as it is (another
    fingerprint, or no spec at all): the collector refuses their reports. Counted once per
    metric, on first contact."""
    held: int = 0
    """Values recorded before any spec arrived, held in memory until specs do."""
    dropped_held: int = 0
    """Held values lost: over the bound (1,000), for a metric the specs that arrived lack, not
    fitting that spec, or still held when the client closed."""

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return asdict(self)


_DERIVED = frozenset({"queued", "held"})
"""The :class:`ClientStats` fields computed at snapshot time rather than counted."""


@dataclass
class Counters:
    """The running counts behind :class:`ClientStats`; change and read them under ``lock``.

    Each field is the :class:`ClientStats` field of the same name.
    """

    recorded: int = 0
    admitted: int = 0
    over_budget: int = 0
    unknown_metric: int = 0
    delivered: int = 0
    duplicates: int = 0
    dropped_queue_full: int = 0
    dropped_rejected: int = 0
    retries: int = 0
    refused: int = 0
    specs_refused: int = 0
    spec_mismatches: int = 0
    dropped_held: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def snapshot(self, queued: int, held: int = 0) -> ClientStats:
        """The counts as a :class:`ClientStats`, with ``queued`` reports not yet acknowledged
        and ``held`` values waiting for specs (call under ``lock``)."""
        counted = {
            f.name: getattr(self, f.name) for f in fields(ClientStats) if f.name not in _DERIVED
        }
        return ClientStats(queued=queued, held=held, **counted)
