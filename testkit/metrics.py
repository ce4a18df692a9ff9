"""Test metrics through the collector's API: unique names, registration, randomized reports."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
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


def post_reports(client: httpx.Client, reports: Sequence[dict[str, Any]]) -> httpx.Response:
    """``POST /v1/reports`` with ``reports`` as one batch."""
    return client.post("/v1/reports", json={"reports": list(reports)})


def overlapping_uploads(
    open_client: Callable[[], httpx.Client], reports: Sequence[dict[str, Any]], workers: int = 6
) -> tuple[list[int], list[str]]:
    """Upload ``reports`` from ``workers`` threads at once, each in its own rotation, in
    batches of 100 that all repeat the first 10 reports (odd workers send each batch reversed):
    every report arrives many times, within a batch's group commit and across threads.
    Returns the ``accepted`` count of each 202 and the body of every other answer."""
    accepted: list[int] = []
    errors: list[str] = []
    total = len(reports)

    def worker(offset: int) -> None:
        with open_client() as client:
            for start in range(0, total, 100):
                chunk = list(reports[(start + offset * 50) % total :][:100]) + list(reports[:10])
                response = post_reports(client, chunk[::-1] if offset % 2 else chunk)
                if response.status_code != 202:
                    errors.append(response.text)
                else:
                    accepted.append(response.json()["accepted"])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return accepted, errors


def quantile_holds(entry: dict[str, Any], value: float) -> bool:
    """Whether a histogram document's quantile interval holds ``value`` (a null end is open)."""
    low, high = entry["low"], entry["high"]
    return (low is None or low <= value) and (high is None or value <= high)


def make_text_reports(
    spec: MetricSpec, values: Sequence[str], period: str, seed: int
) -> list[dict[str, Any]]:
    """Reports of a text metric holding ``values``, each device's level drawn as the SDK's
    would be and randomized by the real sketch (seeded); fresh uuid4 ids."""
    sketch = spec.text_randomizer
    rng = SeededRandomness(seed)
    reports = []
    for value in values:
        level = 1 + rng.randbelow(sketch.levels)
        reports.append(
            {
                "id": str(uuid.uuid4()),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": period,
                "payload": sketch.randomize(sketch.encode(value), level, rng),
            }
        )
    return reports
