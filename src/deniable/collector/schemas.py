"""The wire format in pydantic: reports, batches, metric specs and the API's answers.

With the estimate and series documents of :mod:`deniable.estimators.documents`, this is the
schema of the HTTP API; the OpenAPI document is generated from them.
Field checks here are structural (types, UUID form); what depends on a registered metric
(fingerprint, payload domain, period window) is checked in :mod:`.validation`.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    with_config,
)
from typing_extensions import TypedDict

from deniable.client.events import AGGREGATES, WINDOW_DAYS
from deniable.client.spec import Delivery, MetricType, PeriodKind

UNIT_MAX = 16
"""The longest unit a metric may have, in characters (ms, KB, °C, requests/s)."""
DESCRIPTION_MAX = 500
"""The longest description of a metric, in characters."""
OWNER_MAX = 100
"""The longest owner of a metric (a team, a person, an address), in characters."""

UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
"""A report id: a UUID in canonical text form (lowercase, hyphenated)."""

ReportId = Annotated[str, Field(max_length=36, pattern=UUID_PATTERN)]
MetricField = Annotated[str, Field(min_length=1, max_length=64)]
FingerprintField = Annotated[str, Field(min_length=1, max_length=64)]
PeriodField = Annotated[str, Field(min_length=1, max_length=16)]
DIMS_MAX = 8
"""The most dimension values one report's ``dims`` may hold."""

DIM_TEXT_MAX = 32
"""The longest dimension name or value a report may send."""

_DimText = Annotated[str, Field(max_length=DIM_TEXT_MAX)]
DimsField = Annotated[dict[_DimText, _DimText], Field(max_length=DIMS_MAX)]
"""A report's public dimension values, in the clear (checked against its spec in validation)."""


def dims_problem(dims: Any) -> str | None:
    """Why ``dims`` as sent is not a :data:`DimsField`, or None: the parser passes ``dims``
    through (:class:`ReportIn`), and validation asks this once per distinct value of a batch."""
    if type(dims) is not dict:
        return "dims must be an object of dimension names to values"
    if len(dims) > DIMS_MAX:
        return f"dims hold at most {DIMS_MAX} values"
    for name, value in dims.items():
        if type(name) is not str or type(value) is not str:
            return "dims names and values must be strings"
        if len(name) > DIM_TEXT_MAX or len(value) > DIM_TEXT_MAX:
            return f"dims names and values have at most {DIM_TEXT_MAX} characters"
    return None


def _plain_text(value: str) -> str:
    """``value`` if it is one line of printable text: no control character (C0, DEL, C1),
    no line or paragraph separator, not blank. Written into tables, CSV files and terminals,
    such a character could break a line or move the cursor."""
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029" for c in value):
        raise ValueError("must not contain control characters (a line break, a tab, an escape)")
    if not value.strip():
        raise ValueError("must not be blank: leave the field out instead")
    return value


UnitText = Annotated[str, Field(max_length=UNIT_MAX), AfterValidator(_plain_text)]
"""A metric's unit as registered: one line of plain text of at most ``UNIT_MAX`` characters."""
DescriptionText = Annotated[str, Field(max_length=DESCRIPTION_MAX), AfterValidator(_plain_text)]
"""A metric's description as registered: one line of plain text, at most ``DESCRIPTION_MAX``."""
OwnerText = Annotated[str, Field(max_length=OWNER_MAX), AfterValidator(_plain_text)]
"""A metric's owner as registered: one line of plain text, at most ``OWNER_MAX`` characters."""


Payload = StrictInt | StrictFloat | StrictStr | dict[str, StrictInt | StrictStr]
"""An index (brr, krr), a number y (duchi, pm, hybrid), standard base64 bits (oue), an
{a, b, y} object (olh) or a {b, l, r} object (pem: base64 bits, prefix level, sketch row)."""

_STRICT = ConfigDict(extra="forbid", strict=True)


class Report(BaseModel):
    """One randomized report, exactly as a client sends it (the documented wire schema)."""

    model_config = _STRICT

    id: ReportId
    metric: MetricField
    fingerprint: FingerprintField
    period: PeriodField
    payload: Payload = Field(
        description="int (brr, krr), number (duchi, pm, hybrid), base64 string (oue),"
        " {a, b, y} object (olh) or {b, l, r} object (pem)",
        json_schema_extra={"examples": [2, -1.3862, "AQ==", {"a": 12345, "b": 678, "y": 1}]},
    )
    dims: DimsField | None = Field(
        default=None,
        description="the metric's dimension values, NOT randomized: each a listed value or"
        " 'other' (only for a metric that declares dimensions)",
        json_schema_extra={"examples": [{"platform": "ios"}]},
    )


class ReportBatch(BaseModel):
    """The body of ``POST /v1/reports`` (the documented wire schema)."""

    model_config = _STRICT

    reports: list[Report]


@with_config(_STRICT)
class ReportIn(TypedDict):
    """:class:`Report` as the parser builds it: a plain dict, the same fields and checks.

    Ingestion parses into dicts because pydantic-core builds them about twice as fast as
    model instances; a test checks both schemas accept and refuse the same reports. ``dims``
    is passed through as decoded (checking it here cost a fifth of a report's parse, for a
    batch that repeats a few devices' values): validation checks each distinct value once,
    :func:`dims_problem`, then against the spec; a test checks that the two together refuse
    what :class:`Report` refuses.
    """

    id: ReportId
    metric: MetricField
    fingerprint: FingerprintField
    period: PeriodField
    payload: Payload
    dims: NotRequired[Any]


@with_config(_STRICT)
class ReportBatchIn(TypedDict):
    """:class:`ReportBatch` as the parser builds it."""

    reports: list[ReportIn]


REPORT_PARSER: TypeAdapter[ReportIn] = TypeAdapter(ReportIn)
"""Validates one report (already decoded from JSON) into a :class:`ReportIn`."""

BATCH_PARSER: TypeAdapter[ReportBatchIn] = TypeAdapter(ReportBatchIn)
"""Parses and validates a whole request body (raw JSON bytes) in one pydantic-core call."""


class IngestResult(BaseModel):
    """202 answer: how many reports were new and how many had been received before."""

    accepted: int
    duplicates: int


class ReportError(BaseModel):
    """One bad report of a refused batch: its index in ``reports`` and why."""

    index: int | None
    reason: str


class BatchRefused(BaseModel):
    """422 answer to a batch with bad reports; nothing of the batch was stored."""

    detail: list[ReportError]


class Problem(BaseModel):
    """Any other error: ``detail`` names the problem."""

    detail: str


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route that answers each of ``statuses`` with a :class:`Problem`."""
    return {status: {"model": Problem} for status in statuses}


EVENTS_DESCRIPTION = (
    "events aggregated on the device (absent: recorded values): the device keeps one running"
    f" aggregate ({', '.join(AGGREGATES)}) over a window and sends ONE report per window,"
    " however many events it saw; any (boolean) and count must report empty windows, so their"
    " estimates count active devices. See docs/sdk.md"
)
"""What ``events`` means, in the OpenAPI document of a spec."""


class EventRuleIn(BaseModel):
    """A metric's event rule as registered: the aggregation, the window, and whether a device
    that saw no event in a window reports it. Its checks against the metric (the kind's
    aggregations, a rolling window's daily period) are :class:`~deniable.client.events.EventRule`'s
    and answer 422 with its words."""

    model_config = ConfigDict(extra="forbid", strict=True)

    aggregate: str = Field(
        description=f"one of {', '.join(AGGREGATES)}: any (boolean), mode (categorical), the"
        " others (numeric or histogram)",
        json_schema_extra={"examples": ["any", "count", "mean"]},
    )
    window: Literal["period"] | Annotated[StrictInt, Field(ge=1)] = Field(
        default="period",
        description='"period": the metric\'s period (a calendar day, ISO week or month),'
        f" reported when it ends; or {', '.join(map(str, WINDOW_DAYS))}: days of a rolling"
        " window reported every day (the period must be day)",
    )
    report_empty: bool | None = Field(
        default=None,
        description="whether a device that saw no event in a window reports it (default: true"
        " for any and count, which require it; may be true for sum; false for the others)",
    )


class MetricSpecIn(BaseModel):
    """A metric to register; ``mechanism`` may be ``auto`` and is stored resolved.

    Strict: ``"epsilon": true`` or ``"1.0"`` is refused rather than coerced, so what is
    registered is exactly what the operator wrote.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    type: MetricType
    categories: list[str] | None = Field(
        default=None,
        description="categorical and set metrics only (boolean ones are false, true)",
    )
    lower: float | None = Field(default=None, description="numeric metrics: the least value")
    upper: float | None = Field(
        default=None, description="numeric metrics: the greatest value (above lower)"
    )
    edges: list[float] | None = Field(
        default=None,
        description="histogram metrics: the bucket edges, strictly increasing (at least 3)",
    )
    max_length: int | None = Field(
        default=None,
        description="text metrics: the longest string kept, in UTF-8 bytes (1..64; longer"
        " values are cut at a character boundary)",
    )
    max_items: int | None = Field(
        default=None,
        description="set metrics: L, the most categories a device is expected to hold at once"
        " (1..64; a larger set is sampled down to L, biasing its shares low)",
    )
    dimensions: dict[str, list[str]] | None = Field(
        default=None,
        description="public attributes to break estimates down by, NOT randomized:"
        ' {name: [listed values]}, e.g. {"platform": ["ios", "android"]}; every dimension also'
        " has 'other'; at most 1,000 cells (the product of values + 1); not for text metrics",
    )
    delivery: Delivery | None = Field(
        default=None,
        description="how reports may reach the collector: direct (default: straight to it, or"
        " through a shuffler) or shuffled (only through a shuffler: direct uploads are refused"
        " 422 and SDKs without a shuffler do not send them); in the fingerprint when shuffled",
    )
    epsilon: float
    mechanism: str = Field(
        default="auto",
        description="auto, or brr/krr/oue/olh (boolean, categorical, histogram; krr/oue/olh"
        " for a set's oracle), duchi/pm/hybrid (numeric), pem (text)",
    )
    period: PeriodKind = "day"
    fingerprint: str | None = Field(
        default=None, description="optional; if given it must match the resolved spec"
    )
    unit: UnitText | None = Field(
        default=None,
        description="numeric and histogram metrics: the unit of the values (ms, KB, °C)",
    )
    description: DescriptionText | None = Field(
        default=None, description="what the metric measures"
    )
    owner: OwnerText | None = Field(
        default=None, description="who answers for the metric (a team, a person)"
    )
    events: EventRuleIn | None = Field(default=None, description=EVENTS_DESCRIPTION)


class EventRuleOut(BaseModel):
    """A registered metric's event rule, resolved: ``report_empty`` always given."""

    aggregate: str
    window: Literal["period"] | int = Field(
        description='"period" (the metric\'s period) or the days of a rolling window'
    )
    report_empty: bool


class MetricSpecOut(BaseModel):
    """A registered, resolved metric spec with its fingerprint."""

    name: str
    type: MetricType
    categories: list[str] | None = Field(default=None, description="categorical metrics")
    lower: float | None = Field(default=None, description="numeric metrics")
    upper: float | None = Field(default=None, description="numeric metrics")
    edges: list[float] | None = Field(default=None, description="histogram metrics")
    max_length: int | None = Field(default=None, description="text metrics (UTF-8 bytes)")
    max_items: int | None = Field(
        default=None, description="set metrics: the most categories a device holds (L)"
    )
    dimensions: dict[str, list[str]] | None = Field(
        default=None, description="public dimensions and their listed values (not randomized)"
    )
    epsilon: float
    mechanism: str
    period: PeriodKind
    delivery: Delivery | None = Field(
        default=None, description="shuffled: only through a shuffler (absent: direct)"
    )
    fingerprint: str
    unit: str | None = Field(
        default=None, description="numeric and histogram metrics: the unit of the values"
    )
    description: str | None = Field(default=None, description="what the metric measures")
    owner: str | None = Field(default=None, description="who answers for the metric")
    events: EventRuleOut | None = Field(default=None, description=EVENTS_DESCRIPTION)


class RegisteredMetric(MetricSpecOut):
    """The answer to a registration: the stored spec, and warnings about what registering it
    means for one device's privacy account (always present, often empty)."""

    warnings: list[str] = Field(
        description="e.g. this registration raised one device's 30-day total with the SDK"
        " defaults above the warning level (said by every registration that raises it: empty"
        " when the same spec is registered again; GET /v1/privacy states the account,"
        " docs/privacy.md)"
    )


class MetricList(BaseModel):
    """Every registered metric that is not archived (the specs devices should record)."""

    metrics: list[MetricSpecOut]


class ArchivedMetric(BaseModel):
    """An archived metric: when it was archived, and whether this request archived it."""

    name: str
    fingerprint: str
    archived_at: dt.datetime
    already_archived: bool = Field(description="true if it was archived before this request")


class RetentionResult(BaseModel):
    """What a retention run deleted."""

    before: str
    deleted: int


class Health(BaseModel):
    """Liveness answer."""

    status: str


HexId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
"""A batch id: 32 lowercase hex digits."""
KeyIdField = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
"""A sealing key's id: 16 lowercase hex digits."""

MAX_SEALED_CHARS = 8192
"""The longest ``sealed`` field read: base64 of the largest padded report (a 10,000-category
oue metric with 8 dimensions seals to about 2,400 characters)."""


class SealedReport(BaseModel):
    """One sealed report as the shuffler forwards it: the key it is sealed to and its bytes."""

    model_config = ConfigDict(extra="forbid")
    key: KeyIdField
    sealed: Annotated[str, Field(min_length=1, max_length=MAX_SEALED_CHARS)]


class ShuffledPart(BaseModel):
    """A part of a released batch (``POST /v1/shuffled``), in the batch's shuffled order.

    ``batch`` names the batch (a part sent again, or its other parts, repeat it); ``n`` is the
    batch's size, ``parts`` how many parts it is forwarded in; the batch's key is the header its
    reports were sealed under."""

    model_config = ConfigDict(extra="forbid")
    batch: HexId
    part: Annotated[StrictInt, Field(ge=0)]
    parts: Annotated[StrictInt, Field(ge=1, le=1_000_000)]
    n: Annotated[StrictInt, Field(ge=1, le=100_000_000)]
    metric: MetricField
    mechanism: Annotated[str, Field(min_length=1, max_length=16)]
    epsilon: StrictFloat | StrictInt
    fingerprint: Annotated[str, Field(min_length=16, max_length=16)]
    envelopes: list[SealedReport]


class ShuffledResult(BaseModel):
    """A part's reports: stored (new), already stored (a part sent again), and refused (not
    opened, or not valid for their metric: nobody could resend them better)."""

    accepted: int
    duplicates: int
    refused: int


class PublicKey(BaseModel):
    """A sealing key devices may seal to (``current``: the one to use now)."""

    id: str
    public: str
    current: bool


class PublicKeys(BaseModel):
    """``GET /v1/keys``: the collector's public sealing keys."""

    keys: list[PublicKey]
