"""The collector's FastAPI application factory and the ``serve`` helper that runs it.

``create_app`` wires settings, database, telemetry and routes; the server clock is an
argument so tests can place the server in time. Access logs are off (they hold client
addresses) and no handler logs request headers.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from pydantic.json_schema import models_json_schema
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deniable.client.errors import StorageUnavailable
from deniable.client.sealing import KEYS_PATH
from deniable.client.wire import METRICS_PATH, REPORTS_PATH
from deniable.service.crossorigin import DeviceCORS
from deniable.service.middleware import HttpMiddleware

from . import dashboard, exposition
from .auth import ADMIN, INGEST, SHUFFLER, VIEWER
from .context import Clock, Collector, SpecCache, utc_now
from .docspage import install_docs
from .fastpaths import FastPath, FastPaths
from .readcache import ReadCache
from .readgate import ReadGate
from .redirects import RelativeRedirects
from .routes import admin, estimates, keys, metrics, operations, privacy, reports
from .schemas import ReportBatch, ShuffledPart
from .settings import Settings
from .storage import migrate, open_database
from .storage.partitions import create_ahead
from .storage.writer import GroupWriter
from .telemetry import Telemetry
from .unsealing import start_pool

log = logging.getLogger("deniable.collector")

GC_THRESHOLDS = (50_000, 20, 50)
"""Young-generation threshold raised from CPython's 700: a batch allocates thousands of
containers that reference counting frees anyway, and collecting them cost a third of the
ingestion CPU."""


SWITCH_INTERVAL = 0.001
"""Seconds a thread waiting for the GIL lets the running one keep it (CPython's default is
0.005). The group writer releases the GIL at each database call and must wait to take it
back while a request thread validates a batch: at 1 ms it waits less, and ingestion with
dimensions over 90 periods rose from about 45,000 to 49,000 reports/s on SQLite
(``python -m bench.ingest``; docs/DESIGN.md, "Ingestion cost of dimensions")."""


def tune_interpreter() -> None:
    """Freeze the objects alive after start-up, collect less often, and switch threads
    sooner (once per process start).

    Reference counting frees almost everything ingestion allocates; the cyclic collector
    only needs to run now and then, and never needs to walk the start-up heap again.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL)


class LatencyMiddleware(HttpMiddleware):
    """Observe every HTTP request's latency by route template, method and status."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        super().__init__(app)
        self.telemetry = telemetry

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on and observe how long its answer took."""
        started = time.perf_counter()
        status = [500]

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.telemetry.latency.labels(path, scope["method"], str(status[0])).observe(
                time.perf_counter() - started
            )


ANSWERED_FAULT = "deniable.answered_fault"
"""The scope key the 500 handler sets once it has logged a fault (without its message)."""


class QuietFaults(HttpMiddleware):
    """Outside Starlette's error middleware: an exception it answered with a 500 ends here.

    Starlette re-raises every exception after answering it, and uvicorn would then log it
    with its message, which can quote the client's input (a query value, a report). The 500
    handler has logged it already, as types and frames only; a fault it never saw (the
    response had begun) is logged here the same way.
    """

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; log a fault no handler answered, without its message."""
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            if scope.get(ANSWERED_FAULT) is not True:
                from deniable.service.faults import redacted_traceback

                log.error("internal error after the answer began\n%s", redacted_traceback(exc))


API_DESCRIPTION = (
    "Collects locally randomized reports and answers debiased estimates with confidence"
    " intervals. Every token is sent as `Authorization: Bearer <token>` (the Authorize button"
    " takes them): the ingest key uploads, the viewer token reads, and the admin token"
    " registers, archives, exports and deletes, and reads too. docs/DESIGN.md describes the"
    " API; docs/security.md what each token may do. The dashboard, for people rather than"
    " programs, is at [/dashboard/](/dashboard/) (sign in with the viewer token)."
)
"""The description at the top of /docs."""

TAGS = [
    {"name": "reports", "description": "Devices upload randomized reports (the ingest key)."},
    {
        "name": "metrics",
        "description": "The metric registry: the specs devices read (open to all), registering"
        " and archiving (the admin token).",
    },
    {
        "name": "estimates",
        "description": "Population shares, means and quantiles with their confidence"
        " intervals (the viewer or the admin token).",
    },
    {
        "name": "privacy",
        "description": "What one device's reports add up to, and a statement an app can"
        " publish (the viewer or the admin token).",
    },
    {"name": "admin", "description": "Export of raw reports and retention (the admin token)."},
    {"name": "operations", "description": "Liveness, readiness and Prometheus metrics."},
]
"""The OpenAPI tags, in the order /docs lists them."""

OPEN_WITHOUT_TOKENS = (
    " A collector started without an admin token answers these calls without a token (it then"
    " listens on loopback only)."
)
SECURITY_SCHEMES = {
    "viewerToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "The viewer token (DENIABLE_VIEWER_TOKEN), sent as `Authorization: Bearer"
        " <token>`: it reads estimates, series and the privacy account, and nothing else."
        " The admin token is accepted wherever the viewer token is." + OPEN_WITHOUT_TOKENS,
    },
    "adminToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "The admin token (DENIABLE_ADMIN_TOKEN), sent as `Authorization: Bearer"
        " <token>`: it registers and archives metrics, exports and deletes reports, and reads"
        " what the viewer token reads." + OPEN_WITHOUT_TOKENS,
    },
    "ingestKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "The ingest key (DENIABLE_INGEST_KEY) apps ship and send with every"
        " upload as `Authorization: Bearer <key>`; the admin token is accepted too. A collector"
        " without an ingest key takes uploads from anyone.",
    },
    "shufflerToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "The shuffler's token (DENIABLE_SHUFFLER_TOKEN), sent as `Authorization:"
        " Bearer <token>`: the only one `POST /v1/shuffled` accepts; without it that route"
        " refuses every call.",
    },
}
"""How each role's token is sent: all three as HTTP bearer tokens (:mod:`.auth`)."""

ROLE_SECURITY: dict[Any, list[dict[str, list[str]]]] = {
    ADMIN: [{"adminToken": []}],
    VIEWER: [{"viewerToken": []}, {"adminToken": []}],
    INGEST: [{"ingestKey": []}, {"adminToken": []}],
    SHUFFLER: [{"shufflerToken": []}],
}
"""The tokens an operation accepts, by the role dependency its route declares (:mod:`.auth`)."""


API_ROUTES = (reports, keys, metrics, estimates, exposition, privacy, admin, operations)
"""The route modules of the API, each with its ``router`` (the dashboard's is apart)."""


def _operation_security() -> dict[tuple[str, str], list[dict[str, list[str]]]]:
    """(path, method): the security requirement of every API route that declares a role."""
    found = {}
    for module in API_ROUTES:
        for route in module.router.routes:
            if not isinstance(route, APIRoute):
                continue
            for dependency in route.dependencies:
                security = ROLE_SECURITY.get(dependency)
                if security is not None:
                    for method in route.methods or ():
                        found[(route.path, method.lower())] = security
    return found


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document, with the report batch schema the raw-body upload route reads and
    each operation's security (from the role its route declares), so /docs can send tokens."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=TAGS,
        )
        _, defs = models_json_schema(
            [(ReportBatch, "validation"), (ShuffledPart, "validation")],
            ref_template="#/components/schemas/{model}",
        )
        components = schema.setdefault("components", {})
        components.setdefault("schemas", {}).update(defs["$defs"])
        components["securitySchemes"] = SECURITY_SCHEMES
        for (path, method), security in _operation_security().items():
            schema["paths"][path][method]["security"] = security
        app.openapi_schema = schema
    return app.openapi_schema


FAST_PATHS = (
    FastPath(
        "GET",
        "/v1/metrics/{name}/estimate",
        estimates.thin_estimate_query,
        estimates.thin_estimate,
        keep=(ReadGate,),
    ),
    FastPath("POST", REPORTS_PATH, keep=(DeviceCORS,)),
)
"""The routes served thin (:mod:`.fastpaths`): the estimate read (its read gate kept) and the
upload (its CORS kept; the read gate, the dashboard's headers and the relative redirects do
nothing to it)."""


class CollectorApp(FastAPI):
    """The collector's FastAPI app: its OpenAPI document is :func:`_openapi`'s,
    :class:`QuietFaults` wraps its middleware stack, and its :attr:`fast_paths` skip most of it
    (:mod:`.fastpaths`)."""

    fast_paths: Sequence[FastPath] = FAST_PATHS
    """The routes served thin; none answers every route through the whole stack."""

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document with report schemas and security (:func:`_openapi`)."""
        return _openapi(self)

    def build_middleware_stack(self) -> ASGIApp:
        """Starlette's stack inside :class:`QuietFaults`, behind the thin paths
        (:mod:`.fastpaths`), which keep its :class:`QuietFaults` and :class:`LatencyMiddleware`."""
        stack = QuietFaults(super().build_middleware_stack())
        return FastPaths(self, stack, (QuietFaults, LatencyMiddleware), self.fast_paths)


def _to_dashboard() -> RedirectResponse:
    """``GET /``: a browser at the collector's root lands on the dashboard (``/dashboard/``)."""
    return RedirectResponse("/dashboard/")


def _install_error_handlers(app: FastAPI) -> None:
    """Map errors to answers: a refused query -> its 4xx (:func:`.routes.common.query_refused`),
    database down or not migrated -> 503, a spec that changed in the database -> 503 (retry),
    memory exhausted -> 503 with Retry-After, anything else -> 500.
    No log line quotes a driver's message (it can hold report ids and payloads): only types,
    error codes, statements and frames."""
    from deniable.service.faults import redacted_traceback

    from .queries.refusal import QueryRefused
    from .routes.common import query_refused
    from .storage.queries import SpecChanged

    async def database_down(_request: Request, exc: Exception) -> JSONResponse:
        log.error("database unavailable: %s", type(exc).__name__)
        return JSONResponse(
            status_code=503, content={"detail": "database unavailable; retry later"}
        )

    async def storage_unavailable(_request: Request, exc: Exception) -> JSONResponse:
        log.error("storage unavailable: %s", exc)
        return JSONResponse(status_code=503, content={"detail": str(exc)})

    async def database_fault(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, OperationalError):
            return await database_down(request, exc)
        return await server_fault(request, exc)

    async def spec_changed(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, SpecChanged):
            return await server_fault(request, exc)
        request.app.state.collector.specs.forget(exc.metrics)
        log.warning("registered spec changed in the database: %s", ", ".join(exc.metrics))
        detail = f"the registered spec of {', '.join(exc.metrics)} changed meanwhile; retry"
        return JSONResponse(status_code=503, content={"detail": detail})

    async def server_fault(request: Request, exc: Exception) -> JSONResponse:
        request.scope[ANSWERED_FAULT] = True
        log.error(
            "internal error on %s %s\n%s",
            request.method,
            request.url.path,
            redacted_traceback(exc),
        )
        return JSONResponse(status_code=500, content={"detail": "internal server error"})

    async def out_of_memory(request: Request, _exc: Exception) -> JSONResponse:
        log.error("out of memory on %s %s: answered 503", request.method, request.url.path)
        detail = (
            "out of memory: the collector could not answer this request with the memory left"
            " beside the others it is answering; retry shortly"
        )
        return JSONResponse(
            status_code=503, content={"detail": detail}, headers={"Retry-After": "5"}
        )

    app.add_exception_handler(MemoryError, out_of_memory)
    app.add_exception_handler(PoolTimeout, database_down)
    app.add_exception_handler(StorageUnavailable, storage_unavailable)
    app.add_exception_handler(DBAPIError, database_fault)
    app.add_exception_handler(SpecChanged, spec_changed)
    app.add_exception_handler(QueryRefused, query_refused)
    app.add_exception_handler(Exception, server_fault)


def create_app(settings: Settings | None = None, *, clock: Clock | None = None) -> FastAPI:
    """A collector app; migrations run at startup unless ``settings.migrate_on_start`` is off."""
    settings = settings or Settings()
    telemetry = Telemetry(settings.prometheus_metric_labels)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = open_database(settings.database_url, pool_size=settings.pool_size)
        if settings.migrate_on_start:
            await run_in_threadpool(migrate, settings.database_url)
            today = (clock or utc_now)().date()
            await run_in_threadpool(create_ahead, database, today)
        app.state.collector = Collector(
            settings=settings,
            database=database,
            telemetry=telemetry,
            clock=clock or utc_now,
            specs=SpecCache(database),
            writer=GroupWriter(database),
            read_cache=ReadCache(settings.read_cache_bytes),
        )
        tune_interpreter()
        if settings.sealing_keys_file is not None:
            start_pool()
        try:
            yield
        finally:
            app.state.collector.writer.close()
            database.dispose()

    app = CollectorApp(
        title="deniable collector",
        version="0.1.0",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    install_docs(app)
    for module in API_ROUTES:
        app.include_router(module.router)
    app.include_router(dashboard.router)
    app.add_api_route("/", _to_dashboard, include_in_schema=False)
    _install_error_handlers(app)
    app.add_middleware(
        ReadGate,
        limit=settings.max_concurrent_reads,
        wait=settings.read_queue_timeout,
        per_group=settings.max_reads_per_metric,
    )
    app.add_middleware(dashboard.DashboardHeaders)
    app.add_middleware(RelativeRedirects)
    app.add_middleware(LatencyMiddleware, telemetry=telemetry)
    if settings.cors_origins:
        app.add_middleware(
            DeviceCORS, origins=settings.cors_origins, paths=(METRICS_PATH, KEYS_PATH, REPORTS_PATH)
        )
    return app
