"""Scale-out for real: ``deniable serve`` processes on loopback sharing one database.

Three collectors on one PostgreSQL ingest concurrently with resends mixed in and must agree
exactly; SDK clients fail over while one collector is SIGKILLed and another, with an upload
in flight, is sent SIGTERM; two uvicorn workers share one SQLite file. Each test makes its
own database and drops it after, and reads it directly to check that every acknowledged
report is stored and counted exactly once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from deniable.client import Client, MetricSpec, SeededRandomness, period_label
from deniable.client.mechanisms import Payload
from testkit import (
    Cluster,
    cluster,
    fresh_database,
    postgres_problem,
    require_postgres,
    run_migrations,
)

ADMIN = "scale-out-admin-token"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
SPECS = (
    MetricSpec.categorical(
        "browser", ["chrome", "firefox", "safari", "edge"], epsilon=1.0, mechanism="krr"
    ),
    MetricSpec.categorical("screen", [f"s{i}" for i in range(8)], epsilon=1.0, mechanism="oue"),
    MetricSpec.categorical("country", [f"c{i}" for i in range(12)], epsilon=2.0, mechanism="olh"),
)

pytestmark = pytest.mark.timeout(120)


require_postgres(postgres_problem())


@pytest.fixture
def database() -> Iterator[str]:
    """A fresh database with the schema migrated, dropped after the test."""
    from deniable.collector import migrate

    with fresh_database("deniable_scaleout") as url:
        migrate(url)
        yield url


@pytest.fixture
def migrated_by_cli() -> Iterator[str]:
    """A fresh database migrated by ``deniable migrate``, as the one-shot deployment step does."""
    with fresh_database("deniable_scaleout") as url:
        assert run_migrations(url, 1) == [0]
        with psycopg.connect(url) as connection:
            versions = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        assert len(versions) == 1
        yield url


def _register(base_url: str) -> None:
    for spec in SPECS:
        response = httpx.post(
            f"{base_url}/v1/metrics", json=spec.to_dict(), headers=AUTH, timeout=10
        )
        assert response.status_code == 201, response.text


def _today(spec: MetricSpec) -> str:
    return period_label(spec.period, dt.datetime.now(dt.UTC))


def _connect(url: str) -> Any:
    """A DB-API connection to the PostgreSQL or SQLite database at ``url``."""
    if url.startswith("sqlite:///"):
        return contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///")))
    return psycopg.connect(url)


def _stored(url: str) -> dict[str, Any]:
    """What the database holds: report rows and the count tables, per metric."""
    with _connect(url) as connection:

        def query(statement: str) -> list[tuple[Any, ...]]:
            return connection.execute(statement).fetchall()

        rows = dict(query("SELECT metric, count(*) FROM reports GROUP BY metric"))
        distinct = query("SELECT count(DISTINCT id) FROM reports")[0][0]
        n = dict(query("SELECT metric, sum(n) FROM period_counts GROUP BY metric"))
        support = {
            (metric, category): value
            for metric, category, value in query(
                "SELECT metric, category, sum(support) FROM support_counts GROUP BY metric, category"
            )
        }
    return {"rows": rows, "distinct": distinct, "n": n, "support": support}


def _estimate(base_url: str, spec: MetricSpec) -> dict[str, Any]:
    period = _today(spec)
    response = httpx.get(
        f"{base_url}/v1/metrics/{spec.name}/estimate",
        params={"start": period, "end": period},
        headers=AUTH,
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()


def _make_reports(per_metric: int) -> list[tuple[dict[str, Any], Payload]]:
    """Randomized reports for every metric of SPECS, as a client would send them."""
    rng = SeededRandomness(20261122)
    reports = []
    for spec in SPECS:
        period = _today(spec)
        for i in range(per_metric):
            payload = spec.randomizer.randomize(i % spec.k, rng)
            report = {
                "id": str(uuid.UUID(bytes=rng.token_bytes(16), version=4)),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": period,
                "payload": payload,
            }
            reports.append((report, payload))
    return reports


def _send_with_resends(urls: list[str], made: list[tuple[dict[str, Any], Payload]]) -> None:
    """POST ``made`` in shuffled batches through ``urls`` from nine threads at once, with whole
    batches resent to another URL and partial batches resent with in-batch repeats."""
    order = SeededRandomness(5)
    shuffled = sorted(made, key=lambda _: order.random())
    batches = [[r for r, _ in shuffled[i : i + 60]] for i in range(0, len(shuffled), 60)]
    sends: list[tuple[str, list[dict[str, Any]]]] = []
    for i, batch in enumerate(batches):
        sends.append((urls[i % len(urls)], batch))
        if i % 3 == 0:
            sends.append((urls[(i + 1) % len(urls)], batch))  # a whole batch resent
        if i % 4 == 0:
            sends.append((urls[(i + 2) % len(urls)], batch[:20] + batch[:5]))  # and twice in one
    sends.sort(key=lambda _: order.random())
    local = threading.local()

    def post(send: tuple[str, list[dict[str, Any]]]) -> tuple[int, dict[str, int]]:
        url, batch = send
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=30)
        response = local.client.post(f"{url}/v1/reports", json={"reports": batch})
        return response.status_code, response.json()

    with ThreadPoolExecutor(max_workers=9) as pool:
        answers = list(pool.map(post, sends))
    assert [status for status, _ in answers] == [202] * len(sends)
    sent = sum(len(batch) for _, batch in sends)
    assert sum(a["accepted"] for _, a in answers) == len(made)
    assert sum(a["accepted"] + a["duplicates"] for _, a in answers) == sent


def _assert_stored_exactly(url: str, made: list[tuple[dict[str, Any], Payload]]) -> Counter[str]:
    """Every report of ``made`` is stored once and counted once, support counts included."""
    stored = _stored(url)
    per_metric = Counter(r["metric"] for r, _ in made)
    assert stored["distinct"] == len(made)
    assert stored["rows"] == dict(per_metric)
    assert stored["n"] == dict(per_metric)
    expected_support: Counter[tuple[str, int]] = Counter()
    by_name = {s.name: s for s in SPECS}
    for report, payload in made:
        for category in by_name[report["metric"]].randomizer.supported(payload):
            expected_support[report["metric"], category] += 1
    assert stored["support"] == {key: value for key, value in expected_support.items() if value}
    return per_metric


def test_three_replicas_ingest_concurrently_and_agree_exactly(migrated_by_cli: str) -> None:
    database = migrated_by_cli
    with cluster(database, 3, ADMIN) as running:
        _register(running.urls[0])
        for base in running.urls[1:]:
            served = httpx.get(f"{base}/v1/metrics", timeout=10).json()["metrics"]
            assert {m["fingerprint"] for m in served} == {s.fingerprint for s in SPECS}
        made = _make_reports(per_metric=600)
        _send_with_resends(running.urls, made)
        per_metric = _assert_stored_exactly(database, made)
        for spec in SPECS:
            answers_by_replica = [_estimate(base, spec) for base in running.urls]
            assert answers_by_replica[0]["n"] == per_metric[spec.name]
            assert answers_by_replica[1] == answers_by_replica[0]
            assert answers_by_replica[2] == answers_by_replica[0]


def test_several_workers_share_one_sqlite_file_safely(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'deniable.db'}"
    migrate_first = {"DENIABLE_MIGRATE_ON_START": "true"}  # serve migrates, then forks workers
    with cluster(url, 1, ADMIN, extra_env=migrate_first, workers=2) as running:
        _register(running.urls[0])
        made = _make_reports(per_metric=200)
        _send_with_resends(running.urls, made)
        per_metric = _assert_stored_exactly(url, made)
        for spec in SPECS:
            assert _estimate(running.urls[0], spec)["n"] == per_metric[spec.name]
        running.collectors[0].signal(signal.SIGTERM)
        assert running.collectors[0].shut_down_gracefully(), running.collectors[0].log_tail()
        workers_done = running.collectors[0].log_tail(200).count("Application shutdown complete")
        assert workers_done == 2, "both workers shut down gracefully"


def _wait_until_refused(running: Cluster, index: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not running.collectors[index].accepts_connections():
            return True
        time.sleep(0.02)
    return False


class SlowUpload:
    """A ``POST /v1/reports`` whose body stops halfway until released: a request in flight."""

    def __init__(self, base_url: str, reports: list[dict[str, Any]]) -> None:
        body = httpx.Request("POST", "/", json={"reports": reports}).content
        self.result: dict[str, Any] = {}
        self._first_half_sent, self._release = threading.Event(), threading.Event()

        def slow_body() -> Iterator[bytes]:
            yield body[: len(body) // 2]
            self._first_half_sent.set()
            self._release.wait(30)
            yield body[len(body) // 2 :]

        def upload() -> None:
            response = httpx.post(
                f"{base_url}/v1/reports",
                content=slow_body(),
                headers={"Content-Type": "application/json"},
                timeout=60,
            )
            self.result = {"status": response.status_code, "body": response.json()}

        self._thread = threading.Thread(target=upload)
        self._thread.start()
        assert self._first_half_sent.wait(10)
        time.sleep(0.3)  # the server has parsed the headers and is reading the body

    def finish(self) -> dict[str, Any]:
        """Send the rest of the body and return the answer."""
        self._release.set()
        self._thread.join(60)
        return self.result


def test_sdk_clients_fail_over_through_sigkill_and_sigterm_and_count_once(
    database: str, tmp_path: Path
) -> None:
    devices, records_each = 6, 600
    with cluster(database, 3, ADMIN) as running:
        _register(running.urls[0])
        urls = running.urls
        clients = [
            Client(
                urls[i % 3 :] + urls[: i % 3],
                state_dir=tmp_path / f"device-{i}",
                metrics=list(SPECS),
                max_reports_per_period=records_each,
                batch_size=50,
                flush_interval=0.05,
                persist_interval=0.05,
                backoff_base=0.05,
                backoff_cap=0.5,
                timeout=5.0,
                randomness=SeededRandomness(i),
            )
            for i in range(devices)
        ]
        queued = [Counter() for _ in clients]
        extra = [r for r, _ in _make_reports(per_metric=50)]

        def record(i: int) -> None:
            for j in range(records_each):
                spec = SPECS[j % len(SPECS)]
                if clients[i].record(spec.name, spec.categories[j % spec.k]):
                    queued[i][spec.name] += 1
                if j % 20 == 19:
                    time.sleep(0.05)

        workers = [threading.Thread(target=record, args=(i,)) for i in range(devices)]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + 20
        while _stored(database)["distinct"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(worker.is_alive() for worker in workers), "the load ended before the faults"
        running.collectors[0].signal(signal.SIGKILL)
        time.sleep(0.3)
        assert any(worker.is_alive() for worker in workers), "the load ended before SIGTERM"
        in_flight = SlowUpload(urls[1], extra)
        terminated = running.collectors[1]
        terminated.signal(signal.SIGTERM)
        assert _wait_until_refused(running, 1), "still accepting connections after SIGTERM"
        assert terminated.process.poll() is None, "exited with a request in flight"
        assert in_flight.finish() == {
            "status": 202,
            "body": {"accepted": len(extra), "duplicates": 0},
        }
        for worker in workers:
            worker.join(60)
        assert running.collectors[0].process.wait(5) == -signal.SIGKILL
        assert terminated.shut_down_gracefully(), terminated.log_tail()

        for client in clients:
            assert client.flush(timeout=30), "a client could not deliver through the survivor"
            client.close()
        total = sum((c for c in queued), Counter())
        recorded = sum(total.values())
        assert recorded == devices * records_each
        total.update(r["metric"] for r in extra)
        for client in clients:
            stats = client.stats
            assert stats.delivered == stats.admitted
            assert stats.dropped_rejected == stats.dropped_queue_full == 0

        stored = _stored(database)
        assert stored["distinct"] == recorded + len(extra)
        assert stored["rows"] == dict(total)
        assert stored["n"] == dict(total)
        for spec in SPECS:
            assert _estimate(running.urls[2], spec)["n"] == total[spec.name]
