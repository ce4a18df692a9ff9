"""Metric specs: the common base of every metric kind, the limits specs are held to, and
their fingerprints.

A spec is immutable once registered; its fingerprint (SHA-256 over RFC 8785 canonical JSON
of the resolved fields) travels in every report so that an estimate never mixes reports
made under different parameters. Each kind (categorical with boolean, histogram, numeric,
text, set) is a subclass in :mod:`.kinds`; the type string is read once, by :meth:`MetricSpec.from_dict`
through the registry :data:`.kinds.KINDS`. The period calendar (:mod:`.calendar`) and canonical
JSON (:mod:`.canonical`) are importable from here as well, as many modules import them so.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import hashlib
import math
import numbers
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any, ClassVar, Literal

from .calendar import PERIOD_KINDS as PERIOD_KINDS
from .calendar import PeriodKind as PeriodKind
from .calendar import next_period as next_period
from .calendar import period_count as period_count
from .calendar import period_label as period_label
from .calendar import period_range as period_range
from .calendar import period_start as period_start
from .calendar import resolve_period as resolve_period
from .canonical import canonical_json
from .errors import InvalidInput, SpecError
from .events import EventRule
from .mechanisms import Mechanism, NumericMechanism, PaddingSampling, Payload, PrefixSketch

MetricType = Literal["boolean", "categorical", "numeric", "histogram", "text", "set"]
METRIC_TYPES: tuple[str, ...] = ("boolean", "categorical", "numeric", "histogram", "text", "set")
Delivery = Literal["direct", "shuffled"]
DELIVERIES: tuple[str, ...] = ("direct", "shuffled")
"""How a metric's reports may reach the collector: ``direct`` (straight to it, or through a
shuffler if the device has one) or ``shuffled`` (only through a shuffler: the collector refuses
direct uploads, and an SDK without a shuffler does not send them)."""

BOOLEAN_CATEGORIES = ("false", "true")
METRIC_NAME = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
"""What a metric name may be (match it with ``fullmatch``)."""


NUMERIC_MAGNITUDE = 1e300
"""The largest |lower| and |upper| of a numeric metric: the estimate's standard error in value
units is up to a few thousand times the range's width, which must stay a finite float."""

NUMERIC_RESOLUTION = 1e-12
"""The narrowest numeric range relative to its larger end (and 1e-300 absolutely): narrower,
mapping a value to t in [-1, 1] and back rounds it to a handful of steps or to subnormal numbers."""


def finite_number(value: Any, what: str) -> float:
    """``value`` as a finite float, or :class:`~.errors.SpecError` naming ``what`` (an int
    too large for a float counts as infinite)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{what} must be a finite number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise SpecError(f"{what} must be a finite number")
    return number


DIMENSION_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
"""What a dimension's name may be (match it with ``fullmatch``)."""
DIMENSION_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}")
"""What a dimension's listed value may be: short, ASCII, no ``:`` or ``,`` (the query
syntax ``where=platform:ios`` and the stored cell text use them)."""
OTHER = "other"
"""The value every dimension has besides its listed ones: what an unlisted value is sent as."""
MAX_DIMENSION_VALUES = 64
"""The most values one dimension may list (``other`` besides). Dimensions travel in the clear,
so each must be a coarse attribute that many devices share: platform, OS or app version,
region, a product's main countries. At 10,000 devices, about the fewest an LDP estimate is
worth making with, 65 values share them in groups of about 150 on average, above the 100
reports below which a breakdown suppresses a slice; a longer list names groups too small to
estimate and nearer to identifying a device (``user: u0000..u0998`` is an identifier)."""
_REGISTERED = contextvars.ContextVar("deniable_registered_spec", default=False)


@contextlib.contextmanager
def registered_specs() -> Iterator[None]:
    """Inside the block, specs are read back from where they were registered (a collector's
    database, its API to an analyst, an archive): :data:`MAX_DIMENSION_VALUES` and
    :data:`MAX_DIMENSION_CELLS`, newer than some of them, are not applied again, so what a collector accepted stays readable. A new
    spec (registration, the SDKs' factories) and a spec served to a device are held to it."""
    token = _REGISTERED.set(True)
    try:
        yield
    finally:
        _REGISTERED.reset(token)


MAX_CELLS = 1000
"""The most cells any metric's dimensions may make, a stored one too: the product of (listed
values + 1). A new spec is held to the lower :data:`MAX_DIMENSION_CELLS`."""
MAX_DIMENSION_CELLS = MAX_DIMENSION_VALUES + 1
"""The most cells a new spec's dimensions may make together (the product of (listed values +
1)): as many as one dimension at :data:`MAX_DIMENSION_VALUES` makes. The cells are what the
clear attributes split devices into, so the reasoning for 64 values holds for the product: 65
cells share 10,000 devices in groups of about 150; splitting an identifier over two dimensions
(``uhi`` × ``ulo``, 31 and 30 values: 992 cells) would otherwise get round the value cap."""
MAX_TEXT_CELLS = 50
"""The most cells a text metric's dimensions may make. Its heavy hitters are decoded per slice
from the slice's own sketch, whose floor grows as 1/sqrt(its reports): a slice of 1/50 of the
reports has a floor over 7 times the whole population's (4.5% where the whole finds 0.59%,
8-byte strings at eps 4, 1e6 reports; 4.9% at the alpha a 50-slice breakdown gives each), so
finer cells find next to nothing."""
MAX_TEXT_CELL_COUNTS = 2_000_000
"""The most sketch counts a text metric with dimensions keeps per period over all its cells
(cells × levels × 16 × 1,025): the counts a breakdown of every cell of one period reads stay
within the collector's default estimate limit (``DENIABLE_MAX_ESTIMATE_CELLS``, 2,000,000), so
such a breakdown is never refused at the defaults; and the worst-case rows a period stores
are at most about twice those of the largest text metric without dimensions (64 bytes:
1,049,600). 8-byte strings take up to 15 cells, 16-byte ones 7, 32-byte ones 3."""

Dimensions = tuple[tuple[str, tuple[str, ...]], ...]
"""A spec's dimensions: (name, listed values) pairs, sorted by name."""


def dimensions_from_json(metric: Any, raw: Any) -> Dimensions:
    """The JSON form ``{"platform": ["ios", "android"]}`` as :data:`Dimensions`."""
    if not isinstance(raw, dict):
        raise SpecError(
            f"metric {metric}: dimensions must be an object of name: [values],"
            ' like {"platform": ["ios", "android", "web"]}'
        )
    return tuple((name, values) for name, values in raw.items())


def dims_argument(dimensions: Mapping[str, Sequence[str]] | None) -> Dimensions:
    """A factory's ``dimensions`` argument as (name, values) pairs (checked by the spec)."""
    return tuple((name, tuple(values)) for name, values in (dimensions or {}).items())


def check_dimensions(metric: str, dimensions: Any) -> Dimensions:
    """Check a spec's dimensions (names, listed values, the cell cap) and sort them by name;
    :class:`~.errors.SpecError` names the problem."""
    if isinstance(dimensions, dict):
        dimensions = tuple(dimensions.items())
    checked = []
    for entry in dimensions:
        name, values = entry
        if not isinstance(name, str) or not DIMENSION_NAME.fullmatch(name):
            raise SpecError(
                f"metric {metric}: a dimension name must start with a lowercase letter and use"
                " only a-z, 0-9, _ (at most 32 characters)"
            )
        if not isinstance(values, list | tuple) or not values:
            raise SpecError(f"metric {metric}: dimension {name} needs a non-empty list of values")
        for value in values:
            if not isinstance(value, str) or not DIMENSION_VALUE.fullmatch(value):
                raise SpecError(
                    f"metric {metric}: dimension {name}'s values must be short ASCII words"
                    " (A-Z, a-z, 0-9, _ . + -, at most 32 characters)"
                )
        if OTHER in values:
            raise SpecError(
                f"metric {metric}: dimension {name} may not list {OTHER!r}: every dimension has"
                " it already, for values not listed"
            )
        if len(set(values)) != len(values):
            raise SpecError(f"metric {metric}: dimension {name}'s values must be distinct")
        if len(values) > MAX_DIMENSION_VALUES and not _REGISTERED.get():
            raise SpecError(
                f"metric {metric}: dimension {name} lists {len(values):,} values; at most"
                f" {MAX_DIMENSION_VALUES} are allowed: a dimension travels in the clear and must"
                " be a coarse attribute many devices share, never an identifier (docs/privacy.md)"
            )
        checked.append((name, tuple(values)))
    if len({name for name, _ in checked}) != len(checked):
        raise SpecError(f"metric {metric}: dimension names must be distinct")
    cells = math.prod(len(values) + 1 for _, values in checked)
    if cells > MAX_CELLS:
        raise SpecError(
            f"metric {metric}: its dimensions make {cells:,} cells (each dimension's values"
            f" plus {OTHER!r}, multiplied); at most {MAX_CELLS:,} are allowed"
        )
    if cells > MAX_DIMENSION_CELLS and not _REGISTERED.get():
        raise SpecError(
            f"metric {metric}: its dimensions make {cells:,} cells (each dimension's values"
            f" plus {OTHER!r}, multiplied); at most {MAX_DIMENSION_CELLS} are allowed: the cells"
            " travel in the clear and must be coarse groups many devices share, never an"
            " identifier split over dimensions (docs/privacy.md)"
        )
    return tuple(sorted(checked))


def _check_common(name: Any, period: Any, mechanism: Any, delivery: Any, *type_name: Any) -> None:
    """The checks every kind shares, in the order a spec has always been checked: its name,
    its type (when read from JSON: given as ``type_name``), its period, its mechanism's being
    a name, its delivery."""
    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        raise SpecError(
            "metric name must start with a lowercase letter and use only a-z, 0-9, _ . -"
            " (at most 64 characters)"
        )
    if type_name:
        from .kinds import KINDS

        if not isinstance(type_name[0], str) or type_name[0] not in KINDS:
            raise SpecError(f"metric {name}: type must be one of {', '.join(METRIC_TYPES)}")
    if period not in PERIOD_KINDS:
        raise SpecError(f"metric {name}: period must be one of day, week, month")
    if not isinstance(mechanism, str):
        raise SpecError(f"metric {name}: mechanism must be a name (a string)")
    if delivery not in DELIVERIES:
        raise SpecError(f"metric {name}: delivery must be one of direct, shuffled")


def _from_arguments(
    type_name: MetricType,
    name: str,
    epsilon: float,
    mechanism: str,
    period: PeriodKind,
    dimensions: Mapping[str, Sequence[str]] | None,
    delivery: Delivery,
    **domain: Any,
) -> MetricSpec:
    """The spec of kind ``type_name`` a factory (:meth:`MetricSpec.boolean` and the others)
    builds from its arguments: the shared ones in the order every kind takes them, the
    ``dimensions`` mapping as (name, values) pairs, and the kind's own ``domain`` fields."""
    from .kinds import KINDS

    kind = KINDS[type_name]
    return kind(name, epsilon, mechanism, period, dims_argument(dimensions), delivery, **domain)


Randomizer = Mechanism | NumericMechanism | PrefixSketch | PaddingSampling
"""Any kind's randomizer: a frequency oracle, a numeric mechanism, a prefix sketch or a set's
padding-and-sampling."""


@dataclass(frozen=True)
class MetricSpec(ABC):
    """What is measured and how: the fields every metric kind shares (name, eps, mechanism,
    period, dimensions, delivery); each kind in :mod:`.kinds` adds its own domain.

    Build one with :meth:`boolean`, :meth:`categorical`, :meth:`numeric`, :meth:`histogram`,
    :meth:`text`, :meth:`set_of` or :meth:`from_dict`, which return the right kind. ``mechanism="auto"`` is
    resolved at once, so a spec is always resolved. ``delivery`` is the metric's rule
    (:data:`DELIVERIES`), in the fingerprint when ``shuffled``. ``type`` is each kind's wire
    name, a class constant read only for the wire and the fingerprint.
    """

    type: ClassVar[MetricType]
    categories: ClassVar[tuple[str, ...]] = ()
    """A numeric or text metric has none; a kind with categories holds them as a field."""
    lower: ClassVar[float | None] = None
    upper: ClassVar[float | None] = None
    edges: ClassVar[tuple[float, ...] | None] = None
    max_length: ClassVar[int | None] = None
    max_items: ClassVar[int | None] = None
    """A kind's domain fields read as absent on the kinds without them (a numeric metric's
    ``edges``, a histogram's ``lower``): each kind that has one holds it as a field."""

    memoizable: ClassVar[bool] = True
    """Whether a device may memoize the kind's reports (one permanent answer per value); a set
    metric's values are too many to remember, so it is always reported afresh."""

    fixed_method: ClassVar[str | None] = None
    """The kind's one estimator, which its documents name whatever method is asked (a numeric
    mean's and a set's shares': ``unbiased``), or None where the method is the caller's."""
    sliced_series: ClassVar[bool] = True
    """Whether the kind answers a series by slice (``by``/``where``); a set does not yet."""
    event_aggregates: ClassVar[frozenset[str]] = frozenset()
    """The aggregations of events on the device (:mod:`.events`) the kind can report; a text
    or set metric has none."""

    name: str
    epsilon: float
    mechanism: str = "auto"
    period: PeriodKind = "day"
    dimensions: Dimensions = ()
    delivery: Delivery = "direct"
    events: EventRule | None = None
    """How the device aggregates the metric's events before one report per window (``None``:
    a metric of recorded values, ``record()``)."""

    def __post_init__(self) -> None:
        """Check the shared fields, then the kind's own (:meth:`_resolve`), then the event
        rule against both."""
        _check_common(self.name, self.period, self.mechanism, self.delivery)
        object.__setattr__(self, "dimensions", check_dimensions(self.name, self.dimensions))
        self._resolve()
        if self.events is not None:
            if not isinstance(self.events, EventRule):
                raise SpecError(f"metric {self.name}: events must be an EventRule")
            self.events.check(self.name, self.type, self.event_aggregates, self.period)

    def with_events(
        self, aggregate: str, *, window: int | str = "period", report_empty: bool | None = None
    ) -> MetricSpec:
        """This metric with its events aggregated on the device: ``aggregate`` (``any``,
        ``count``, ``sum``, ``mean``, ``median``, ``mode``...), over ``window`` (1, 7 or 28
        days rolling, or ``"period"``), reporting an empty window per ``report_empty``
        (default: what the aggregate needs). See :class:`~.events.EventRule`."""
        raw: dict[str, Any] = {"aggregate": aggregate, "window": window}
        if report_empty is not None:
            raw["report_empty"] = report_empty
        return replace(self, events=EventRule.from_dict(self.name, raw))

    @abstractmethod
    def _resolve(self) -> None:
        """Check the kind's own fields and resolve its mechanism (``auto`` included)."""

    # -- building --------------------------------------------------------------------------

    @classmethod
    @abstractmethod
    def _from_fields(cls, data: dict[str, Any], common: dict[str, Any]) -> MetricSpec:
        """The kind built from its JSON fields ``data`` and the shared ``common`` ones,
        refusing fields of other kinds with the message a spec has always given."""

    @classmethod
    def boolean(
        cls,
        name: str,
        *,
        epsilon: float,
        mechanism: str = "brr",
        period: PeriodKind = "day",
        dimensions: Mapping[str, Sequence[str]] | None = None,
        delivery: Delivery = "direct",
    ) -> MetricSpec:
        """A yes/no metric; its categories are ``false`` and ``true``."""
        return _from_arguments("boolean", name, epsilon, mechanism, period, dimensions, delivery)

    @classmethod
    def categorical(
        cls,
        name: str,
        categories: list[str] | tuple[str, ...],
        *,
        epsilon: float,
        mechanism: str = "auto",
        period: PeriodKind = "day",
        dimensions: Mapping[str, Sequence[str]] | None = None,
        delivery: Delivery = "direct",
    ) -> MetricSpec:
        """A metric over a fixed list of categories."""
        return _from_arguments(
            "categorical",
            name,
            epsilon,
            mechanism,
            period,
            dimensions,
            delivery,
            categories=tuple(categories),
        )

    @classmethod
    def numeric(
        cls,
        name: str,
        *,
        lower: float,
        upper: float,
        epsilon: float,
        mechanism: str = "auto",
        period: PeriodKind = "day",
        dimensions: Mapping[str, Sequence[str]] | None = None,
        delivery: Delivery = "direct",
    ) -> MetricSpec:
        """A number in [lower, upper] (values outside are clamped), for its mean."""
        return _from_arguments(
            "numeric",
            name,
            epsilon,
            mechanism,
            period,
            dimensions,
            delivery,
            lower=lower,
            upper=upper,
        )

    @classmethod
    def histogram(
        cls,
        name: str,
        edges: list[float] | tuple[float, ...],
        *,
        epsilon: float,
        mechanism: str = "auto",
        period: PeriodKind = "day",
        dimensions: Mapping[str, Sequence[str]] | None = None,
        delivery: Delivery = "direct",
    ) -> MetricSpec:
        """A number counted in the buckets between ``edges``, for its distribution."""
        return _from_arguments(
            "histogram",
            name,
            epsilon,
            mechanism,
            period,
            dimensions,
            delivery,
            edges=tuple(edges),
        )

    @classmethod
    def text(
        cls,
        name: str,
        *,
        max_length: int,
        epsilon: float,
        mechanism: str = "auto",
        period: PeriodKind = "day",
        dimensions: Mapping[str, Sequence[str]] | None = None,
        delivery: Delivery = "direct",
    ) -> MetricSpec:
        """Any string (UTF-8, cut to ``max_length`` bytes), for the strings many devices hold;
        ``dimensions`` as for the other types, within :data:`MAX_TEXT_CELLS` cells and
        :data:`MAX_TEXT_CELL_COUNTS` sketch counts."""
        return _from_arguments(
            "text",
            name,
            epsilon,
            mechanism,
            period,
            dimensions,
            delivery,
            max_length=max_length,
        )

    @classmethod
    def set_of(
        cls,
        name: str,
        categories: Sequence[str],
        *,
        max_items: int,
        epsilon: float,
        mechanism: str = "auto",
        period: PeriodKind = "day",
        dimensions: Mapping[str, Sequence[str]] | None = None,
        delivery: Delivery = "direct",
    ) -> MetricSpec:
        """A metric whose value is a subset of ``categories`` (the features used today, say),
        estimated as each category's share of devices; ``max_items`` is L, the most categories
        a device is expected to hold (a larger set is sampled down to L, which biases its
        categories' shares low: docs/STATS.md section 16). ``mechanism`` is the frequency
        oracle over k + L items the padded-and-sampled item goes through."""
        return _from_arguments(
            "set",
            name,
            epsilon,
            mechanism,
            period,
            dimensions,
            delivery,
            categories=tuple(categories),
            max_items=max_items,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MetricSpec:
        """Build from the JSON form (as served by ``GET /v1/metrics``): the one place the type
        string is read, through the registry :data:`.kinds.KINDS`.

        ``fingerprint`` is ignored and a null field counts as absent.
        """
        from .kinds import KINDS

        if not isinstance(data, dict):
            raise SpecError("a metric spec must be a JSON object")
        data = {key: value for key, value in data.items() if value is not None}
        type_name = data.get("type")
        categories = data.get("categories", BOOLEAN_CATEGORIES if type_name == "boolean" else ())
        if not isinstance(categories, list | tuple):
            raise SpecError("a metric spec's categories must be a list")
        edges = data.get("edges")
        if edges is not None and not isinstance(edges, list | tuple):
            raise SpecError(f"metric {data.get('name')}: edges must be a list of numbers")
        common: dict[str, Any] = {
            "name": data.get("name"),
            "epsilon": data.get("epsilon"),
            "mechanism": data.get("mechanism", "auto"),
            "period": data.get("period", "day"),
            "dimensions": dimensions_from_json(data.get("name"), data.get("dimensions", {})),
            "delivery": data.get("delivery", "direct"),
        }
        if data.get("events") is not None:
            common["events"] = EventRule.from_dict(common["name"], data["events"])
        _check_common(
            common["name"], common["period"], common["mechanism"], common["delivery"], type_name
        )
        common["dimensions"] = check_dimensions(common["name"], common["dimensions"])
        kind = KINDS[type_name]
        if data.get("max_items") is not None and "max_items" not in {f.name for f in fields(kind)}:
            raise SpecError(f"metric {common['name']}: max_items is for set metrics only")
        return kind._from_fields({**data, "categories": categories}, common)

    # -- what every kind answers -----------------------------------------------------------

    @property
    def k(self) -> int:
        """The number of categories (a histogram's buckets; 0 for a numeric or text metric)."""
        return len(self.categories)

    @property
    @abstractmethod
    def domain(self) -> str:
        """What the metric records, in a few words for messages and pages (it is public):
        ``values in [0, 5000]``, ``6 buckets`` or ``5 categories``."""

    @property
    @abstractmethod
    def report_randomizer(self) -> Randomizer:
        """The randomizer this kind's reports come from, whatever its kind."""

    @property
    def frequency_oracle(self) -> Mechanism | None:
        """The frequency oracle of a kind with categories, else ``None``."""
        return None

    @property
    def randomizer(self) -> Mechanism:
        """The resolved frequency oracle, with its parameters (not for numeric or text metrics)."""
        raise TypeError(f"metric {self.name} is {self.type}: use {self.type}_randomizer")

    @property
    def numeric_randomizer(self) -> NumericMechanism:
        """The resolved numeric mechanism of a numeric metric."""
        raise TypeError(f"metric {self.name} is not numeric")

    @property
    def text_randomizer(self) -> PrefixSketch:
        """The resolved sketch mechanism of a text metric."""
        raise TypeError(f"metric {self.name} is not text")

    @property
    @abstractmethod
    def count_width(self) -> int:
        """The support counts one period of the metric keeps per cell: its categories or
        buckets, a text metric's sketch cells and (level, row) tallies, none for a numeric
        metric (its reports add to sums)."""

    @property
    def value_count(self) -> int | None:
        """How many distinct values a device can record (None: unbounded, numbers and
        strings), which bounds a memoized metric's distinct permanent answers."""
        return None

    @abstractmethod
    def prepare(self, value: Any) -> int | float | bytes:
        """A recorded value as its randomizer takes it: a category or bucket index, a number's
        t in [-1, 1] or a string's padded bytes; :class:`~.errors.InvalidInput` names the
        metric, never the value."""

    def index_of(self, value: Any) -> int:
        """The category index of a recorded value; :class:`~.errors.InvalidInput` names the
        metric, never the value."""
        raise InvalidInput(f"metric {self.name} is {self.type}: it has no categories")

    def check_payload(self, payload: Any) -> Payload:
        """A report's payload as its randomizer reads it; ``ValueError`` names what is wrong
        with one this kind's randomizer could not have sent."""
        return self.report_randomizer.parse_payload(payload)

    @property
    @abstractmethod
    def payload_chars(self) -> int:
        """The most characters a payload of the metric takes in its wire text."""

    def _finite_value(self, value: Any) -> float:
        """A recorded number as a float: any real number but a bool (numpy's too), finite;
        :class:`~.errors.InvalidInput` names the metric, never the value."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidInput(f"metric {self.name}: expects a number (int or float)")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise InvalidInput(f"metric {self.name}: expects a finite number (not NaN or infinite)")
        return number

    # -- fingerprint and JSON --------------------------------------------------------------

    def domain_fields(self) -> dict[str, Any]:
        """The kind's own fields the fingerprint covers, in their JSON form."""
        return {}

    def fingerprint_fields(self) -> dict[str, Any]:
        """The fields the fingerprint covers (``categories`` only for categorical metrics)."""
        fields: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "epsilon": self.epsilon,
            "mechanism": self.mechanism,
            "period": self.period,
            **self.domain_fields(),
        }
        if self.dimensions:
            fields["dimensions"] = {name: list(values) for name, values in self.dimensions}
        if self.delivery != "direct":  # absent when direct: every older fingerprint is unchanged
            fields["delivery"] = self.delivery
        if self.events is not None:  # absent for recorded values, as before events existed
            fields["events"] = self.events.to_dict()
        return fields

    @cached_property
    def fingerprint(self) -> str:
        """First 16 hex digits of SHA-256 over the canonical JSON of :meth:`fingerprint_fields`
        (computed once: the collector checks it for every batch)."""
        canonical = canonical_json(self.fingerprint_fields()).encode("utf-8")
        return hashlib.sha256(canonical).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, with the fingerprint."""
        return {**self.fingerprint_fields(), "fingerprint": self.fingerprint}

    # -- dimensions and periods ------------------------------------------------------------

    def dimension_values(self, context: dict[str, Any]) -> dict[str, str]:
        """The value of each of the spec's dimensions a device with ``context`` sends: its
        context value if listed, else ``other`` (also when the context lacks the dimension)."""
        return {
            name: value
            if isinstance(value := context.get(name), str) and value in values
            else OTHER
            for name, values in self.dimensions
        }

    def cell_of(self, dims: Any) -> str:
        """The stored cell text of a report's dimension values (its values in name order,
        joined by commas; ``""`` with no dimensions); ``ValueError`` names the problem."""
        if not self.dimensions:
            if dims:
                raise ValueError(f"metric {self.name} has no dimensions; send no dims")
            return ""
        if not isinstance(dims, dict):
            raise ValueError(f"metric {self.name} has dimensions; its reports need dims")
        if set(dims) != {name for name, _ in self.dimensions}:
            raise ValueError(
                f"metric {self.name}: dims must give exactly its dimensions ("
                + ", ".join(name for name, _ in self.dimensions)
                + ")"
            )
        parts = []
        for name, values in self.dimensions:
            value = dims[name]
            if value != OTHER and value not in values:
                raise ValueError(
                    f"metric {self.name}: dimension {name} takes one of its listed values or"
                    f" {OTHER!r}"
                )
            parts.append(value)
        return ",".join(parts)

    def dims_of(self, cell: str) -> dict[str, str] | None:
        """The dimension values a stored cell text stands for (the inverse of
        :meth:`cell_of`); None for ``""`` (no dimensions, or a report stored before cells
        were kept)."""
        if not cell or not self.dimensions:
            return None
        return dict(zip((name for name, _ in self.dimensions), cell.split(","), strict=True))

    def period_of(self, moment: dt.datetime | dt.date) -> str:
        """The period label containing ``moment`` (UTC for datetimes)."""
        return period_label(self.period, moment)
