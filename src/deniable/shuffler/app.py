"""The shuffler's FastAPI app: ``POST /v1/sealed`` and ``GET /v1/keys`` for devices,
``GET /healthz`` for operators.

No access log, no header read but the upload key and the body's length, no address or time
kept: a stored sealed report holds its id, its header, its sealing key id, its ciphertext and
(until it is batched) the sender's pseudonym and the hour it expires, nothing else
(:mod:`.store`). Devices get the collector's public keys from the shuffler, never from the
collector (:mod:`.keyset`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from deniable.client.sealing import KEYS_PATH, SEALED_PATH
from deniable.service.bearer import any_match, bearer_token
from deniable.service.body import Refused, read_body
from deniable.service.crossorigin import DeviceCORS

from .keyset import KeySet, KeysUnavailable
from .service import Releaser
from .settings import ShufflerSettings
from .store import LimitReached, Store
from .uploads import UploadRefused, parse_upload

UPLOAD_KEY_REFUSED = (
    "upload key missing or wrong: send 'Authorization: Bearer <key>' with the shuffler's"
    " DENIABLE_SHUFFLER_UPLOAD_KEY (Client(shuffler_key=...), shufflerKey in JS)"
)
"""The 401 detail of an upload without the shuffler's key."""
log = logging.getLogger("deniable.shuffler")
KEYS_RETRY_AFTER = "5"
"""Seconds a device waits before asking again while the shuffler holds no key set."""


def unavailable(exc: KeysUnavailable) -> JSONResponse:
    """503 while the shuffler has not fetched the collector's keys."""
    return JSONResponse(
        {"detail": f"the shuffler holds no sealing keys yet: {exc}"},
        status_code=503,
        headers={"Retry-After": KEYS_RETRY_AFTER},
    )


def create_app(settings: ShufflerSettings | None = None, *, release: bool = True) -> FastAPI:
    """The shuffler's app over its store and the key set it refreshes; ``release`` runs the
    batch releaser with it."""
    settings = settings or ShufflerSettings()
    upload_keys = settings.upload_keys()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = Store(settings.store, limits=settings.limits())
        releaser = Releaser(store, settings)
        keys = KeySet(settings.collector_url, settings.keys_refresh, settings.keys_keep)
        app.state.store = store
        app.state.keys = keys
        app.state.releaser = releaser if release else None
        await run_in_threadpool(keys.start)
        if keys.problem:
            log.warning("sealing keys: none loaded yet (%s)", keys.problem)
        else:
            log.info("sealing keys: %s", keys.loaded())
        if release:
            releaser.start()
        try:
            yield
        finally:
            if release:
                releaser.stop()
            keys.stop()
            store.close()

    app = FastAPI(title="deniable shuffler", lifespan=lifespan, docs_url=None, redoc_url=None)
    if settings.cors_origins:
        app.add_middleware(
            DeviceCORS, origins=settings.cors_origins, paths=(SEALED_PATH, KEYS_PATH)
        )

    @app.get(KEYS_PATH)
    async def get_keys(request: Request) -> Response:
        """The collector's public sealing keys as the shuffler fetched them: one document, the
        same for every device; devices seal to ``current``. 503 before the first fetch."""
        try:
            document = request.app.state.keys.document()
        except KeysUnavailable as exc:
            return unavailable(exc)
        return Response(
            document, media_type="application/json", headers={"Cache-Control": "no-cache"}
        )

    async def post_sealed(request: Request) -> JSONResponse:
        """Store a device's sealed reports durably; 202 ``{"accepted", "duplicates"}`` after
        the commit. 401 without the upload key (before the body is read); 409 when an envelope
        is sealed to a key this shuffler does not serve. A plain Starlette route (the thin
        intake): no parameter resolution or response model, one upload per device batch."""
        if upload_keys and not any_match(bearer_token(request), upload_keys):
            return JSONResponse(
                {"detail": UPLOAD_KEY_REFUSED},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        try:
            body = await read_body(request, settings.max_body_bytes, settings.body_timeout)
            device, envelopes = parse_upload(body, settings.max_upload)
            foreign = request.app.state.keys.refused({e.sealing_key for e in envelopes})
        except Refused as exc:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
        except UploadRefused as exc:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status)
        except KeysUnavailable as exc:
            return unavailable(exc)
        if foreign:
            detail = (
                f"sealed to key id {', '.join(foreign)}, which this shuffler does not serve: seal"
                f" to the current key of GET {KEYS_PATH} on this shuffler"
            )
            return JSONResponse({"detail": detail}, status_code=409)
        try:
            new, duplicates = await run_in_threadpool(
                request.app.state.store.receive, device, envelopes
            )
        except LimitReached as exc:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status)
        return JSONResponse({"accepted": new, "duplicates": duplicates}, status_code=202)

    app.router.add_route(SEALED_PATH, post_sealed, methods=["POST"], include_in_schema=False)

    @app.get("/healthz")
    async def healthz(request: Request) -> JSONResponse:
        """Liveness and readiness, nothing more: any count of waiting or batched reports,
        polled, would show each upload's arrival and size, or when a batch formed (which the
        random delay hides). The operator reads counts from the store (``counts_of``). 503
        when the collector keeps refusing the shuffler's token: it cannot forward anything."""
        releaser = request.app.state.releaser
        problem = None if releaser is None else releaser.forwarder.problem()
        if problem is not None:
            return JSONResponse({"status": "not ok", "detail": problem}, status_code=503)
        return JSONResponse({"status": "ok"})

    return app
