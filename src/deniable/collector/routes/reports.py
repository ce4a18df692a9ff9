"""``POST /v1/reports``: validate a batch whole, then store it in one durable transaction.
``POST /v1/shuffled``: the same ingestion for a part of a batch the shuffler released, its
sealed reports opened first and the invalid ones left out (nobody could send them better),
how many were refused recorded once per part: they hide nobody, so the account counts the
batch without them.

The ingest key is checked first; the body is then read with a byte budget and a deadline
(413 before it is read whole, 408 if it trickles), parsed by the wire schema (400 for
malformed JSON, 422 naming each bad report), and answered 202 only after the commit.
Nothing of a refused batch is stored.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import operator
import re
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from deniable.client.spec import MetricSpec
from deniable.estimators.shufflingaccount import ShuffledBatch
from deniable.service.body import Refused

from ..auth import INGEST, SHUFFLER
from ..context import Collector, collector
from ..schemas import (
    BATCH_PARSER,
    DIMS_MAX,
    REPORT_PARSER,
    UUID_PATTERN,
    BatchRefused,
    IngestResult,
    ReportIn,
    ShuffledPart,
    ShuffledResult,
)
from ..sealingkeys import KeyFileError, KeyRing, keyring_of
from ..storage.prepare import PreparedBatch, prepare_batch
from ..storage.queries import SpecChanged
from ..storage.shuffled import PartArrival, record_batch, record_part
from ..storage.transaction import StoredBatch
from ..telemetry import Telemetry
from ..unsealing import PARALLEL_FROM, open_part
from ..validation import (
    UNKNOWN_METRIC_LABEL,
    PeriodWindow,
    ReportProblem,
    ValidReport,
    validate_reports,
)
from .common import json_body, log, problem_responses, read_then

router = APIRouter(tags=["reports"])


def _field_reason(error: Any, depth: int = 2) -> str:
    """A client-facing reason for one pydantic error at ``loc[depth]`` (the report's field)."""
    loc = error["loc"]
    field = str(loc[depth]) if len(loc) > depth else None
    if error["type"] == "missing":
        return f"missing field {field!r}"
    if error["type"] == "extra_forbidden":
        return f"unexpected field {field!r}"
    if field == "payload":
        return (
            "payload must be an integer, a number, a base64 string or an object of integers"
            " (and, for text metrics, its base64 string)"
        )
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
            raise Refused(422, "schema", [{"index": None, "reason": BODY_SHAPE}])
        reason = _field_reason(error)
        if reason not in reasons.setdefault(loc[1], []):
            reasons[loc[1]].append(reason)
    return reasons


BODY_SHAPE = 'body must be an object {"reports": [...]} and nothing else'


MAX_REPORT_FIELDS = 8
"""The most keys a report object may hold (a report has five): a report with more is refused
before it is validated, so no report costs more than a few validation errors."""

MAX_PAYLOAD_FIELDS = 8
"""The most keys an object payload may hold (olh's has three), for the same reason."""

MAX_PAYLOAD_CHARS = 4096
"""The longest string payload read (oue's, base64, is 1,668 characters at 10,000 categories):
with the schema's lengths of the other fields, it caps each report's size."""


def _oversized(item: Any) -> str | None:
    """Why a report is too large to validate, or None (a cheap look at the decoded JSON)."""
    if type(item) is not dict:
        return None
    if len(item) > MAX_REPORT_FIELDS:
        return f"a report has five fields; this one has {len(item)}"
    dims = item.get("dims")
    if type(dims) is dict and len(dims) > DIMS_MAX:
        return f"dims hold at most {DIMS_MAX} values"
    payload = item.get("payload")
    if type(payload) is dict and len(payload) > MAX_PAYLOAD_FIELDS:
        return f"payload objects have at most {MAX_PAYLOAD_FIELDS} fields"
    if type(payload) is dict and any(
        type(value) is str and len(value) > MAX_PAYLOAD_CHARS for value in payload.values()
    ):
        return f"payload strings have at most {MAX_PAYLOAD_CHARS} characters"
    if type(payload) is str and len(payload) > MAX_PAYLOAD_CHARS:
        return f"payload strings have at most {MAX_PAYLOAD_CHARS} characters"
    return None


def _decode(body: bytes) -> tuple[Any, bool]:
    """The body decoded, and whether it is strict JSON (RFC 8259).

    orjson decodes strict JSON, the usual body, in half the time; a body it refuses is
    decoded again by the standard library, which also reads the NaN and Infinity that
    Python's ``json`` writes (so such a payload is refused by itself, 422, not the batch).
    """
    try:
        return orjson.loads(body), True
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(body), False
    except (ValueError, RecursionError):
        raise Refused(400, "malformed_json", "request body is not valid JSON") from None


def _count_reports(body: bytes, max_batch: int) -> tuple[Any, bool]:
    """The decoded body and whether it is strict JSON (:func:`_decode`).

    Run before validation, so a body of too many reports is refused 413 before any is
    validated (a 1 MiB body holds up to 349,000 empty objects, and pydantic would build five
    errors for each).
    """
    document, strict = _decode(body)
    if not (
        type(document) is dict
        and document.keys() == {"reports"}
        and type(document["reports"]) is list
    ):
        raise Refused(422, "schema", [{"index": None, "reason": BODY_SHAPE}])
    items = document["reports"]
    if len(items) > max_batch:
        raise Refused(
            413,
            "too_many",
            f"a batch holds at most {max_batch} reports (DENIABLE_MAX_BATCH); this one has"
            f" {len(items):,}",
        )
    return document, strict


def _oversized_reports(items: list[Any]) -> dict[int, str]:
    """The reasons of the reports too large to validate, by index (set aside before the
    parser runs, so no report holds more than a few validation errors)."""
    return {index: reason for index, item in enumerate(items) if (reason := _oversized(item))}


_FIELDS = frozenset(("id", "metric", "fingerprint", "period", "payload"))
_FIELDS_DIMS = _FIELDS | {"dims"}
_UUID = re.compile(UUID_PATTERN)
_LIMITS = (("metric", 64), ("fingerprint", 64), ("period", 16))
"""The wire schema's text fields past the id, with their most characters (:mod:`..schemas`)."""


def _well_formed(item: Any) -> bool:
    """True if ``item`` (decoded strict JSON) is a report :data:`REPORT_PARSER` takes as it is
    and not too large to validate (:func:`_oversized`): the usual report checked in Python,
    without building a second dict; anything else is judged by the parser, which says why."""
    if type(item) is not dict or (item.keys() != _FIELDS and item.keys() != _FIELDS_DIMS):
        return False
    dims = item.get("dims")
    if type(dims) is dict and len(dims) > DIMS_MAX:
        return False
    report_id = item["id"]
    if type(report_id) is not str or len(report_id) != 36 or _UUID.match(report_id) is None:
        return False
    for name, longest in _LIMITS:
        value = item[name]
        if type(value) is not str or not 0 < len(value) <= longest:
            return False
    return _payload_well_formed(item["payload"])


_IDS = re.compile(f"(?:{UUID_PATTERN.strip('^$')})*")
"""Any number of canonical UUIDs back to back (each 36 characters: one match of the joined
ids checks every one)."""
_COLUMNS = operator.itemgetter("id", "metric", "fingerprint", "period", "payload")
_DIMS = operator.itemgetter("dims")
_LONGEST = [longest for _, longest in _LIMITS]


def _short_texts(column: tuple[Any, ...], longest: int) -> bool:
    """Every value of ``column`` is a string of 1 to ``longest`` characters (each distinct
    value looked at once: a batch's metric and fingerprint are mostly one value)."""
    try:
        distinct = set(column)
    except TypeError:  # a list or an object: not a string
        return False
    return (
        set(map(type, distinct)) == {str}
        and min(map(len, distinct)) > 0
        and max(map(len, distinct)) <= longest
    )


def _payload_well_formed(payload: Any) -> bool:
    """A report's payload as :func:`_well_formed` takes it."""
    kind = type(payload)
    if kind is str:
        return len(payload) <= MAX_PAYLOAD_CHARS
    if kind is int or kind is float:
        return True
    return (
        kind is dict
        and len(payload) <= MAX_PAYLOAD_FIELDS
        and all(
            type(key) is str
            and (type(value) is int or (type(value) is str and len(value) <= MAX_PAYLOAD_CHARS))
            for key, value in payload.items()
        )
    )


def _all_well_formed(items: list[Any]) -> bool:
    """True only if every item is :func:`_well_formed`: the usual batch (every report with
    the same fields) checked column by column, each pass a map of a C function rather than
    a Python call per report (one by one, they took a tenth of the collector's CPU in a
    profile of oue uploads). False sends the batch to the report-by-report check."""
    if not items or set(map(type, items)) != {dict}:
        return False
    fields = _FIELDS_DIMS if "dims" in items[0] else _FIELDS
    if set(map(len, items)) != {len(fields)}:
        return False
    try:  # each report has the five fields (and dims): of its size, no other field
        ids, metrics, fingerprints, periods, payloads = zip(*map(_COLUMNS, items), strict=True)
        dims = list(map(_DIMS, items)) if fields is _FIELDS_DIMS else None
    except KeyError:
        return False
    if not (
        set(map(type, ids)) == {str}
        and set(map(len, ids)) == {36}
        and _IDS.fullmatch("".join(ids)) is not None
        and all(map(_short_texts, (metrics, fingerprints, periods), _LONGEST))
    ):
        return False
    if dims is not None and (set(map(type, dims)) != {dict} or max(map(len, dims)) > DIMS_MAX):
        return False
    kinds = set(map(type, payloads))
    if kinds == {str}:
        return max(map(len, payloads)) <= MAX_PAYLOAD_CHARS
    if kinds <= {int, float}:
        return True
    return all(map(_payload_well_formed, payloads))


def parse_batch(
    body: bytes, max_batch: int, lookup: Callable[[str], MetricSpec | None]
) -> tuple[list[tuple[int, ReportIn]], list[ReportProblem]]:
    """Parse the body by the wire schema: the well-formed reports by index, and the others' problems.

    Raises 400 for malformed JSON, 413 for too many reports, 422 for a body of the wrong shape.
    The reports are counted (and the too large ones set aside) before any is validated.
    """
    document, strict = _count_reports(body, max_batch)
    items = document["reports"]
    if strict and (_all_well_formed(items) or all(map(_well_formed, items))):
        return list(enumerate(items)), []
    oversized = _oversized_reports(items)
    if not oversized:
        try:
            # Strict JSON decoded by orjson is validated as it is: not parsed a second time.
            batch = (
                BATCH_PARSER.validate_python(document)
                if strict
                else BATCH_PARSER.validate_json(body)
            )
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False)
        else:
            return list(enumerate(batch["reports"])), []
        if any(e["type"] == "json_invalid" for e in errors):
            raise Refused(400, "malformed_json", "request body is not valid JSON")
        reasons = _schema_problems(errors)
    else:
        reasons = {}
    good: list[tuple[int, ReportIn]] = []
    problems: list[ReportProblem] = []
    for index, item in enumerate(items):
        if index in oversized:
            problems.append(ReportProblem(index, UNKNOWN_METRIC_LABEL, "schema", oversized[index]))
            continue
        if index in reasons:
            name = item.get("metric") if isinstance(item, dict) else None
            label = (
                name if isinstance(name, str) and lookup(name) is not None else UNKNOWN_METRIC_LABEL
            )
            problems.append(ReportProblem(index, label, "schema", "; ".join(reasons[index])))
            continue
        try:
            good.append((index, REPORT_PARSER.validate_python(item)))
        except ValidationError as exc:
            reason = "; ".join(
                dict.fromkeys(
                    _field_reason(e, 0) for e in exc.errors(include_url=False, include_input=False)
                )
            )
            problems.append(ReportProblem(index, UNKNOWN_METRIC_LABEL, "schema", reason))
    return good, problems


SPEC_ATTEMPTS = 3
"""How many times one batch is validated at most: again after the database said a cached spec
was stale, since the registry may have changed underneath the running collector."""


def ingest(state: Collector, body: bytes) -> JSONResponse:
    """Parse, validate and store one batch; the whole request's work after the body is read.

    Validation uses the cached specs; the write transaction checks them against the
    database's. A stale one (the database dropped and migrated again, the metric gone or
    registered anew) is forgotten and the batch validated again against the current specs, so
    a report they refuse is 422 and nothing of the batch is stored. A fingerprint mismatch is
    checked the same way before it is refused, so a client with the new spec is not refused
    for the collector's stale one.
    """
    with state.cpu_turn:
        reports, problems = parse_batch(body, state.settings.max_batch, state.specs.cached)
    for _ in range(SPEC_ATTEMPTS):
        window = PeriodWindow(state.today(), state.settings.retention_days)
        with state.cpu_turn:
            valid, more_problems, specs = validate_reports(
                reports, state.specs.cached, window, state.specs.archived, direct=True
            )
        refused = sorted(problems + more_problems, key=lambda p: p.index)
        if refused:
            mismatched = {p.metric_label for p in refused if p.code == "fingerprint"}
            if mismatched and state.specs.changed(specs[name] for name in mismatched):
                continue
            return _refuse(state.telemetry, refused)
        try:
            stored = state.writer.store(_prepared(state, valid, specs, state.today()))
        except SpecChanged as exc:
            state.specs.forget(exc.metrics)
            continue
        return _accepted(state.telemetry, stored)
    raise Refused(503, "registry_changed", "the metric registry kept changing; retry the batch")


def _prepared(
    state: Collector, valid: list[ValidReport], specs: dict[str, MetricSpec], day: dt.date
) -> PreparedBatch:
    """The valid reports prepared for the writer, in the request thread's turn
    (:attr:`.Collector.cpu_turn`)."""
    with state.cpu_turn:
        return prepare_batch(
            valid,
            specs,
            day,
            dialect=state.database.dialect,
            received_at=state.clock().timestamp(),
        )


def _refuse(telemetry: Telemetry, problems: list[ReportProblem]) -> JSONResponse:
    """422 naming each refused report, counted by metric and reason."""
    for problem in problems:
        telemetry.rejected.labels(telemetry.metric_label(problem.metric_label), problem.code).inc()
    detail = [{"index": p.index, "reason": p.message} for p in problems]
    return JSONResponse(status_code=422, content={"detail": detail})


def _accepted(telemetry: Telemetry, stored: StoredBatch) -> JSONResponse:
    """202 with the new and duplicate reports of a committed batch, counted by metric."""
    for metric, count in stored.accepted_by_metric.items():
        telemetry.accepted.labels(telemetry.metric_label(metric)).inc(count)
    for metric, count in stored.duplicates_by_metric.items():
        telemetry.duplicates.labels(telemetry.metric_label(metric)).inc(count)
    return JSONResponse(
        status_code=202, content={"accepted": stored.accepted, "duplicates": stored.duplicates}
    )


@router.post(
    "/v1/reports",
    dependencies=[INGEST],
    operation_id="uploadReports",
    summary="Upload a batch of randomized reports",
    status_code=202,
    response_model=IngestResult,
    responses={**problem_responses(400, 401, 408, 413), 422: {"model": BatchRefused}},
    openapi_extra=json_body({"$ref": "#/components/schemas/ReportBatch"}),
)
async def post_reports(request: Request) -> JSONResponse:
    """Ingest a batch of randomized reports, all or nothing; 202 after the durable commit."""
    return await _store_upload(request, ingest)


async def _store_upload(
    request: Request, store: Callable[[Collector, bytes], JSONResponse]
) -> JSONResponse:
    """Read an upload's body within the collector's byte budget and deadline, then ``store``
    it off the event loop; a refused upload is counted by its reason before it is answered."""
    try:
        return await read_then(request, store)
    except Refused as exc:
        collector(request).telemetry.batches_rejected.labels(exc.code).inc()
        raise


def _keyring(state: Collector) -> KeyRing:
    """The collector's sealing keys; 503 naming the setting when none are configured."""
    try:
        return keyring_of(state.settings.sealing_keys_file, state.settings.sealing_key_grace_days)
    except KeyFileError as exc:
        raise Refused(503, "no_keys", str(exc)) from None


def _parse_part(state: Collector, body: bytes) -> ShuffledPart:
    """The part a body holds; 400/422 naming the problem, 413 past ``max_batch`` reports."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise Refused(400, "malformed_json", "request body is not valid JSON") from None
    envelopes = document.get("envelopes") if type(document) is dict else None
    limit = state.settings.max_batch
    if type(envelopes) is list and len(envelopes) > limit:
        raise Refused(
            413, "too_many", f"a part holds at most {limit} sealed reports (DENIABLE_MAX_BATCH)"
        )
    try:
        part = ShuffledPart.model_validate(document)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(item) for item in first["loc"]) or "body"
        raise Refused(422, "schema", f"{where}: {first['msg']}") from None
    minimum = state.settings.shuffle_min_batch
    if part.n < minimum:
        raise Refused(
            422,
            "small_batch",
            f"a shuffled batch holds at least {minimum} reports (DENIABLE_SHUFFLE_MIN_BATCH);"
            f" this one holds {part.n}",
        )
    if part.part >= part.parts or len(part.envelopes) > part.n:
        raise Refused(422, "schema", "part must be below parts, and envelopes at most n")
    if part.parts == 1 and len(part.envelopes) != part.n:
        raise Refused(
            422,
            "short_batch",
            f"a batch of one part carries its n = {part.n} sealed reports; this one carries"
            f" {len(part.envelopes)}",
        )
    return part


def _registered_spec(state: Collector, part: ShuffledPart) -> MetricSpec:
    """The spec ``part``'s metric is registered with now, if the part's header (mechanism, eps,
    fingerprint) is that spec's; 422 naming the difference otherwise (a batch of an unknown
    metric, or sealed under another spec, would be accounted at an eps nobody registered)."""
    spec = state.specs.get(part.metric)
    if spec is None:
        raise Refused(422, "unknown_metric", f"metric {part.metric} is not registered")
    stated = {
        "mechanism": part.mechanism,
        "epsilon": float(part.epsilon),
        "fingerprint": part.fingerprint,
    }
    registered = {
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "fingerprint": spec.fingerprint,
    }
    differ = [name for name in stated if stated[name] != registered[name]]
    if differ:
        detail = ", ".join(
            f"{name} {stated[name]!r} (registered: {registered[name]!r})" for name in differ
        )
        raise Refused(
            422,
            "header_mismatch",
            f"the batch's header disagrees with metric {part.metric}'s registered spec: {detail}",
        )
    return spec


def ingest_shuffled(state: Collector, body: bytes) -> JSONResponse:
    """Check the part's header against its metric's registered spec, record the batch (once),
    open the part's sealed reports and store the valid ones, dated by the batch's release day:
    the reports of a batch share one day, in shuffled order. Then record the part (once: a part
    sent again after a lost answer recounts nothing) with how many it refused and how many
    distinct reports it stored anew, which the account counts as the batch's devices."""
    part = _parse_part(state, body)
    spec = _registered_spec(state, part)
    keys = _keyring(state)
    now = state.clock()
    header = ShuffledBatch(
        metric=part.metric,
        mechanism=part.mechanism,
        epsilon=float(part.epsilon),
        n=0,
        batch=part.batch,
        fingerprint=part.fingerprint,
        released_at=now,
        declared=part.n,
    )
    batch = record_batch(state.database, header, part.parts)
    if batch is None:
        raise Refused(422, "batch_reused", f"batch {part.batch} was recorded with another header")
    try:
        if len(part.envelopes) >= PARALLEL_FROM:  # the worker pool opens it: no turn held
            opened = open_part(part, spec, keys)
        else:
            with state.cpu_turn:
                opened = open_part(part, spec, keys)
    except KeyFileError as exc:
        raise Refused(503, "no_keys", str(exc)) from None
    refused = opened.refused
    stored = StoredBatch()
    if opened.texts:
        body = f'{{"reports":[{",".join(opened.texts)}]}}'.encode()
        with state.cpu_turn:
            reports, problems = parse_batch(body, len(opened.texts), state.specs.cached)
        refused += len(problems)
        arrival = PartArrival(part.batch, part.part, refused)
        stored = _store_valid(state, reports, (batch.released_at or now).date(), arrival)
        refused += len(reports) - stored.accepted - stored.duplicates
    if not stored.accepted + stored.duplicates:
        record_part(state.database, part.batch, part.part, refused, 0)
    for metric, count in stored.accepted_by_metric.items():
        state.telemetry.accepted.labels(state.telemetry.metric_label(metric)).inc(count)
    if refused:
        log.warning(
            "a shuffled batch of %s left out %d of %d sealed reports (not opened, of another"
            " batch, or invalid); the account counts the batch without them",
            state.telemetry.metric_label(part.metric),
            refused,
            len(part.envelopes),
        )
    return JSONResponse(
        status_code=202,
        content={"accepted": stored.accepted, "duplicates": stored.duplicates, "refused": refused},
    )


def _store_valid(
    state: Collector, reports: list[tuple[int, ReportIn]], day: dt.date, arrival: PartArrival
) -> StoredBatch:
    """Store the valid ones of ``reports`` (the others are left out), received on ``day``, and
    record their part ``arrival`` (its refusals and the invalid ones among ``reports``) in the
    same transaction."""
    for _ in range(SPEC_ATTEMPTS):
        window = PeriodWindow(state.today(), state.settings.retention_days)
        with state.cpu_turn:
            valid, _problems, specs = validate_reports(
                reports, state.specs.cached, window, state.specs.archived
            )
        if not valid:
            return StoredBatch()
        invalid = len(reports) - len(valid)
        arrived = dataclasses.replace(arrival, refused=arrival.refused + invalid)
        try:
            prepared = _prepared(state, valid, specs, day)
            return state.writer.store(dataclasses.replace(prepared, part=arrived))
        except SpecChanged as exc:
            state.specs.forget(exc.metrics)
    raise Refused(503, "registry_changed", "the metric registry kept changing; retry the part")


@router.post(
    "/v1/shuffled",
    dependencies=[SHUFFLER],
    operation_id="uploadShuffled",
    summary="Forward a part of a released shuffled batch (the shuffler only)",
    status_code=202,
    response_model=ShuffledResult,
    responses=problem_responses(400, 401, 403, 408, 413, 422, 503),
    openapi_extra=json_body({"$ref": "#/components/schemas/ShuffledPart"}),
)
async def post_shuffled(request: Request) -> JSONResponse:
    """Open a part of a shuffled batch and store its reports; 202 after the durable commit.
    Idempotent: a part sent again stores nothing new."""
    return await _store_upload(request, ingest_shuffled)
