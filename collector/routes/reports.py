"""``POST /v1/reports``: validate a batch whole, then store it in one durable transaction.

The body is read with a byte budget (413 before it is read whole), parsed by the wire
schema (400 for malformed JSON, 422 naming each bad report), and answered 202 only after
the commit. Nothing of a refused batch is stored.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from typing import Any

from deniable.client.spec import MetricSpec
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ..auth import require
from ..context import Collector, collector
from ..schemas import BATCH_PARSER, REPORT_PARSER, BatchRefused, IngestResult, ReportIn
from ..schemas import Problem as ProblemOut
from ..storage.ingest import prepare_batch
from ..validation import UNKNOWN_METRIC_LABEL, PeriodWindow, Problem, validate_reports

router = APIRouter()

GC_THRESHOLDS = (50_000, 20, 50)
"""Young-generation threshold raised from CPython's 700: a batch allocates thousands of
containers that reference counting frees anyway, and collecting them cost a third of the
ingestion CPU."""


def tune_garbage_collector() -> None:
    """Freeze the objects alive after start-up and collect less often (call once per process).

    Reference counting frees almost everything ingestion allocates; the cyclic collector
    only needs to run now and then, and never needs to walk the start-up heap again.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class BatchError(HTTPException):
    """A batch refused as a whole, with the telemetry reason code."""

    def __init__(self, status: int, code: str, detail: Any) -> None:
        super().__init__(status_code=status, detail=detail)
        self.code = code


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing with 413 as soon as it exceeds ``limit`` bytes."""
    too_large = BatchError(413, "too_large", f"request body exceeds {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise BatchError(400, "bad_length", "Content-Length is not a number")
        if int(declared) > limit:
            raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _field_reason(error: Any, depth: int = 2) -> str:
    """A client-facing reason for one pydantic error at ``loc[depth]`` (the report's field)."""
    loc = error["loc"]
    field = str(loc[depth]) if len(loc) > depth else None
    if error["type"] == "missing":
        return f"missing field {field!r}"
    if error["type"] == "extra_forbidden":
        return f"unexpected field {field!r}"
    if field == "payload":
        return "payload must be an integer, a base64 string or an object of integers"
    if field == "id" and error["type"] == "string_pattern_mismatch":
        return "id must be a UUID in canonical text form (lowercase, hyphenated)"
    if field is None:
        return "each report must be a JSON object"
    return f"{field}: {error['msg']}"


def _schema_problems(errors: list[Any]) -> dict[int, list[str]]:
    reasons: dict[int, list[str]] = {}
    for error in errors:
        loc = error["loc"]
        if not (len(loc) >= 2 and loc[0] == "reports" and isinstance(loc[1], int)):
            raise BatchError(422, "schema", [{"index": None, "reason": BODY_SHAPE}])
        reason = _field_reason(error)
        if reason not in reasons.setdefault(loc[1], []):
            reasons[loc[1]].append(reason)
    return reasons


BODY_SHAPE = 'body must be an object {"reports": [...]} and nothing else'


def parse_batch(
    body: bytes, max_batch: int, lookup: Callable[[str], MetricSpec | None]
) -> tuple[list[tuple[int, ReportIn]], list[Problem]]:
    """Parse the body by the wire schema: the well-formed reports by index, and the others' problems.

    Raises 400 for malformed JSON, 413 for too many reports, 422 for a body of the wrong shape.
    """
    try:
        batch = BATCH_PARSER.validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
    else:
        if len(batch["reports"]) > max_batch:
            raise BatchError(413, "too_many", f"a batch holds at most {max_batch} reports")
        return list(enumerate(batch["reports"])), []
    if any(e["type"] == "json_invalid" for e in errors):
        raise BatchError(400, "malformed_json", "request body is not valid JSON")
    reasons = _schema_problems(errors)
    try:
        items = json.loads(body)["reports"]
    except (ValueError, KeyError, TypeError):
        raise BatchError(400, "malformed_json", "request body is not valid JSON") from None
    if len(items) > max_batch:
        raise BatchError(413, "too_many", f"a batch holds at most {max_batch} reports")
    good: list[tuple[int, ReportIn]] = []
    problems: list[Problem] = []
    for index, item in enumerate(items):
        if index in reasons:
            name = item.get("metric") if isinstance(item, dict) else None
            known = isinstance(name, str) and lookup(name) is not None
            label = name if known else UNKNOWN_METRIC_LABEL
            problems.append(Problem(index, label, "schema", "; ".join(reasons[index])))  # type: ignore[arg-type]
            continue
        try:
            good.append((index, REPORT_PARSER.validate_python(item)))
        except ValidationError as exc:
            reason = "; ".join(_field_reason(e, 0) for e in exc.errors(include_url=False))
            problems.append(Problem(index, UNKNOWN_METRIC_LABEL, "schema", reason))
    return good, problems


def ingest(state: Collector, body: bytes) -> JSONResponse:
    """Parse, validate and store one batch; the whole request's work after the body is read."""
    telemetry = state.telemetry
    reports, problems = parse_batch(body, state.settings.max_batch, state.specs.get)
    window = PeriodWindow(state.today(), state.settings.retention_days)
    valid, more_problems, specs = validate_reports(reports, state.specs.get, window)
    problems = sorted(problems + more_problems, key=lambda p: p.index)
    if problems:
        for problem in problems:
            telemetry.rejected.labels(problem.metric_label, problem.code).inc()
        detail = [{"index": p.index, "reason": p.message} for p in problems]
        return JSONResponse(status_code=422, content={"detail": detail})
    stored = state.writer.store(prepare_batch(valid, specs, state.today()))
    for metric, count in stored.accepted_by_metric.items():
        telemetry.accepted.labels(metric).inc(count)
    for metric, count in stored.duplicates_by_metric.items():
        telemetry.duplicates.labels(metric).inc(count)
    return JSONResponse(
        status_code=202, content={"accepted": stored.accepted, "duplicates": stored.duplicates}
    )


@router.post(
    "/v1/reports",
    status_code=202,
    response_model=IngestResult,
    responses={
        400: {"model": ProblemOut},
        401: {"model": ProblemOut},
        413: {"model": ProblemOut},
        422: {"model": BatchRefused},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ReportBatch"}}
            },
        }
    },
)
async def post_reports(request: Request) -> JSONResponse:
    """Ingest a batch of randomized reports, all or nothing; 202 after the durable commit."""
    state = collector(request)
    try:
        require(request, state.settings.ingest_tokens(), role="ingest")
        body = await read_body(request, state.settings.max_body_bytes)
        return await run_in_threadpool(ingest, state, body)
    except BatchError as exc:
        state.telemetry.batches_rejected.labels(exc.code).inc()
        raise
    except HTTPException:
        state.telemetry.batches_rejected.labels("unauthorized").inc()
        raise
