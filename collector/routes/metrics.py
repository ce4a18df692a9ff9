"""The metric registry: list and read specs (anyone), register one (admin)."""

from __future__ import annotations

from deniable.client.spec import MetricSpec
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from ..auth import require
from ..context import collector
from ..schemas import MetricList, MetricSpecIn, MetricSpecOut, Problem
from ..storage.queries import SpecConflict, list_specs, register_spec

router = APIRouter()


@router.get("/v1/metrics", response_model=MetricList)
def get_metrics(request: Request) -> dict[str, object]:
    """Every registered metric's resolved spec with its fingerprint."""
    return {"metrics": [spec.to_dict() for spec in list_specs(collector(request).database)]}


@router.get("/v1/metrics/{name}", response_model=MetricSpecOut, responses={404: {"model": Problem}})
def get_metric(name: str, request: Request) -> dict[str, object]:
    """One registered metric's spec; 404 if the name is not registered."""
    spec = collector(request).specs.get(name)
    if spec is None:
        raise HTTPException(status_code=404, detail=f"metric {name!r} is not registered")
    return spec.to_dict()


@router.post(
    "/v1/metrics",
    status_code=201,
    response_model=MetricSpecOut,
    responses={
        200: {"model": MetricSpecOut, "description": "the same spec was already registered"},
        401: {"model": Problem},
        409: {"model": Problem},
        422: {"model": Problem},
    },
)
def post_metric(body: MetricSpecIn, request: Request) -> JSONResponse:
    """Register a metric (``mechanism`` may be ``auto``): 201 if new, 200 if identical, 409 if not."""
    state = collector(request)
    require(request, state.settings.admin_tokens(), role="admin")
    fields = body.model_dump(exclude_none=True)
    claimed = fields.pop("fingerprint", None)
    try:
        spec = MetricSpec.from_dict(fields)
        fingerprint = spec.fingerprint
    except (ValueError, TypeError) as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    if claimed is not None and claimed != fingerprint:
        raise HTTPException(
            status_code=422,
            detail=f"metric {spec.name}: the given fingerprint does not match the resolved spec",
        )
    try:
        created = register_spec(state.database, spec, state.clock())
    except SpecConflict as exc:
        raise HTTPException(
            status_code=409,
            detail=f"metric {spec.name} already exists with another spec"
            f" (fingerprint {exc.existing.fingerprint}); choose a new name",
        ) from None
    return JSONResponse(status_code=201 if created else 200, content=spec.to_dict())
