"""Open a shuffled batch's sealed reports into the report objects ``POST /v1/reports`` takes.

A sealed report opens only under its batch's header (metric, mechanism, eps, fingerprint, key
id) with a key of the collector's file (a retired one too), to exactly its metric's padded size; inside is one
report object of that same metric and fingerprint. Anything else is counted as refused and
left out: the shuffler cannot read it and the device is gone, so nobody could send it better.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from deniable.client.sealing import Header, SealingError, decode_sealed, open_sealed, padded_size
from deniable.client.spec import MetricSpec

from .schemas import ShuffledPart
from .sealingkeys import KeyRing


@dataclass
class Opened:
    """The report objects a part's sealed reports held, in the part's order, and how many did
    not open or did not belong to the batch."""

    items: list[dict[str, Any]]
    refused: int


def open_part(part: ShuffledPart, spec: MetricSpec | None, keys: KeyRing) -> Opened:
    """Open every sealed report of ``part`` (``spec``: its metric as registered, None if not)."""
    if spec is None:
        return Opened([], len(part.envelopes))
    size = padded_size(spec)
    openers = keys.opener()
    items: list[dict[str, Any]] = []
    for envelope in part.envelopes:
        private = openers.get(envelope.key)
        if private is None:
            continue
        header = Header(
            part.metric, part.mechanism, float(part.epsilon), part.fingerprint, envelope.key
        )
        try:
            text = open_sealed(header, decode_sealed(envelope.sealed), private, size)
            item = json.loads(text)
        except (SealingError, ValueError, RecursionError):
            continue
        if (
            type(item) is dict
            and item.get("metric") == part.metric
            and item.get("fingerprint") == part.fingerprint
        ):
            items.append(item)
    return Opened(items, len(part.envelopes) - len(items))
