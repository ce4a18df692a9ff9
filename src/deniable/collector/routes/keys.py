"""``GET /v1/keys``: the collector's public sealing keys, which devices seal reports to."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from deniable.service.body import Refused

from ..context import collector
from ..schemas import PublicKeys
from ..sealingkeys import KeyFileError, keyring_of
from .common import problem_responses

router = APIRouter(tags=["reports"])


@router.get(
    "/v1/keys",
    operation_id="listKeys",
    summary="The public keys devices seal reports to",
    response_model=PublicKeys,
    responses=problem_responses(404, 503),
)
async def get_keys(request: Request) -> JSONResponse:
    """The current key and those retired within the grace period (public halves only);
    devices seal to ``current``.
    404 when the collector has no keys file; 503 when it cannot read it."""
    state = collector(request)
    settings = state.settings
    if settings.sealing_keys_file is None:
        raise Refused(
            404,
            "no_keys",
            "this collector has no sealing keys (DENIABLE_SEALING_KEYS_FILE is not set)",
        )
    try:
        keys = keyring_of(settings.sealing_keys_file, settings.sealing_key_grace_days)
        document = await run_in_threadpool(keys.public, state.clock())
    except KeyFileError as exc:
        raise Refused(503, "no_keys", str(exc)) from None
    return JSONResponse(document, headers={"Cache-Control": "no-cache"})
