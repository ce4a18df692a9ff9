"""The shuffler's FastAPI app: ``POST /v1/sealed`` for devices, ``GET /healthz`` for operators.

No access log, no header read but the body's length, no address or time kept: a stored sealed
report holds its id, its header, its sealing key id, its ciphertext and (until it is batched)
the sender's pseudonym and the hour it expires, nothing else (:mod:`.store`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from deniable.client.sealing import SEALED_PATH
from deniable.collector.routes.body import Refused, read_body
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from .service import Releaser
from .settings import ShufflerSettings
from .store import LimitReached, Store
from .uploads import UploadRefused, parse_upload


def create_app(settings: ShufflerSettings | None = None, *, release: bool = True) -> FastAPI:
    """The shuffler's app over its store; ``release`` runs the batch releaser with it."""
    settings = settings or ShufflerSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = Store(settings.store, limits=settings.limits())
        releaser = Releaser(store, settings)
        app.state.store = store
        if release:
            releaser.start()
        try:
            yield
        finally:
            if release:
                releaser.stop()
            store.close()

    app = FastAPI(title="deniable shuffler", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.post(SEALED_PATH, status_code=202)
    async def post_sealed(request: Request) -> JSONResponse:
        """Store a device's sealed reports durably; 202 ``{"accepted", "duplicates"}`` after
        the commit."""
        try:
            body = await read_body(request, settings.max_body_bytes, settings.body_timeout)
            device, envelopes = parse_upload(body, settings.max_upload)
        except Refused as exc:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
        except UploadRefused as exc:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status)
        try:
            new, duplicates = await run_in_threadpool(
                request.app.state.store.receive, device, envelopes
            )
        except LimitReached as exc:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status)
        return JSONResponse({"accepted": new, "duplicates": duplicates}, status_code=202)

    @app.get("/healthz")
    async def healthz(request: Request) -> dict[str, str]:
        """Liveness and readiness, nothing more: any count of waiting or batched reports,
        polled, would show each upload's arrival and size, or when a batch formed (which the
        random delay hides). The operator reads counts from the store (``counts_of``)."""
        return {"status": "ok"}

    return app
