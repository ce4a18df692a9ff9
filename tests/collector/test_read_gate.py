"""The read gate: at most ``limit`` heavy reads run at once; one kept waiting too long gets 503
naming the setting; uploads and health checks never wait (issue 24: 50 concurrent copies of a
bounded read must not add up past the pod's memory)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import pytest
from deniable.collector.readgate import ReadGate, is_heavy_read
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

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
