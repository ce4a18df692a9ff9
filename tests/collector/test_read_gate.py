"""The read gate: at most ``limit`` heavy reads run at once; one kept waiting too long gets 503
naming the setting; uploads and health checks never wait (issue 24: 50 concurrent copies of a
bounded read must not add up past the pod's memory)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from deniable.collector.readgate import ReadGate, is_heavy_read, read_group, unscoped_limit
from testkit import ADMIN_TOKEN, RunningCollector, collector_settings


def gated_app(release: threading.Event, entered: threading.Semaphore) -> ReadGate:
    """A gate of one slot around an app whose reads block until ``release`` is set."""

    def read(request: Request) -> PlainTextResponse:
        entered.release()
        release.wait(30)
        return PlainTextResponse("read")

    def upload(request: Request) -> PlainTextResponse:
        return PlainTextResponse("stored", status_code=202)

    inner = Starlette(
        routes=[
            Route("/v1/metrics/m/estimate", read),
            Route("/v1/reports", upload, methods=["POST"]),
        ]
    )
    return ReadGate(inner, limit=1, wait=0.2)


def test_a_read_past_the_limit_waits_then_gets_503_while_uploads_pass() -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    transport = httpx.ASGITransport(app=gated_app(release, entered))

    async def scenario() -> tuple[int, httpx.Response, int, int]:
        async with httpx.AsyncClient(transport=transport, base_url="http://gate") as client:
            first = asyncio.create_task(client.get("/v1/metrics/m/estimate"))
            await asyncio.to_thread(entered.acquire, True, 30)  # the first read holds the slot
            second = await client.get("/v1/metrics/m/estimate")
            upload = await client.post("/v1/reports")
            release.set()
            third_status = (await client.get("/v1/metrics/m/estimate")).status_code
            return (await first).status_code, second, upload.status_code, third_status

    first, second, upload, third = asyncio.run(scenario())
    assert (first, second.status_code, upload, third) == (200, 503, 202, 200)
    assert second.headers["retry-after"] == "1"
    assert "DENIABLE_MAX_CONCURRENT_READS" in second.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path", "heavy"),
    [
        ("GET", "/v1/metrics/load_ms/estimate", True),
        ("GET", "/v1/metrics/load_ms/series", True),
        ("GET", "/v1/privacy", True),
        ("GET", "/v1/estimates/metrics", True),
        ("GET", "/dashboard/", True),
        ("GET", "/dashboard/metrics/load_ms", True),
        ("GET", "/dashboard/metrics/load_ms/series.csv", True),
        ("GET", "/dashboard/plan", True),
        ("GET", "/dashboard/sign-in", False),
        ("POST", "/dashboard/sign-in", False),
        ("GET", "/dashboard/static/dashboard.css", False),
        ("POST", "/v1/reports", False),
        ("POST", "/v1/metrics", False),
        ("GET", "/v1/metrics", False),
        ("GET", "/healthz", False),
        ("GET", "/readyz", False),
    ],
)
def test_which_requests_wait_at_the_gate(method: str, path: str, heavy: bool) -> None:
    assert is_heavy_read(method, path) is heavy


def test_the_collector_releases_its_one_slot_after_every_read(tmp_path: Path) -> None:
    """With one slot, reads one after another all answer: each gives its slot back (one kept
    would make the next wait 5 s and get 503)."""
    settings = collector_settings(
        f"sqlite:///{tmp_path}/gate.db", max_concurrent_reads=1, read_queue_timeout=5
    )
    collector = RunningCollector(settings).start()
    try:
        with collector.client(ADMIN_TOKEN) as client:
            statuses = [client.get("/v1/privacy").status_code for _ in range(3)]
            statuses.append(client.get("/v1/privacy", params={"memoize": "maybe"}).status_code)
            statuses.append(client.get("/v1/privacy").status_code)
        assert statuses == [200, 200, 200, 422, 200]
    finally:
        collector.stop()


def test_one_metrics_held_reads_leave_a_turn_for_another_metric() -> None:
    """Three slots, two per metric: with two reads of m held and a third of m queued, a read of
    n is admitted at once, and the queued m read is refused naming the per-metric setting
    (issue 38: one metric's expensive reads must not starve the others)."""
    release, entered = threading.Event(), threading.Semaphore(0)

    def read(request: Request) -> PlainTextResponse:
        if request.path_params["name"] == "m":
            entered.release()
            release.wait(30)
        return PlainTextResponse(request.path_params["name"])

    inner = Starlette(routes=[Route("/v1/metrics/{name}/estimate", read)])
    gate = ReadGate(inner, limit=3, wait=0.3, per_group=2)
    transport = httpx.ASGITransport(app=gate)

    async def scenario() -> tuple[list[int], int, httpx.Response]:
        async with httpx.AsyncClient(transport=transport, base_url="http://gate") as client:
            held = [asyncio.create_task(client.get("/v1/metrics/m/estimate")) for _ in range(2)]
            for _ in held:
                await asyncio.to_thread(entered.acquire, True, 30)
            queued = asyncio.create_task(client.get("/v1/metrics/m/estimate"))
            other = await client.get("/v1/metrics/n/estimate")
            refused = await queued
            release.set()
            return [(await task).status_code for task in held], other.status_code, refused

    held, other, refused = asyncio.run(scenario())
    assert held == [200, 200] and other == 200
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "DENIABLE_MAX_READS_PER_METRIC" in refused.json()["detail"]
    assert "reads of m at once" in refused.json()["detail"]


def test_scrapes_and_the_overview_with_one_metric_leave_a_slot_for_another_metric() -> None:
    """Four slots, two per metric: two held reads of m and a held scrape are all the gate lets
    such reads take; an overview queued behind the scrape is refused naming the shared limit,
    and a read of n is admitted at once (issue 38: with reads of no single metric counted only
    by their path, two scrapes and two reads of m filled every slot)."""
    release, entered = threading.Event(), threading.Semaphore(0)

    def held(request: Request) -> PlainTextResponse:
        entered.release()
        release.wait(30)
        return PlainTextResponse("held")

    def read(request: Request) -> PlainTextResponse:
        if request.path_params["name"] == "m":
            return held(request)
        return PlainTextResponse(request.path_params["name"])

    inner = Starlette(
        routes=[
            Route("/v1/metrics/{name}/estimate", read),
            Route("/v1/estimates/metrics", held),
            Route("/dashboard/", held),
        ]
    )
    transport = httpx.ASGITransport(app=ReadGate(inner, limit=4, wait=0.3, per_group=2))

    async def scenario() -> tuple[list[int], int, httpx.Response]:
        async with httpx.AsyncClient(transport=transport, base_url="http://gate") as client:
            paths = ["/v1/metrics/m/estimate"] * 2 + ["/v1/estimates/metrics"]
            running = [asyncio.create_task(client.get(path)) for path in paths]
            for _ in running:
                await asyncio.to_thread(entered.acquire, True, 30)
            overview = asyncio.create_task(client.get("/dashboard/"))
            await asyncio.sleep(0.05)  # the overview now waits (or, with no shared cap, runs)
            other = await client.get("/v1/metrics/n/estimate")
            await asyncio.wait([overview], timeout=2)  # refused by now, unless it was running
            release.set()
            refused = await overview
            return [(await task).status_code for task in running], other.status_code, refused

    statuses, other, refused = asyncio.run(scenario())
    assert statuses == [200, 200, 200] and other == 200
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "1 reads of no single metric" in refused.json()["detail"]
    assert "DENIABLE_MAX_READS_PER_METRIC" in refused.json()["detail"]


@pytest.mark.parametrize(
    ("limit", "per_group", "unscoped"), [(4, 2, 1), (8, 2, 5), (4, 1, 2), (1, 1, 1), (3, 3, 1)]
)
def test_reads_of_no_single_metric_take_fewer_slots_than_a_metric_leaves(
    limit: int, per_group: int, unscoped: int
) -> None:
    assert unscoped_limit(limit, per_group) == unscoped
    assert unscoped + per_group < limit or unscoped == 1


@pytest.mark.parametrize(
    ("path", "group"),
    [
        ("/v1/metrics/load_ms/estimate", "metric:load_ms"),
        ("/v1/metrics/load_ms/series", "metric:load_ms"),
        ("/dashboard/metrics/load_ms/series.csv", "metric:load_ms"),
        ("/v1/estimates/metrics", "/v1/estimates/metrics"),
        ("/dashboard/", "/dashboard/"),
    ],
)
def test_reads_are_counted_by_metric(path: str, group: str) -> None:
    assert read_group(path) == group


def test_memory_exhaustion_is_503_with_retry_after_never_500(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that runs out of memory (simulated where the decode allocates: numpy raises a
    MemoryError subclass there) answers 503 naming the reason, with Retry-After; the next read
    answers as usual."""
    import numpy as np

    from deniable.client import MetricSpec
    from deniable.estimators.kinds import text as estimates
    from testkit import register

    real = estimates.text_document

    def exhausted(*args: object, **kwargs: object) -> dict[str, object]:
        np.empty(1 << 62, dtype=np.uint8)  # numpy's own MemoryError, not one raised by hand
        return real(*args, **kwargs)  # type: ignore[arg-type]

    collector = RunningCollector(collector_settings(f"sqlite:///{tmp_path}/oom.db")).start()
    try:
        with collector.client(ADMIN_TOKEN) as client:
            spec = register(client, MetricSpec.text("queries", max_length=4, epsilon=4))
            monkeypatch.setattr(estimates, "text_document", exhausted)
            answer = client.get(f"/v1/metrics/{spec.name}/estimate")
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "5" and "out of memory" in answer.text
            monkeypatch.setattr(estimates, "text_document", real)
            assert client.get(f"/v1/metrics/{spec.name}/estimate").status_code == 200
    finally:
        collector.stop()
