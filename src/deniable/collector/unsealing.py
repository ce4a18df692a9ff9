"""Open a shuffled batch's sealed reports into the report objects ``POST /v1/reports`` takes.

A sealed report opens only under its batch's header (metric, mechanism, eps, fingerprint, key
id) with a key of the collector's file (a retired one too), to exactly its metric's padded size; inside is one
report object of that same metric and fingerprint. Anything else is counted as refused and
left out: the shuffler cannot read it and the device is gone, so nobody could send it better.

Opening is HPKE per report (an X25519 exchange each), which holds the GIL: a part of at least
:data:`PARALLEL_FROM` reports is opened in slices by a pool of worker processes (one per CPU,
started with a collector that has sealing keys), so the release leg uses every core.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Any

import orjson

from deniable.client.sealing import Header, SealingError, decode_sealed, open_sealed, padded_size
from deniable.client.spec import MetricSpec

from .schemas import ShuffledPart
from .sealingkeys import KeyRing

PARALLEL_FROM = 64
"""The fewest reports of a part opened by the worker pool (below, the pool's round trip costs
more than it saves)."""
_POOL_LOCK = threading.Lock()
_POOL: list[Executor] = []


@dataclass
class Opened:
    """The report texts (JSON objects) a part's sealed reports held, in the part's
    order, and how many did not open or did not belong to the batch."""

    texts: list[str]
    refused: int


def open_workers() -> int:
    """Worker processes for opening: the CPUs this process may use (1 means no pool)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _pool() -> Executor | None:
    """The process pool (spawned, so no lock or thread of this process is copied), or None on
    one CPU."""
    workers = open_workers()
    if workers < 2:
        return None
    with _POOL_LOCK:
        if not _POOL:
            context = multiprocessing.get_context("spawn")
            _POOL.append(ProcessPoolExecutor(workers, mp_context=context))
            atexit.register(_POOL[0].shutdown, cancel_futures=True)
        return _POOL[0]


def start_pool() -> None:
    """Start the pool's workers now, in the background (a collector with sealing keys, at
    startup): each imports its modules for about a second of CPU, which the first large part
    would otherwise wait for."""
    pool = _pool()
    if pool is not None:
        for _ in range(open_workers()):
            pool.submit(os.getpid)


@cache
def _private(raw: bytes) -> Any:
    """An X25519 private key from its raw bytes (each worker builds each key once)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    return X25519PrivateKey.from_private_bytes(raw)


def open_slice(
    header: tuple[str, str, float, str],
    size: int,
    keys: dict[str, bytes],
    envelopes: Sequence[tuple[str, str]],
) -> list[str | None]:
    """Each (key id, sealed) of a slice opened under the batch ``header`` (metric, mechanism,
    eps, fingerprint) with ``keys`` (raw private keys by id): its report as a JSON text, or
    None when it does not open or is not a report of this metric and fingerprint."""
    metric, mechanism, epsilon, fingerprint = header
    headers = {kid: Header(metric, mechanism, epsilon, fingerprint, kid) for kid in keys}
    out: list[str | None] = []
    for key, sealed in envelopes:
        raw = keys.get(key)
        if raw is None:
            out.append(None)
            continue
        try:
            text = open_sealed(headers[key], decode_sealed(sealed), _private(raw), size)
        except SealingError:
            out.append(None)
            continue
        out.append(_report_text(text, metric, fingerprint))
    return out


def _report_text(text: str, metric: str, fingerprint: str) -> str | None:
    """``text`` as the JSON text of one report object, if it is a report of ``metric`` and
    ``fingerprint`` (else None): strict JSON (as orjson reads it) is passed on as it came, one
    JSON value a batch body can hold; anything else is decoded and written again by the
    standard library (a NaN payload then reaches validation, which refuses it by itself)."""
    try:
        item = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            item = json.loads(text)
        except (ValueError, RecursionError):
            return None
        text = json.dumps(item, separators=(",", ":"))
    if (
        type(item) is dict
        and item.get("metric") == metric
        and item.get("fingerprint") == fingerprint
    ):
        return text
    return None


def open_part(part: ShuffledPart, spec: MetricSpec | None, keys: KeyRing) -> Opened:
    """Open every sealed report of ``part`` (``spec``: its metric as registered, None if not),
    in slices on the worker pool when the part is large enough."""
    if spec is None:
        return Opened([], len(part.envelopes))
    size = padded_size(spec)
    private = {kid: key.private_bytes_raw() for kid, key in keys.opener().items()}
    header = (part.metric, part.mechanism, float(part.epsilon), part.fingerprint)
    envelopes = [(e.key, e.sealed) for e in part.envelopes]
    pool = _pool() if len(envelopes) >= PARALLEL_FROM else None
    if pool is None:
        results = open_slice(header, size, private, envelopes)
    else:
        slices = open_workers() * 2
        step = -(-len(envelopes) // slices)
        futures = [
            pool.submit(open_slice, header, size, private, envelopes[i : i + step])
            for i in range(0, len(envelopes), step)
        ]
        results = [text for future in futures for text in future.result()]
    texts = [text for text in results if text is not None]
    return Opened(texts, len(envelopes) - len(texts))
