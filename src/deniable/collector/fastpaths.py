"""Thin ASGI paths for the hottest routes, in front of the FastAPI app.

A one-period estimate takes about a millisecond to make, and the stack around it (eight
middlewares, FastAPI's dependency solving) took about as much again (docs/performance.md).
:class:`FastPaths` sends a request that a row of :data:`FAST_PATHS` matches (its method and
its FastAPI route's own path pattern) to that row's plain handler, through only the
middleware instances the row keeps; every other request goes to the full stack. A row's
``prepare`` does nothing but read the request (the token, the query): when it declines
(returns None, or fails), the request goes to the full stack as if no row had matched, so every
refusal (401, 403, 422) is still FastAPI's own answer. Its ``answer`` then makes the response;
an exception is answered by the app's own exception handlers, as Starlette's would be. The
FastAPI route stays registered: the OpenAPI document and the full path are unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette._utils import is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import get_route_path
from starlette.types import ASGIApp, Receive, Scope, Send

from .readgate import ReadGate
from .routes import estimates

Prepare = Callable[[Request], Any]
"""Read a request (no I/O): what ``answer`` needs, or None to leave it to the full stack."""
Answer = Callable[[Request, Any], Awaitable[Response]]
"""Make the response from what ``prepare`` read."""


@dataclass(frozen=True)
class FastPath:
    """One row: ``method`` requests to the FastAPI route at ``path`` (its template) are read by
    ``prepare`` and answered by ``answer``, through the stack's instances of the middleware
    classes the table keeps for all rows and of ``keep`` (in the stack's order)."""

    method: str
    path: str
    prepare: Prepare
    answer: Answer
    keep: tuple[type, ...] = ()


FAST_PATHS = (
    FastPath(
        "GET",
        "/v1/metrics/{name}/estimate",
        estimates.thin_estimate_query,
        estimates.thin_estimate,
        keep=(ReadGate,),
    ),
)
"""The routes served thin: the estimate read (its read gate kept)."""


@dataclass(frozen=True)
class _Row:
    """A :class:`FastPath` bound to its route and to its chain of kept middleware."""

    route: APIRoute
    prepare: Prepare
    chain: ASGIApp


def _stack_members(stack: ASGIApp) -> list[Any]:
    """The middleware instances of ``stack``, outermost first (each wraps the next as ``app``)."""
    members = []
    node: Any = stack
    while node is not None and len(members) < 64:
        members.append(node)
        node = getattr(node, "app", None)
    return members


class _Endpoint:
    """The innermost app of a row's chain: its ``answer``, with exceptions answered by the
    app's exception handlers (as Starlette's exception and error middlewares would)."""

    def __init__(self, app: FastAPI, route: APIRoute, answer: Answer) -> None:
        self.app = app
        self.route = route
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = self.route
        scope["endpoint"] = self.route.endpoint
        request = Request(scope, receive)
        try:
            response = await self.answer(request, scope["deniable.fast_work"])
        except Exception as exc:
            response = await self._handled(request, exc)
        await response(scope, receive, send)

    async def _handled(self, request: Request, exc: Exception) -> Response:
        """The app's answer to ``exc`` (its handler of the nearest class; re-raised if none)."""
        handlers = self.app.exception_handlers
        handler = None
        status = getattr(exc, "status_code", None)
        if status is not None:
            handler = handlers.get(status)
        if handler is None:
            for kind in type(exc).__mro__:
                handler = handlers.get(kind)
                if handler is not None:
                    break
        if handler is None:
            raise exc
        if is_async_callable(handler):
            return await handler(request, exc)
        return await run_in_threadpool(handler, request, exc)


class FastPaths:
    """Serve :data:`FAST_PATHS` thin, everything else through ``stack`` (the app's full
    middleware stack); ``keep`` are the middleware classes every row keeps."""

    def __init__(
        self,
        app: FastAPI,
        stack: ASGIApp,
        keep: tuple[type, ...],
        rows: Sequence[FastPath] = FAST_PATHS,
    ) -> None:
        self.stack = stack
        members = _stack_members(stack)
        self.rows: dict[str, list[_Row]] = {}
        for row in rows:
            route = _route(app, row.method, row.path)
            chain: ASGIApp = _Endpoint(app, route, row.answer)
            kept = keep + row.keep
            for member in reversed(members):
                if isinstance(member, kept):
                    wrapper = copy.copy(member)
                    wrapper.app = chain
                    chain = wrapper
            self.rows.setdefault(row.method, []).append(_Row(route, row.prepare, chain))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for row in self.rows.get(scope["method"], ()):
                match = row.route.path_regex.match(get_route_path(scope))
                if match is None:
                    continue
                scope["path_params"] = match.groupdict()
                try:
                    work = row.prepare(Request(scope, receive))
                except Exception:  # the full stack answers it, as it answers all it declines
                    work = None
                if work is None:
                    del scope["path_params"]
                    break
                scope["deniable.fast_work"] = work
                await row.chain(scope, receive, send)
                return
        await self.stack(scope, receive, send)


def _routes(routes: Sequence[Any]) -> Iterator[Any]:
    """``routes`` in the order the router tries them, each included router's in its place."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _routes(included.routes)
        else:
            yield route


def _route(app: FastAPI, method: str, path: str) -> APIRoute:
    """The app's route of ``method`` at ``path``; refused if an earlier route would take a
    request of that path first (the thin path would then answer in its place)."""
    probe = path.replace("{", "").replace("}", "")
    for route in _routes(app.routes):
        matcher = getattr(route, "path_regex", None)
        methods = getattr(route, "methods", None)
        if matcher is None or not matcher.match(probe) or (methods and method not in methods):
            continue
        if isinstance(route, APIRoute) and route.path == path:
            return route
        raise ValueError(f"{path}: an earlier route takes {probe} first")
    raise ValueError(f"no {method} route at {path}")
