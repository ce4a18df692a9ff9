"""The estimate and series documents: what the collector answers at
``GET /v1/metrics/{name}/estimate`` and ``/series``, and what ``deniable estimate`` and
``deniable series`` print, whether asked of a collector or computed from an exported file.

Each document has one builder here, used by the collector's routes and by the CLI's offline
estimates, so online and offline answers have the same shape by construction. The dataclasses
are the API's response models too (pydantic reads standard dataclasses), so the OpenAPI
document describes exactly what these builders return.

Three shapes, by metric type (DESIGN.md, "Numeric and histogram metrics"): a boolean or
categorical estimate (:class:`RangeEstimate`) has ``estimates``, one row per category; a
histogram's (:class:`HistogramEstimate`) is that plus ``quantiles``; a numeric metric's
(:class:`MeanRangeEstimate`) has ``mean`` in value units with ``lower`` and ``upper`` instead.
A numeric series (:class:`MeanSeries`) carries ``mean`` per period the same way.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from types import UnionType
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin, get_type_hints

from .about import MetricAbout
from .choices import Pooling
from .heavyhitters import TextEstimate, TextSeries
from .results import CategoryEstimate, Estimate, MeanEstimate, PeriodSums, QuantileInterval

if TYPE_CHECKING:
    from deniable.client.kinds import NumericSpec
    from deniable.client.spec import MetricSpec


CLIPPED_MARKS = {"below": "▼", "above": "▲"}
"""How every surface (the CLI's tables, the dashboard's) marks an estimate whose unbiased
value the data pushed below 0 or above 1, shown clipped to the edge of its interval."""


def clipped_mark(row: dict[str, Any]) -> str:
    """The mark of a share row (a document's ``estimates`` entry) whose ``unbiased`` value
    lies outside [0, 1], or ""."""
    if not row.get("clipped"):
        return ""
    return CLIPPED_MARKS["below"] if (row.get("unbiased") or 0.0) < 0 else CLIPPED_MARKS["above"]


@dataclass(frozen=True)
class MetricRange(MetricAbout):
    """Which metric a document is about, and the first and last period it covers.

    ``start`` and ``end`` are null only offline, when a file holds no report in the range and
    the range was not named.
    """

    metric: str
    start: str | None
    end: str | None


@dataclass(frozen=True)
class RangeEstimate(Estimate, MetricRange):
    """A population estimate of one metric over the periods start..end.

    Its fields are metric, start and end, then the estimate's own: a dataclass takes its
    bases' fields starting from the last base listed.
    """


@dataclass(frozen=True)
class HistogramEstimate(RangeEstimate):
    """A histogram's estimate: its buckets' shares as for a categorical metric, plus an
    interval (bucket edges, value units) for each quantile asked for, jointly at
    ``confidence`` whatever ``simultaneous`` says of the shares, and the metric's ``edges``.

    The end buckets are open (values beyond the outer edges are counted in them), so an
    interval's ``low`` or ``high`` is null where the quantile may lie in one: no bound on that
    side, the quantile may be below ``edges[0]`` or above ``edges[-1]``
    (:func:`quantile_bounds` says it in words).
    """

    quantiles: list[QuantileInterval] = field(kw_only=True)
    edges: list[float] = field(kw_only=True)


@dataclass(frozen=True)
class MeanRangeEstimate(MetricRange):
    """The mean of a numeric metric over the periods start..end, in value units.

    ``n`` counts the reports and ``periods`` the periods with reports; ``mean`` lies within
    [``lower``, ``upper``], its estimate and standard error null without reports.
    """

    mechanism: str
    epsilon: float
    n: int
    periods: int
    confidence: float
    pooling: str
    lower: float
    upper: float
    mean: MeanEstimate


@dataclass(frozen=True)
class DeviceCount:
    """An estimated number of devices with its interval: the share's estimate and interval
    times the active devices n (null estimate without reports)."""

    estimate: float | None
    low: float
    high: float


@dataclass(frozen=True)
class Counted:
    """What an event metric's document adds (:func:`counted_document`): what ``n`` counts,
    and for an ``any`` metric over one window the active devices and the estimated number of
    them where the event occurred (PostHog's unique users, with an interval)."""

    counted: str = field(kw_only=True)
    """devices: one report per active device (an event metric that reports empty windows,
    over one window); reports: over more windows, or without report_empty."""
    active_devices: int | None = field(default=None, kw_only=True)
    """An ``any`` metric over one window: the devices active in it (n)."""
    devices_with_event: DeviceCount | None = field(default=None, kw_only=True)
    """An ``any`` metric over one window: the devices where the event occurred, n times the
    share of true and its interval."""


@dataclass(frozen=True)
class EventRangeEstimate(Counted, RangeEstimate):
    """An event metric's shares (a boolean's ``any``, a categorical's ``mode``)."""


@dataclass(frozen=True)
class EventHistogramEstimate(Counted, HistogramEstimate):
    """An event metric's histogram (a count, a sum, a mean per device...)."""


@dataclass(frozen=True)
class EventMeanRangeEstimate(Counted, MeanRangeEstimate):
    """An event metric's mean over devices (a count, a sum, a mean per device...)."""


AnyRangeEstimate = (
    EventHistogramEstimate
    | EventMeanRangeEstimate
    | EventRangeEstimate
    | HistogramEstimate
    | MeanRangeEstimate
    | TextEstimate
    | RangeEstimate
)
"""The estimate document of any metric type (the estimate route's response model)."""


def window_counts_devices(spec: MetricSpec) -> bool:
    """Whether one window's reports of ``spec`` are one per active device: an event metric
    whose rule reports empty windows (every active device sends one report per window,
    docs/STATS.md section 17); a period's reports are one window's."""
    return spec.events is not None and spec.events.report_empty


def counts_devices(spec: MetricSpec, start: str | None, end: str | None) -> bool:
    """Whether ``spec``'s reports over start..end are one per active device
    (:func:`window_counts_devices`) over one window (one period label). Over more windows a
    device sends one report in each, so n counts reports."""
    return window_counts_devices(spec) and start is not None and start == end


def counted_document(spec: MetricSpec, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (an estimate document of ``spec``) saying what its ``n`` counts, for an
    event metric: ``counted`` is "devices" or "reports" (:func:`counts_devices`), and an
    ``any`` metric counted in devices adds ``active_devices`` (n) and ``devices_with_event``,
    n times the share of true with its interval. A metric of recorded values' document is
    returned unchanged (its n counts reports, as it always said)."""
    if spec.events is None:
        return document
    devices = counts_devices(spec, document.get("start"), document.get("end"))
    counted = {**document, "counted": "devices" if devices else "reports"}
    if devices and spec.events.aggregate == "any":
        n = int(document["n"])
        row = next(r for r in document["estimates"] if r["category"] == "true")
        share = row["frequency"]
        counted["active_devices"] = n
        counted["devices_with_event"] = plain(
            DeviceCount(None if share is None else n * share, n * row["ci_low"], n * row["ci_high"])
        )
    return counted


CALENDAR_WINDOWS = {"day": "calendar day", "week": "ISO week", "month": "calendar month"}
"""A calendar window's words, by the metric's period."""


def events_text(spec: MetricSpec) -> str | None:
    """The metric's event rule in words for its pages and listings, "count per device,
    calendar day" or "any per device, rolling 7 days"; None for a metric of recorded values."""
    rule = spec.events
    if rule is None:
        return None
    if rule.rolling:
        window = f"rolling {rule.window} day" + ("s" if rule.window > 1 else "")
    else:
        window = CALENDAR_WINDOWS.get(spec.period, spec.period)
    text = f"{rule.aggregate} per device, {window}"
    if rule.aggregate == "sum":
        text += ", empty windows " + ("reported" if rule.report_empty else "not reported")
    return text


def counted_series(spec: MetricSpec, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (a series document of ``spec``, one point per period) saying what each
    point's ``n`` counts, for an event metric: "devices" where a period's reports are one per
    active device (:func:`window_counts_devices`: each point is one window), else "reports".
    A metric of recorded values' series is returned unchanged."""
    if spec.events is None:
        return document
    return {**document, "counted": "devices" if window_counts_devices(spec) else "reports"}


def counted_n(document: dict[str, Any]) -> str:
    """The document's ``n`` with what it counts, for every surface's label: "1,234 devices"
    where the document says so (:func:`counted_document`), "1,234 reports" otherwise."""
    return f"{document.get('n', 0):,} {counted_unit(document)}"


def counted_unit(document: dict[str, Any]) -> str:
    """What a document's ``n`` counts: ``devices`` where it says so, else ``reports``."""
    return "devices" if document.get("counted") == "devices" else "reports"


def window_n(spec: MetricSpec, n: int) -> str:
    """One period's report count, "1,234 devices" where one period's reports are one per
    active device (:func:`window_counts_devices`), else "1,234 reports"."""
    return f"{n:,} {'devices' if window_counts_devices(spec) else 'reports'}"


@dataclass(frozen=True)
class PeriodPoint:
    """What every point of a series starts with: its period's label and its n, the reports
    its estimate is made from (that period's alone)."""

    period: str
    n: int


@dataclass(frozen=True)
class SeriesPoint(PeriodPoint):
    """One period's own estimate in a series; a period without reports has n = 0."""

    estimates: list[CategoryEstimate]


@dataclass(frozen=True)
class Series(MetricAbout):
    """One estimate per period of a range, oldest first, with the options they share."""

    metric: str
    confidence: float
    method: str
    simultaneous: bool
    series: list[SeriesPoint]


@dataclass(frozen=True)
class MeanSeriesPoint(PeriodPoint):
    """One period's own mean in a numeric series; a period without reports has n = 0."""

    mean: MeanEstimate


@dataclass(frozen=True)
class MeanSeries(MetricAbout):
    """One mean per period of a numeric metric, oldest first, in value units."""

    metric: str
    confidence: float
    lower: float
    upper: float
    series: list[MeanSeriesPoint]


@dataclass(frozen=True)
class HistogramSeriesPoint(SeriesPoint):
    """One period of a histogram's series when quantiles were asked for: its buckets' shares
    and each quantile's interval from that period's reports alone (both ends null without
    reports)."""

    quantiles: list[QuantileInterval] = field(kw_only=True)


@dataclass(frozen=True)
class HistogramSeries(Series):
    """A histogram's series with quantile intervals per period (asked with ``q``), jointly at
    ``confidence`` within each period, and the metric's ``edges``."""

    series: list[HistogramSeriesPoint]  # type: ignore[assignment]
    edges: list[float] = field(kw_only=True)


@dataclass(frozen=True)
class SeriesCounted:
    """What an event metric's series adds (:func:`counted_series`): what each point's ``n``
    counts."""

    counted: str = field(kw_only=True)
    """devices: each point is one window of an event metric that reports empty windows, one
    report per active device; reports: without report_empty."""


@dataclass(frozen=True)
class EventSeries(SeriesCounted, Series):
    """An event metric's series of shares."""


@dataclass(frozen=True)
class EventMeanSeries(SeriesCounted, MeanSeries):
    """An event metric's series of means."""


@dataclass(frozen=True)
class EventHistogramSeries(SeriesCounted, HistogramSeries):
    """An event metric's histogram series with quantiles."""


AnySeries = (
    EventMeanSeries
    | EventHistogramSeries
    | EventSeries
    | MeanSeries
    | HistogramSeries
    | TextSeries
    | Series
)
"""The series document of any metric type (the series route's response model); a histogram's
carries quantiles per period only when they were asked for."""


_LEAVES = frozenset({str, int, float, bool, type(None)})
"""The types :func:`plain` hands back as they are (immutable)."""


def plain(value: Any) -> Any:
    """``value`` with every dataclass in it turned into a dict (lists, tuples and dicts
    rebuilt), as :func:`dataclasses.asdict` does but without deep-copying the leaves (numbers,
    strings: immutable), which cost a breakdown of 10 slices most of its time."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is list or kind is tuple:
        items = _flat_rows(value)
        if items is None:
            items = [item if type(item) in _LEAVES else plain(item) for item in value]
        return items if kind is list else tuple(items)
    if isinstance(value, dict):
        return {key: item if type(item) in _LEAVES else plain(item) for key, item in value.items()}
    shape = _SHAPES.get(kind)
    if shape is None:
        if not is_dataclass(value) or isinstance(value, type):
            return value
        shape = _SHAPES[kind] = _shape(kind)
    names, flat = shape
    held = getattr(value, "__dict__", None)
    if held is not None and tuple(held) == names:  # its fields alone, in order: copied whole
        found = held.copy()
        if not flat:
            for name, item in held.items():
                if type(item) not in _LEAVES:
                    found[name] = plain(item)
        return found
    return {
        name: item if type(item := getattr(value, name)) in _LEAVES else plain(item)
        for name in names
    }


_FIELDS_HELD = operator.attrgetter("__dict__")


def _flat_rows(values: list[Any] | tuple[Any, ...]) -> list[dict[str, Any]] | None:
    """:func:`plain` of each of ``values`` when all are of one dataclass whose fields are all
    declared scalars and each holds its fields alone, in order (an estimate's category rows,
    a series' points): each copied whole, every check a map of a C function over the rows
    rather than a :func:`plain` call per row. None for any other sequence."""
    if not values:
        return None
    kind = type(values[0])
    shape = _SHAPES.get(kind)
    if shape is None:
        if not is_dataclass(kind):
            return None
        shape = _SHAPES[kind] = _shape(kind)
    names, flat = shape
    if not flat or set(map(type, values)) != {kind}:
        return None
    try:
        held = list(map(_FIELDS_HELD, values))
    except AttributeError:  # a dataclass with slots holds no __dict__
        return None
    if not all(map(names.__eq__, map(tuple, held))):
        return None
    return list(map(dict.copy, held))


def _shape(kind: type) -> tuple[tuple[str, ...], bool]:
    """A dataclass's field names, and whether every field is declared a scalar (``str``,
    ``int``, ``float``, ``bool``, None or a union of them): :func:`plain` then has nothing to
    convert inside it (whatever such a field holds, it hands back as it is). A hint that
    cannot be resolved at run time (a name imported for type checking only) counts as not
    scalar."""
    names = tuple(item.name for item in fields(kind))
    try:
        hints = get_type_hints(kind)
    except (NameError, TypeError):
        return names, False
    return names, all(_scalar(hints[name]) for name in names)


def _scalar(hint: Any) -> bool:
    """Whether ``hint`` is a scalar type or a union of scalar types."""
    if get_origin(hint) in (Union, UnionType):
        return all(_scalar(arg) for arg in get_args(hint))
    return hint in _LEAVES


_SHAPES: dict[type, tuple[tuple[str, ...], bool]] = {}
"""Each dataclass's field names and whether all are scalars (:func:`_shape`), as
:func:`plain` met it (``fields`` costs more than the conversion itself)."""


def estimate_document(
    metric: str, start: str | None, end: str | None, estimate: Estimate
) -> dict[str, Any]:
    """The estimate document of ``metric`` over start..end, as a JSON-ready dict."""
    values = {field.name: getattr(estimate, field.name) for field in fields(estimate)}
    return plain(RangeEstimate(metric=metric, start=start, end=end, **values))


def series_document(
    metric: str,
    points: Iterable[tuple[str, Estimate]],
    *,
    confidence: float,
    method: str,
    simultaneous: bool,
) -> dict[str, Any]:
    """The series document of ``metric``: one (period label, its own estimate) per point, in
    the order given, and the options every point was estimated with."""
    series = [SeriesPoint(label, estimate.n, estimate.estimates) for label, estimate in points]
    return plain(Series(metric, confidence, method, simultaneous, series))


def histogram_series_document(
    metric: str,
    points: Iterable[tuple[str, Estimate, Sequence[QuantileInterval]]],
    edges: Sequence[float],
    *,
    confidence: float,
    method: str,
    simultaneous: bool,
) -> dict[str, Any]:
    """The series document of histogram ``metric`` with quantiles: one (period label, its own
    estimate, its own quantile intervals) per point, in the order given, and the edges."""
    series = [
        HistogramSeriesPoint(label, estimate.n, estimate.estimates, quantiles=list(quantiles))
        for label, estimate, quantiles in points
    ]
    document = HistogramSeries(
        metric, confidence, method, simultaneous, series, edges=[float(e) for e in edges]
    )
    return plain(document)


def histogram_document(
    metric: str,
    start: str | None,
    end: str | None,
    estimate: Estimate,
    quantiles: Sequence[QuantileInterval],
    edges: Sequence[float],
) -> dict[str, Any]:
    """The estimate document of histogram ``metric``: its buckets' ``estimate``, the
    ``quantiles`` intervals and its ``edges``."""
    values = {field.name: getattr(estimate, field.name) for field in fields(estimate)}
    document = HistogramEstimate(
        metric=metric,
        start=start,
        end=end,
        quantiles=list(quantiles),
        edges=[float(e) for e in edges],
        **values,
    )
    return plain(document)


def quantile_bounds(
    entry: dict[str, Any], edges: Sequence[float], number: Callable[[float], str]
) -> tuple[str, str]:
    """The words for a quantile interval's two ends (an entry of a histogram document's
    ``quantiles``), each number written by ``number``: an open end says the quantile may lie
    beyond the outer edge, "none: may be below 0" or "none: may be above 200"."""
    low, high = entry.get("low"), entry.get("high")
    low_text = number(low) if low is not None else f"none: may be below {number(edges[0])}"
    high_text = number(high) if high is not None else f"none: may be above {number(edges[-1])}"
    return low_text, high_text


def mean_in_value_units(
    spec: NumericSpec, periods: Sequence[PeriodSums], confidence: float, pooling: Pooling
) -> MeanEstimate:
    """The mean of numeric ``spec`` over ``periods``, in value units; raises
    :class:`~deniable.client.errors.InvalidInput` for bad options or sums."""
    from .numeric import estimate_mean, in_value_units

    result = estimate_mean(
        spec.numeric_randomizer,
        list(periods),
        confidence=confidence,
        pooling=pooling,
    )
    return in_value_units(result, spec.lower, spec.upper)


def mean_document(
    spec: NumericSpec,
    start: str | None,
    end: str | None,
    periods: Sequence[PeriodSums],
    *,
    confidence: float,
    pooling: Pooling,
) -> dict[str, Any]:
    """The estimate document of numeric ``spec`` over start..end from its periods' sums."""
    mean = mean_in_value_units(spec, periods, confidence, pooling)
    return plain(
        MeanRangeEstimate(
            metric=spec.name,
            start=start,
            end=end,
            mechanism=spec.mechanism,
            epsilon=spec.epsilon,
            n=sum(period.n for period in periods),
            periods=sum(1 for period in periods if period.n > 0),
            confidence=confidence,
            pooling=pooling,
            lower=spec.lower,
            upper=spec.upper,
            mean=mean,
        )
    )


def mean_series_document(
    spec: NumericSpec, periods: Sequence[PeriodSums], *, confidence: float
) -> dict[str, Any]:
    """The series document of numeric ``spec``: each period's own mean, in the order given."""
    points = [
        MeanSeriesPoint(
            period.period, period.n, mean_in_value_units(spec, [period], confidence, "overlap-safe")
        )
        for period in periods
    ]
    return plain(MeanSeries(spec.name, confidence, spec.lower, spec.upper, points))
