"""Operator calls: raw report export and retention (delete old raw reports, keep counts)."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import uuid
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel

from deniable.client.spec import MetricSpec, period_label, period_start
from deniable.client.wire import parse_payload_text

from ..auth import ADMIN
from ..context import collector
from ..numbers import NumberRule, query_number
from ..queries.ranges import period_bounds
from ..schemas import Payload, RetentionResult
from ..storage.partitions import create_ahead
from ..storage.queries import list_specs, read_reports
from ..storage.retention import purge_before
from .common import (
    DocumentResponse,
    MetricPeriodsQuery,
    find_spec,
    metric_read,
    problem_responses,
)

router = APIRouter(tags=["admin"])

EXPORT_LIMIT = 10_000
"""Reports per export page unless ``limit`` says otherwise."""
EXPORT_MAX_LIMIT = 50_000
"""The largest export page a client may ask for."""


class ExportedReport(BaseModel):
    """One stored raw report: its id, period and randomized payload (never a true value)."""

    id: str
    period: str
    payload: Payload
    dims: dict[str, str] | None = None
    """Its dimension values, for a metric with dimensions (null for a report stored before
    collectors kept them, and for a metric without)."""


class ReportPage(BaseModel):
    """A page of raw reports in (period, id) order and the cursor of the next page (or null)."""

    reports: list[ExportedReport]
    next: str | None


def encode_cursor(period: str, report_id: str) -> str:
    """The opaque cursor that resumes after the report (period, id)."""
    return base64.urlsafe_b64encode(f"{period}/{report_id}".encode()).decode().rstrip("=")


def decode_cursor(spec: MetricSpec, cursor: str) -> tuple[str, str]:
    """The (period, id) a cursor of :func:`encode_cursor` resumes after; 422 if it is not one."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        period, report_id = text.split("/")
        if period_label(spec.period, period_start(spec.period, period)) != period:
            raise ValueError(period)
        if str(uuid.UUID(report_id)) != report_id:
            raise ValueError(report_id)
    except (ValueError, binascii.Error):
        raise HTTPException(
            status_code=422,
            detail=f"after is not a cursor of metric {spec.name}: pass the `next` of a previous page",
        ) from None
    return period, report_id


LIMIT_RULE = NumberRule("limit", 1, EXPORT_MAX_LIMIT, whole=True)
"""How the export's ``limit`` (reports per page) is read."""
LimitQuery = query_number(LIMIT_RULE, int, "reports per page")


@metric_read(
    router,
    "/v1/admin/metrics/{name}/reports",
    ReportPage,
    operation_id="exportReports",
    summary="Export a metric's raw randomized reports, a page at a time",
)
def get_reports(
    request: Request,
    read: MetricPeriodsQuery,
    limit: LimitQuery = EXPORT_LIMIT,
    after: Annotated[
        str | None, Query(max_length=200, description="the `next` cursor of the previous page")
    ] = None,
) -> DocumentResponse:
    """A page of the metric's stored raw reports in (period, id) order, for export, written
    by orjson (validating a page of 10,000 against its model cost more than reading it).

    ``start``/``end`` default to every stored report; pages follow by key (``after``), so a
    page costs the same however deep into the export it is.
    """
    state, spec = find_spec(request, read.name)
    first, last = period_bounds(spec, read.start, read.end)
    position = decode_cursor(spec, after) if after is not None else None
    rows = read_reports(
        state.database, spec.name, start=first, end=last, after=position, limit=limit + 1
    )
    page = rows[:limit]
    more = len(rows) > limit
    return DocumentResponse(
        {
            "reports": [
                {
                    "id": report_id,
                    "period": period,
                    "payload": parse_payload_text(payload),
                    "dims": spec.dims_of(cell),
                }
                for report_id, period, payload, cell in page
            ],
            "next": encode_cursor(page[-1][1], page[-1][0]) if more else None,
        }
    )


@router.post(
    "/v1/admin/retention",
    dependencies=[ADMIN],
    operation_id="deleteExpiredReports",
    summary="Delete raw reports older than the retention window",
    responses=problem_responses(401, 422),
)
def post_retention(
    request: Request,
    before: Annotated[
        dt.date | None,
        Query(description="delete raw reports of periods entirely before this date (YYYY-MM-DD)"),
    ] = None,
) -> RetentionResult:
    """Delete raw reports of periods entirely before ``before`` (default: the retention cutoff).

    Counts stay, so estimates over those periods still work. ``before`` may not be later than
    the retention cutoff: later periods can still receive reports, and a resent report whose
    original was deleted would be counted twice.
    """
    state = collector(request)
    cutoff = state.today() - dt.timedelta(days=state.settings.retention_days)
    if before is None:
        before = cutoff
    if before > cutoff:
        raise HTTPException(
            status_code=422,
            detail=f"before must be on or before {cutoff.isoformat()} (today minus the"
            f" {state.settings.retention_days}-day retention window): later periods still accept reports",
        )
    specs = list_specs(state.database)
    deleted = purge_before(state.database, specs, before)
    create_ahead(state.database, state.today())
    return RetentionResult(before=before.isoformat(), deleted=deleted)
