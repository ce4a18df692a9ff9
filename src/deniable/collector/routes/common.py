"""What the route modules share: how error answers, admin reads of a metric and request bodies
are documented, the parameters of a read of one metric's periods, and the metric a path names.

Route modules import from here, never from one another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import orjson
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response

from deniable.client.spec import MetricSpec

from ..auth import ADMIN, VIEWER
from ..context import Collector, collector
from ..queries.ranges import registered_spec
from ..queries.refusal import QueryRefused
from ..schemas import problem_responses

Route = TypeVar("Route", bound=Callable[..., Any])


def json_body(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``openapi_extra`` of a route that reads its required JSON body itself, described by
    ``schema`` (FastAPI cannot see a body the handler parses on its own); a nested model's
    definition (pydantic's ``$defs``) is written in place, since a ``#/$defs`` reference
    would point into the OpenAPI document, where there is none."""
    definitions = schema.get("$defs", {})
    inlined = _inline({k: v for k, v in schema.items() if k != "$defs"}, definitions)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": inlined}}}}


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    """``node`` with each ``{"$ref": "#/$defs/Name"}`` replaced by that definition."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(definitions[ref.removeprefix("#/$defs/")], definitions)
        return {key: _inline(value, definitions) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    return node


ERRORS = problem_responses(401, 403, 404, 422)
"""The error answers of a route that reads one metric (403: the viewer token on an admin one)."""


class DocumentResponse(JSONResponse):
    """A large estimate document as JSON, written by orjson: FastAPI's own path (validating
    the document against the route's response model, then ``json.dumps``) took 18 ms of a
    10-slice breakdown's 50 (234 KB). The model still describes the answer in the OpenAPI
    schema, and the contract tests (schemathesis) hold the answers to it."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def metric_read(
    router: APIRouter,
    path: str,
    model: Any,
    *,
    operation_id: str,
    summary: str,
    viewer: bool = False,
    tags: list[str] | None = None,
    description: str | None = None,
) -> Callable[[Route], Route]:
    """Register a ``GET`` of ``router`` at ``path`` that reads one metric, answering ``model``
    or one of :data:`ERRORS`: admin only, or also the viewer token if ``viewer``; documented
    under ``operation_id``, ``summary``, ``tags`` (besides the router's) and ``description``
    (default: the route's docstring)."""
    role = VIEWER if viewer else ADMIN
    return router.get(
        path,
        dependencies=[role],
        response_model=model,
        responses=ERRORS,
        operation_id=operation_id,
        summary=summary,
        tags=tags,
        description=description,
    )


PERIOD_HELP = "a period label of the metric's kind (a YYYY-MM-DD date also works for week/month)"
PeriodQuery = Annotated[str | None, Query(max_length=32, description=PERIOD_HELP)]
"""An optional ``start`` or ``end`` query parameter."""


@dataclass
class MetricPeriods:
    """The parameters every read of one metric's periods takes: the metric's ``name`` (from
    the path) and the optional ``start`` and ``end`` of the range, as given.

    FastAPI fills it as a dependency (:data:`MetricPeriodsQuery`); it only gathers the values,
    so each route still validates every parameter before it looks the metric up.
    """

    name: str
    start: PeriodQuery = None
    end: PeriodQuery = None


MetricPeriodsQuery = Annotated[MetricPeriods, Depends()]
"""The ``name``, ``start`` and ``end`` parameters of a read route, as one :class:`MetricPeriods`."""


def find_spec(request: Request, name: str) -> tuple[Collector, MetricSpec]:
    """The collector and the registered metric ``name`` (404 if not registered)."""
    state = collector(request)
    return state, registered_spec(state, name)


async def query_refused(request: Request, exc: Exception) -> Response:
    """The API's answer to a refused query: the very answer of an HTTP error of its status
    and detail (``{"detail": ...}``), as the routes gave before the query layer."""
    assert isinstance(exc, QueryRefused)
    return await http_exception_handler(request, HTTPException(exc.status, exc.detail))
