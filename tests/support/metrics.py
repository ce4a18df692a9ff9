"""Test metrics through the collector's API: unique names, registration, randomized reports."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import httpx
from deniable.client import MetricSpec, SeededRandomness

from .configuration import ADMIN_TOKEN
from .http_clients import authorized_client


def unique_name(prefix: str = "m") -> str:
    """A metric name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def register(client: httpx.Client, spec: MetricSpec) -> MetricSpec:
    """Register ``spec`` through the API and return the spec the collector resolved."""
    response = client.post("/v1/metrics", json=spec.fingerprint_fields())
    assert response.status_code in (200, 201), response.text
    return MetricSpec.from_dict(response.json())


def register_all(url: str, specs: Iterable[MetricSpec], token: str = ADMIN_TOKEN) -> None:
    """Register ``specs`` on the collector at ``url`` with the admin ``token``."""
    with authorized_client(url, token) as admin:
        for spec in specs:
            register(admin, spec)


def make_reports(
    spec: MetricSpec, values: Sequence[int], period: str, seed: int
) -> list[dict[str, Any]]:
    """Reports of true category indices ``values`` randomized by the real mechanism (seeded).

    Ids are fresh uuid4s: tests share databases, and seeded ids would collide across tests.
    """
    rng = SeededRandomness(seed)
    return [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": period,
            "payload": spec.randomizer.randomize(value, rng),
        }
        for value in values
    ]


def make_numeric_reports(
    spec: MetricSpec, values: Sequence[float], period: str, seed: int
) -> list[dict[str, Any]]:
    """Reports of a numeric metric's true ``values`` (value units), scaled and randomized by
    its real mechanism (seeded); fresh uuid4 ids, as :func:`make_reports`."""
    rng = SeededRandomness(seed)
    mechanism = spec.numeric_randomizer
    return [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": period,
            "payload": mechanism.randomize(spec.scale(value), rng),
        }
        for value in values
    ]
