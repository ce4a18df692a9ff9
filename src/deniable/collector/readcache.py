"""Estimate documents cached by the query and the version of the counts they read.

The dashboard, the Prometheus scrape and the CLI ask the same questions over unchanged counts;
each answer is kept as its JSON bytes under a key of the document's kind, its arguments, the
server's date and the metric's read version (:mod:`.storage.versions`), read from the database
before the document is made. Every write transaction advances the versions of what it changes
before it commits, so an entry is never served once a write it does not hold is visible, in
this process or any other (replicas share the database, not the cache). A document read under
version v holds at least what v holds; a reader that sees v again sees nothing newer.

The cache is bounded in bytes (``read_cache_bytes``): each entry counts its key's and its
document's bytes plus :data:`ENTRY_OVERHEAD`, the least recently used go first, and a document
larger than an eighth of the bound is not kept. Its lookups are counted on ``/metrics``
(``deniable_read_cache_hits_total`` and ``deniable_read_cache_misses_total``, summed over
workers), so an operator sees whether the dashboard and the scrape are answered from it.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from .storage.versions import read_version

if TYPE_CHECKING:
    from .context import Collector
    from .queries.query import EstimateQuery

ENTRY_OVERHEAD = 320
"""Bytes counted per entry beyond its key's and document's: the two bytes objects' headers
(33 bytes each, and the allocator's rounding), its slots in the ordered dict's table and its
linked-list node; measured at about 260 (tests/collector/test_read_cache.py)."""


class ReadCache:
    """Least recently used documents (JSON bytes) by key (bytes), at most ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> bytes | None:
        """The document kept under ``key``, or None (counted as a hit or a miss)."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: bytes, document: bytes) -> None:
        """Keep copies of ``document`` and ``key``, dropping the least recently used past the
        bound. Copies: orjson's bytes keep the buffer it grew them in (4 to 13 KiB for a few
        hundred bytes), so kept as they are, the memory held was ten times the count."""
        cost = len(key) + len(document) + ENTRY_OVERHEAD
        if cost > self.limit // 8:
            return
        key, document = memoryview(key).tobytes(), memoryview(document).tobytes()
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.size -= len(key) + len(old) + ENTRY_OVERHEAD
            self._entries[key] = document
            self.size += cost
            while self.size > self.limit:
                dropped, value = self._entries.popitem(last=False)
                self.size -= len(dropped) + len(value) + ENTRY_OVERHEAD


Query = TypeVar("Query", bound="EstimateQuery")
Answer = Callable[["Collector", Query], dict[str, Any]]


def render(document: dict[str, Any]) -> bytes:
    """``document`` as the JSON bytes an answer carries (what ``DocumentResponse`` writes)."""
    return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)


def _entry(state: Collector, kind: str, query: EstimateQuery) -> tuple[ReadCache, bytes] | None:
    """The collector's cache and the key of ``query``'s document of ``kind`` (the date, the
    metric's read version, read now); None when nothing is cached (cache off, or a database
    without read versions)."""
    cache: ReadCache | None = getattr(state, "read_cache", None)
    if cache is None or cache.limit == 0:
        return None
    if not state.database.keeps_versions():
        return None
    version = read_version(state.database.reader, query.metric)
    # a frozen dataclass's fields, as orjson writes them (what ``dataclasses.asdict`` gives,
    # without its deep copy of every field)
    return cache, orjson.dumps([kind, state.today().isoformat(), version, query])


def _kept(state: Collector, cache: ReadCache, key: bytes) -> bytes | None:
    """The document kept under ``key``, the lookup counted on ``/metrics``."""
    found = cache.get(key)
    if found is None:
        state.telemetry.read_cache_misses.inc()
    else:
        state.telemetry.read_cache_hits.inc()
    return found


def cached_document(kind: str) -> Callable[[Answer[Query]], Answer[Query]]:
    """Answer a query function ``(state, query)`` of one metric (``query.metric``) from the
    collector's :class:`ReadCache`, keyed by ``kind``, the query's fields, the date and the
    metric's read version; a document it refuses (raises for) is not kept. Callers get a
    fresh copy of the document each time, never the cached one."""

    def wrap(document: Answer[Query]) -> Answer[Query]:
        @functools.wraps(document)
        def cached(state: Collector, query: Query) -> dict[str, Any]:
            entry = _entry(state, kind, query)
            if entry is None:
                return document(state, query)
            cache, key = entry
            found = _kept(state, cache, key)
            if found is not None:
                return orjson.loads(found)
            result = document(state, query)
            try:
                rendered = render(result)
            except orjson.JSONEncodeError:  # not JSON as it stands: answered, not kept
                return result
            cache.put(key, rendered)
            return orjson.loads(rendered)

        return cached

    return wrap


def rendered_document(kind: str, document: Answer[Query], state: Collector, query: Query) -> bytes:
    """What :func:`cached_document` of ``kind`` over ``document`` answers, as the JSON bytes
    an answer carries (:func:`render`): a hit's kept bytes as they are, neither parsed nor
    written again; a miss's bytes kept as they are answered."""
    entry = _entry(state, kind, query)
    if entry is None:
        return render(document(state, query))
    cache, key = entry
    found = _kept(state, cache, key)
    if found is not None:
        return found
    rendered = render(document(state, query))
    cache.put(key, rendered)
    return rendered
