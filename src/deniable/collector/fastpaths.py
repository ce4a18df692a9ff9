"""Thin ASGI paths for the hottest routes, in front of the FastAPI app.

A one-period estimate takes about a millisecond to make, and the stack around it (eight
middlewares, the router's match over every route, FastAPI's dependency solving) took about as
much again; for uploads it was about a tenth of the collector's CPU per stored report
(docs/performance.md, issue 42). :class:`FastPaths` sends a request that a row of the app's
table (``collector.app.FAST_PATHS``) matches (its method and its FastAPI route's own path
pattern) to that row's handler, through only the stack's middleware instances of the classes the row keeps (shallow
copies around the handler: their state, such as the read gate's turns, is the stack's); every
other request (a preflight, a trailing slash) goes to the full stack. A row's ``prepare`` does
nothing but read the request (the token, the query): when it declines (returns None, or
fails), the request goes to the full stack as if no row had matched, so every refusal it
leaves is still FastAPI's own answer. Its ``answer`` then makes the response, inside the
stack's own error middleware and exception handlers. A row without them takes every request
and answers with its route's own dependencies and endpoint, each called with the request. The
FastAPI routes stay registered: the OpenAPI document and the full paths are unchanged.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import get_route_path
from starlette.types import ASGIApp, Receive, Scope, Send

Prepare = Callable[[Request], Any]
"""Read a request (no I/O): what ``answer`` needs, or None to leave it to the full stack."""
Answer = Callable[[Request, Any], Awaitable[Response]]
"""Make the response from what ``prepare`` read."""


@dataclass(frozen=True)
class FastPath:
    """One row: ``method`` requests to the FastAPI route at ``path`` (its template) are read by
    ``prepare`` and answered by ``answer``, through the stack's instances of the middleware
    classes the table keeps for all rows and of ``keep`` (in the stack's order). Without
    ``prepare`` and ``answer``, every such request is answered by the route's own
    dependencies and endpoint (:func:`route_answer`)."""

    method: str
    path: str
    prepare: Prepare | None = None
    answer: Answer | None = None
    keep: tuple[type, ...] = ()


ERROR_HANDLING = (ServerErrorMiddleware, ExceptionMiddleware)
"""The stack's middleware every row keeps: the 500 handler and the app's exception handlers."""


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


def _every(request: Request) -> bool:
    """Take every request (a row whose route reads it all itself)."""
    return True


def route_answer(route: APIRoute) -> Answer:
    """An answer by ``route``'s dependencies, then its endpoint, each awaited with the request
    alone. Refused at start-up for a route whose dependencies or endpoint take anything else
    (FastAPI would have to solve them)."""
    calls = [
        cast(Callable[[Request], Awaitable[Any]], dependency.dependency)
        for dependency in route.dependencies
    ]
    for call in (*calls, route.endpoint):
        parameters = list(inspect.signature(call).parameters.values())
        if not (
            inspect.iscoroutinefunction(call)
            and len(parameters) == 1
            and parameters[0].annotation in (Request, "Request")
        ):
            raise TypeError(
                f"{route.path} cannot take a thin path: {call!r} takes more than the request"
            )
    endpoint = route.endpoint

    async def answer(request: Request, work: Any) -> Response:
        for call in calls:
            await call(request)
        return await endpoint(request)

    return answer


class _Endpoint:
    """The innermost app of a row's chain: its ``answer``, in the scope the router would give
    (its route and endpoint)."""

    def __init__(self, route: APIRoute, answer: Answer) -> None:
        self.route = route
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = self.route
        scope["endpoint"] = self.route.endpoint
        request = Request(scope, receive, send)
        response = await self.answer(request, scope["deniable.fast_work"])
        await response(scope, receive, send)


class FastPaths:
    """Serve ``rows`` thin, everything else through ``stack`` (the app's full middleware
    stack); ``keep`` are the middleware classes every row keeps, with :data:`ERROR_HANDLING`."""

    def __init__(
        self,
        app: FastAPI,
        stack: ASGIApp,
        keep: tuple[type, ...],
        rows: Sequence[FastPath],
    ) -> None:
        self.stack = stack
        members = _stack_members(stack)
        self.rows: dict[str, list[_Row]] = {}
        for row in rows:
            route = _route(app, row.method, row.path)
            answer = row.answer or route_answer(route)
            chain: ASGIApp = _Endpoint(route, answer)
            kept = ERROR_HANDLING + keep + row.keep
            for member in reversed(members):
                if isinstance(member, kept):
                    wrapper = copy.copy(member)
                    wrapper.app = chain
                    chain = wrapper
            prepare = row.prepare or _every
            self.rows.setdefault(row.method, []).append(_Row(route, prepare, chain))

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
