"""The metric registry: list and read specs (anyone), register and archive metrics (admin).

The served list leaves archived metrics out (devices stop recording them); an archived metric
stays readable by name, for its spec, estimates and export, until retention removes its reports.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from deniable.client.kinds import KINDS, HistogramSpec, NumericSpec, TextSpec
from deniable.client.spec import MetricSpec
from deniable.estimators.documents import MetricAbout
from deniable.estimators.heavyhitters import floor_warnings
from deniable.estimators.privacy import registration_warnings
from deniable.service.body import refuse_duplicate_keys

from ..auth import ADMIN
from ..context import Collector, collector
from ..schemas import ArchivedMetric, MetricList, MetricSpecIn, MetricSpecOut, RegisteredMetric
from ..storage.queries import (
    MetricArchived,
    SpecConflict,
    archive_metric,
    list_described,
    list_specs,
    load_about,
    register_spec,
    registry_fingerprints,
)
from .common import find_spec, json_body, log, problem_responses, read_then

router = APIRouter(tags=["metrics"])


REGISTRY_BODIES_KEPT = 8
"""How many renderings of ``GET /v1/metrics`` are kept, by ETag (content-addressed, so every
app of the process may share them)."""
_registry_bodies: dict[str, bytes] = {}
_registry_lock = threading.Lock()


def registry_etag(rows: list[tuple[str, str, MetricAbout]], *, describe: bool = False) -> str:
    """A strong ETag for the registry holding these (name, fingerprint, description) rows, as
    the list of specs alone or, if ``describe``, with their descriptions (then they count)."""
    if describe:
        lines = ["described", *(json.dumps([n, f, a.as_dict()]) for n, f, a in rows)]
    else:
        lines = [f"{n} {f}" for n, f, _ in rows]
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return f'"{digest[:32]}"'


def described(spec: MetricSpec, about: MetricAbout) -> dict[str, object]:
    """A spec's JSON form with the unit, description and owner it has (null ones left out)."""
    return spec.to_dict() | {k: v for k, v in about.as_dict().items() if v is not None}


def etag_matches(header: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (weak or strong) or is ``*``."""
    if header is None:
        return False
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",")]
    return "*" in tags or etag in tags


@router.get(
    "/v1/metrics",
    response_model=MetricList,
    operation_id="listMetrics",
    summary="List the registered metrics (the specs devices read)",
    responses={304: {"description": "the registry is unchanged since the ETag sent"}},
)
def get_metrics(
    request: Request,
    describe: Annotated[
        bool,
        Query(description="also each metric's unit, description and owner (people's listings)"),
    ] = False,
) -> Response:
    """Every registered metric's resolved spec with its fingerprint, archived ones left out;
    with ``describe=true`` also its unit, description and owner where it has them.

    Devices fetch the list without ``describe``: descriptions are not part of a spec, so they
    neither download them nor fetch the list again when one changes. Answered with an ETag
    (304 to a matching ``If-None-Match``); the list is rendered again only when a registration
    changed it, since parsing thousands of specs costs far more than reading their names and
    fingerprints.
    """
    database = collector(request).database
    etag = registry_etag(registry_fingerprints(database), describe=describe)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if etag_matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    body = _registry_bodies.get(etag)
    if body is None:
        rows = list_described(database, archived=False)
        etag = registry_etag([(s.name, s.fingerprint, a) for s, a in rows], describe=describe)
        headers["ETag"] = etag
        listed = [described(s, a) if describe else s.to_dict() for s, a in rows]
        body = json.dumps({"metrics": listed}, separators=(",", ":")).encode()
        with _registry_lock:
            while len(_registry_bodies) >= REGISTRY_BODIES_KEPT:
                del _registry_bodies[next(iter(_registry_bodies))]
            _registry_bodies[etag] = body
    return Response(body, media_type="application/json", headers=headers)


@router.get(
    "/v1/metrics/{name}",
    response_model=MetricSpecOut,
    operation_id="getMetric",
    summary="Get one registered metric's spec",
    response_model_exclude_none=True,
    responses=problem_responses(404),
)
def get_metric(name: str, request: Request) -> dict[str, object]:
    """One registered metric's spec, with only its type's fields, and its unit, description
    and owner where it has them (as in ``GET /v1/metrics``); 404 if the name is not registered."""
    state, spec = find_spec(request, name)
    return described(spec, load_about(state.database, name))


@router.post(
    "/v1/metrics",
    dependencies=[ADMIN],
    operation_id="registerMetric",
    summary="Register a metric",
    status_code=201,
    response_model=RegisteredMetric,
    responses={
        200: {"model": RegisteredMetric, "description": "the same spec was already registered"},
        **problem_responses(401, 408, 409, 413, 422),
    },
    openapi_extra=json_body(MetricSpecIn.model_json_schema()),
)
async def post_metric(request: Request) -> JSONResponse:
    """Register a metric (``mechanism`` may be ``auto``): 201 if new, 200 if identical, 409 if not.

    ``unit`` (numeric and histogram metrics), ``description`` and ``owner`` are not part of
    the spec: registering the identical spec again with other ones replaces them (200), and
    the fingerprint devices pin stays. The answer is the stored spec with them and
    ``warnings``: whether this registration raised one device's 30-day total with the SDK
    defaults above the warning level (said by every registration that raises it, not by a
    registration of the same spec again; ``GET /v1/privacy`` states the account). The body is
    read only after the admin token is checked (see ``deniable.service.body``).
    """
    return await read_then(request, register_metric)


def parse_spec(body: bytes) -> MetricSpecIn:
    """The registration body by the wire schema; 422 naming each problem (a key given twice
    in one object among them), never quoting a value."""
    refuse_duplicate_keys(body)
    try:
        return MetricSpecIn.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
    if any(error["type"] == "json_invalid" for error in errors):
        raise HTTPException(status_code=422, detail="request body is not valid JSON")
    problems = []
    for error in errors:
        field = ".".join(str(part) for part in error["loc"])
        problems.append(f"{field}: {error['msg']}" if field else error["msg"])
    raise HTTPException(status_code=422, detail="; ".join(problems))


def register_metric(state: Collector, body: bytes) -> JSONResponse:
    """Parse, resolve and store the spec: 201 if new, 200 if identical, 409 if the name is taken
    (by another spec, or by an archived metric); the answer carries the privacy warnings."""
    fields = parse_spec(body).model_dump(exclude_none=True)
    claimed = fields.pop("fingerprint", None)
    about = MetricAbout(**{key: fields.pop(key, None) for key in MetricAbout().as_dict()})
    if KINDS.get(fields["type"]) is HistogramSpec and "categories" in fields:
        # MetricSpec.from_dict ignores them (they are derived); an operator who wrote some
        # must not believe they were registered.
        raise HTTPException(
            status_code=422,
            detail=f"metric {fields['name']}: a histogram has edges only, no categories"
            " (its categories are the bucket labels the edges make)",
        )
    try:
        spec = MetricSpec.from_dict(fields)
        fingerprint = spec.fingerprint
    except (ValueError, TypeError) as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    if about.unit is not None and not isinstance(spec, NumericSpec | HistogramSpec):
        raise HTTPException(
            status_code=422,
            detail=f"unit: metric {spec.name} is {spec.type}; only numeric and histogram"
            " metrics have a unit (leave it out, or say it in the description)",
        )
    if claimed is not None and claimed != fingerprint:
        raise HTTPException(
            status_code=422,
            detail=f"metric {spec.name}: the given fingerprint does not match the resolved spec",
        )
    try:
        created = register_spec(state.database, spec, state.clock(), about)
    except MetricArchived:
        raise HTTPException(
            status_code=409,
            detail=f"metric {spec.name} is archived; an archived name is never registered"
            " again: choose a new name",
        ) from None
    except SpecConflict as exc:
        raise HTTPException(
            status_code=409,
            detail=f"metric {spec.name} already exists with another spec"
            f" (fingerprint {exc.existing.fingerprint}); choose a new name",
        ) from None
    # Registering a spec again changes no total: its warning, if any, was said the first time.
    warnings = (
        registration_warnings(spec, list_specs(state.database, archived=False)) if created else []
    )
    if created and isinstance(spec, TextSpec):
        warnings += floor_warnings(spec.text_randomizer)
    for warning in warnings:
        log.warning("metric %s registered: %s", spec.name, warning)
    return JSONResponse(
        status_code=201 if created else 200,
        content={**described(spec, about), "warnings": warnings},
    )


@router.post(
    "/v1/metrics/{name}/archive",
    dependencies=[ADMIN],
    operation_id="archiveMetric",
    summary="Archive a metric: it takes no more reports",
    response_model=ArchivedMetric,
    responses=problem_responses(401, 404),
)
def post_archive(name: str, request: Request) -> dict[str, object]:
    """Archive a metric: it takes no more reports (422 "metric archived") and leaves
    ``GET /v1/metrics``; its reports stay until retention and its estimates stay readable.
    Its name can never be registered again. Archiving it again changes nothing (200)."""
    state, spec = find_spec(request, name)
    archived = archive_metric(state.database, name, state.clock())
    if archived is None:
        raise HTTPException(status_code=404, detail=f"metric {name!r} is not registered")
    state.specs.forget([name])
    archived_at, newly = archived
    return {
        "name": name,
        "fingerprint": spec.fingerprint,
        "archived_at": archived_at,
        "already_archived": not newly,
    }
