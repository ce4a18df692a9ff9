"""The probes a platform runs: liveness, readiness and the collector's own Prometheus text."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..context import collector
from ..schemas import Health
from ..storage.queries import check_ready
from ..telemetry import CONTENT_TYPE
from .common import problem_responses

router = APIRouter(tags=["operations"])


@router.get(
    "/healthz",
    response_model=Health,
    operation_id="checkLiveness",
    summary="Liveness: the process answers",
)
def healthz() -> dict[str, str]:
    """Liveness: the process answers (restart it if not); says nothing of the database."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Health,
    responses=problem_responses(503),
    operation_id="checkReadiness",
    summary="Readiness: the database answers and is migrated",
)
def readyz(request: Request) -> dict[str, str]:
    """Readiness: the database answers and is migrated; 503 otherwise, so no traffic is sent.

    A database error reaches the app's handlers, which answer 503 without restarting anything.
    """
    check_ready(collector(request).database)
    return {"status": "ready"}


@router.get(
    "/metrics",
    response_class=Response,
    operation_id="getPrometheusMetrics",
    summary="The collector's own counters and latencies, for Prometheus",
)
def prometheus(request: Request) -> Response:
    """Prometheus text exposition of the counters and latency histograms (all workers summed)."""
    return Response(collector(request).telemetry.render(), media_type=CONTENT_TYPE)
