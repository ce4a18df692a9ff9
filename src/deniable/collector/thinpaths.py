"""Thin paths: a few (method, path) pairs answered past most of the app's middleware stack.

Every request through FastAPI's stack passes each middleware, the router's match over every
route and the dependency solver; for the upload route that was about a tenth of the
collector's CPU per stored report (docs/performance.md, issue 42). A thin path answers its
exact method and path with its route's own dependencies and endpoint, called with the same
``Request``, inside the stack's error handling (Starlette's ``ServerErrorMiddleware`` and
``ExceptionMiddleware`` with the app's own handlers) and only the middleware it names, in the
app's order and configuration. The route stays registered, so OpenAPI documents it, and any
other method or path (a preflight, a trailing slash) takes the whole stack.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.routing import APIRoute, APIRouter
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass(frozen=True)
class ThinPath:
    """One route answered on a thin path: its method and path exactly, with the app's
    middleware of the classes in ``keep`` (the others do nothing to this route's answers)."""

    route: APIRoute
    method: str
    keep: tuple[type, ...]


class ThinPaths:
    """The app's thin paths, declared once the routes and middleware are, built with the
    middleware stack (:func:`dispatcher`)."""

    def __init__(self) -> None:
        self.paths: list[ThinPath] = []

    def add(self, router: APIRouter, method: str, path: str, keep: Collection[type] = ()) -> None:
        """Answer ``method`` ``path``, a route of ``router`` (included in the app without a
        prefix), on a thin path through the app's middleware of the classes in ``keep``."""
        self.paths.append(ThinPath(_route(router, method, path), method, tuple(keep)))


def route_app(route: APIRoute) -> ASGIApp:
    """The ASGI app of ``route``: its dependencies, then its endpoint, each awaited with the
    request alone, and the endpoint's response sent. Refused at start-up for a route whose
    dependencies or endpoint take anything else (FastAPI would have to solve them)."""
    calls = [dependency.dependency for dependency in route.dependencies]
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
    dependencies: list[Callable[[Request], Any]] = calls  # type: ignore[assignment]
    endpoint: Callable[[Request], Any] = route.endpoint

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        for dependency in dependencies:
            await dependency(request)
        response = await endpoint(request)
        await response(scope, receive, send)

    return app


def _route(router: APIRouter, method: str, path: str) -> APIRoute:
    """The API route ``router`` registers for ``method`` ``path``."""
    for route in router.routes:
        if isinstance(route, APIRoute) and route.path == path and method in route.methods:
            return route
    raise LookupError(f"no route {method} {path} to answer on a thin path")


class Dispatcher:
    """ASGI app: a request for one of ``table``'s (method, path) to its thin path (the
    scope given its route, as the router gives it), everything else to ``app``."""

    def __init__(self, table: dict[tuple[str, str], tuple[APIRoute, ASGIApp]], app: ASGIApp):
        self.table = table
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            found = self.table.get((scope["method"], scope["path"]))
            if found is not None:
                route, fast = found
                scope["route"] = route
                scope["endpoint"] = route.endpoint
                scope["path_params"] = {}
                await fast(scope, receive, send)
                return
        await self.app(scope, receive, send)


def dispatcher(
    app: FastAPI, paths: ThinPaths, outer: Callable[[ASGIApp], ASGIApp], stack: ASGIApp
) -> ASGIApp:
    """``stack`` (the app's whole middleware stack) behind a :class:`Dispatcher` of ``paths``,
    each built like the stack: ``outer``, the 500 handler, the kept middleware, the other
    exception handlers, then the route."""
    if not paths.paths:
        return stack
    error_handler = None
    handlers = {}
    for key, value in app.exception_handlers.items():
        if key in (500, Exception):
            error_handler = value
        else:
            handlers[key] = value
    table = {}
    for fast in paths.paths:
        route = fast.route
        built = ExceptionMiddleware(route_app(route), handlers=handlers, debug=app.debug)
        for cls, args, kwargs in reversed(app.user_middleware):
            if cls in fast.keep:
                built = cls(built, *args, **kwargs)
        built = ServerErrorMiddleware(built, handler=error_handler, debug=app.debug)
        table[(fast.method, route.path)] = (route, outer(built))
    return Dispatcher(table, stack)
