"""Bearer-token checks for admin calls, reads and uploads, compared in constant time.

Every protected route declares its role once, in its decorator or its router's:
``dependencies=[ADMIN]``, ``dependencies=[VIEWER]`` or ``dependencies=[INGEST]``. FastAPI solves dependencies before it
validates query parameters, and the routes that take a body read it themselves afterwards
(``deniable.service.body``), so a caller without the token gets its 401 before anything it
sent is read, parsed or echoed in a 422.

The viewer token reads (estimates, series, the dashboard) and nothing else: on an admin route
it is answered 403, so an operator sees at once that the token is known but not allowed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from fastapi import Depends, HTTPException, Request

from deniable.service.bearer import any_match, bearer_token, tokens_match

from .context import collector
from .settings import Settings

Role = Literal["admin", "viewer", "ingest", "shuffler"]

VIEWER_REFUSED = "the viewer token may only read"
"""The 403 detail of an admin route called with the viewer token."""


def require(request: Request, accepted: list[str], role: Role) -> None:
    """Raise 401 unless the request's bearer token equals one of ``accepted``.

    An empty ``accepted`` means the role is open (no token configured for it).
    """
    if not accepted:
        return
    if not any_match(bearer_token(request), accepted):
        who = "viewer or admin" if role == "viewer" else role
        raise HTTPException(
            status_code=401,
            detail=f"{who} token missing or wrong: send 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )


def accepted_tokens(settings: Settings, role: Role) -> list[str]:
    """The tokens ``role``'s routes accept (empty: open)."""
    if role == "admin":
        return settings.admin_tokens()
    if role == "viewer":
        return settings.viewer_tokens()
    if role == "shuffler":
        return settings.shuffler_tokens()
    return settings.ingest_tokens()


def authorize(role: Role) -> Callable[[Request], Awaitable[None]]:
    """The dependency that lets a request through only with a token of ``role``.

    The viewer token on an admin route is 403; a refused upload is counted in
    ``deniable_batches_rejected{reason="unauthorized"}``.
    """

    async def check(request: Request) -> None:
        state = collector(request)
        settings = state.settings
        accepted = accepted_tokens(settings, role)
        if role == "shuffler" and not accepted:
            raise HTTPException(
                status_code=403,
                detail="shuffled batches need DENIABLE_SHUFFLER_TOKEN set on the collector",
            )
        try:
            require(request, accepted, role)
        except HTTPException:
            if role == "ingest":
                state.telemetry.batches_rejected.labels("unauthorized").inc()
            viewer = settings.viewer_secret()
            if role == "admin" and viewer and tokens_match(bearer_token(request), viewer):
                raise HTTPException(status_code=403, detail=VIEWER_REFUSED) from None
            raise

    return check


ADMIN = Depends(authorize("admin"))
"""Declared by every route that writes or exports: registering and archiving metrics, export,
retention."""
VIEWER = Depends(authorize("viewer"))
"""Declared by the read routes (estimates, series, the privacy account): the viewer token or an
admin token."""
INGEST = Depends(authorize("ingest"))
"""Declared by the upload route: the ingest key (or an admin token) when one is configured."""
SHUFFLER = Depends(authorize("shuffler"))
"""Declared by ``POST /v1/shuffled``: the shuffler's token alone (no admin token), and
nothing when none is configured."""
