"""Estimates read while the same metric is being written see one consistent snapshot of counts.

Reading n and the support counts in two statements let a commit land between them on
PostgreSQL (READ COMMITTED), so an estimate could pair an old n with newer counts and be
refused with "a count exceeds the number of reports" (seen once under 16-way load). Every
estimate taken during ingestion must succeed; the race itself is too narrow to reproduce on
demand here, so this guards the behaviour rather than proving the fix.
"""

from __future__ import annotations

import threading

import httpx

from deniable.client import MetricSpec
from testkit import RunningCollector, make_reports, register, unique_name


def test_estimates_during_ingestion_always_succeed(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.categorical(unique_name("live"), list("abcdefgh"), epsilon=1.0, mechanism="oue"),
    )
    batches = [
        make_reports(spec, [i % 8 for i in range(200)], "2026-11-21", seed) for seed in range(40)
    ]
    done = threading.Event()
    failures: list[str] = []
    accepted: list[int] = []

    def ingest() -> None:
        try:
            for batch in batches:
                response = uploader.post("/v1/reports", json={"reports": batch})
                if response.status_code != 202:
                    failures.append(f"upload {response.status_code}: {response.text}")
                else:
                    accepted.append(response.json()["accepted"])
        finally:
            done.set()

    writer = threading.Thread(target=ingest)
    writer.start()
    estimates = 0
    while not done.is_set() or estimates == 0:
        response = admin.get(
            f"/v1/metrics/{spec.name}/estimate", params={"start": "2026-11-21", "end": "2026-11-21"}
        )
        estimates += 1
        if response.status_code != 200:
            failures.append(f"estimate {response.status_code}: {response.text}")
    writer.join()
    assert failures == []
    assert sum(accepted) == 40 * 200
    final = admin.get(
        f"/v1/metrics/{spec.name}/estimate", params={"start": "2026-11-21", "end": "2026-11-21"}
    ).json()
    assert final["n"] == 40 * 200
