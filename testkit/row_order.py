"""Row-order statistics shared by the row-order test and its benchmark: which stored neighbours
came from one device, how many chance puts there, and seeded reports of many devices."""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Sequence
from math import comb, sqrt
from typing import Any

from sqlalchemy import text

from deniable.client import MetricSpec, SeededRandomness
from deniable.collector.storage import open_database

from .clock import TEST_NOW

DEVICES = 30
METRICS = 3
PERIOD = TEST_NOW.date().isoformat()
Z_LIMIT = 4.9
"""How far above its chance mean the count may lie before a test fails (STATS §8)."""


def neighbour_moments(devices: int, per_device: int) -> tuple[float, float]:
    """Exact mean and variance of the number of neighbouring pairs from one device, when
    ``devices`` devices' ``per_device`` rows each lie in a uniformly random order.

    With N rows, pair i (rows i, i+1) is from one device with probability p = (m-1)/(N-1);
    two overlapping pairs (three rows) with (m-1)(m-2)/((N-1)(N-2)); two disjoint pairs with
    p times the chance that two of the N-2 other rows share a device, of which the first
    pair's device has m-2 rows left and each other m.
    """
    m, n = per_device, devices * per_device
    pairs = n - 1
    p = (m - 1) / (n - 1)
    overlapping = (m - 1) * (m - 2) / ((n - 1) * (n - 2))
    disjoint = p * ((devices - 1) * m * (m - 1) + (m - 2) * (m - 3)) / ((n - 2) * (n - 3))
    n_overlapping = n - 2
    n_disjoint = comb(pairs, 2) - n_overlapping
    mean = pairs * p
    variance = pairs * p * (1 - p) + 2 * (
        n_overlapping * (overlapping - p * p) + n_disjoint * (disjoint - p * p)
    )
    return mean, variance


def same_device_neighbours(order: Sequence[str], device_of: dict[str, int]) -> int:
    """How many neighbouring rows of ``order`` (report ids) came from one device."""
    devices = [device_of[report_id] for report_id in order]
    return sum(a == b for a, b in itertools.pairwise(devices))


def chance_limit() -> float:
    """The most same-device neighbours a test accepts: the chance mean plus 4.9 sd."""
    mean, variance = neighbour_moments(DEVICES, METRICS)
    return mean + Z_LIMIT * sqrt(variance)


def device_reports(specs: Sequence[MetricSpec], seed: int) -> list[list[dict[str, Any]]]:
    """Each device's reports, one per metric (seeded ids and payloads: the database is new)."""
    rng = random.Random(seed)
    randomness = SeededRandomness(seed)
    return [
        [
            {
                "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": PERIOD,
                "payload": spec.randomizer.randomize(rng.randrange(2), randomness),
            }
            for spec in specs
        ]
        for _ in range(DEVICES)
    ]


def stored_orders(url: str) -> dict[str, list[Any]]:
    """The report ids in each order a reader of the table sees: a plain ``SELECT`` and, on
    PostgreSQL, the physical order (``ctid``, which ``pg_dump`` follows)."""
    database = open_database(url)
    try:
        with database.reader.connect() as connection:
            orders = {"select": list(connection.execute(text("SELECT id FROM reports")).scalars())}
            if database.dialect == "postgresql":
                physical = text("SELECT id FROM reports ORDER BY ctid")
                orders["ctid"] = list(connection.execute(physical).scalars())
    finally:
        database.dispose()
    return orders


def ids_of(rows: Sequence[Any]) -> list[str]:
    """Canonical uuid text of stored ids (SQLite keeps 16 bytes)."""
    return [str(uuid.UUID(bytes=r) if isinstance(r, bytes) else uuid.UUID(str(r))) for r in rows]


def boolean_specs(prefix: str) -> list[MetricSpec]:
    """METRICS boolean specs named ``prefix``_0, _1, ...: one report each per device."""
    return [MetricSpec.boolean(f"{prefix}_{i}", epsilon=1.0) for i in range(METRICS)]
