"""Metric specs, their fingerprints, and the period buckets reports are made in.

A spec is immutable once registered; its fingerprint (SHA-256 over RFC 8785 canonical JSON
of the resolved fields) travels in every report so that an estimate never mixes reports
made under different parameters.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import datetime as dt
import hashlib
import itertools
import json
import math
import numbers
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from .errors import InvalidInput, SpecError
from .mechanisms import (
    MAX_CATEGORIES,
    MECHANISMS,
    NUMERIC_MECHANISMS,
    TEXT_MECHANISMS,
    Mechanism,
    NumericMechanism,
    PrefixSketch,
    make_mechanism,
    make_numeric_mechanism,
    make_text_mechanism,
)

MetricType = Literal["boolean", "categorical", "numeric", "histogram", "text"]
METRIC_TYPES: tuple[str, ...] = ("boolean", "categorical", "numeric", "histogram", "text")
PeriodKind = Literal["day", "week", "month"]
Delivery = Literal["direct", "shuffled"]
DELIVERIES: tuple[str, ...] = ("direct", "shuffled")
"""How a metric's reports may reach the collector: ``direct`` (straight to it, or through a
shuffler if the device has one) or ``shuffled`` (only through a shuffler: the collector refuses
direct uploads, and an SDK without a shuffler does not send them)."""

BOOLEAN_CATEGORIES = ("false", "true")
PERIOD_KINDS: tuple[str, ...] = ("day", "week", "month")
METRIC_NAME = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
"""What a metric name may be (match it with ``fullmatch``)."""
_PERIOD_PATTERNS = {
    "day": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "week": re.compile(r"^\d{4}-W\d{2}$"),
    "month": re.compile(r"^\d{4}-\d{2}$"),
}


def _es_number(x: float) -> str:
    """Serialize a finite float as ECMAScript's Number.prototype.toString (RFC 8785 numbers)."""
    if x == 0:
        return "0"
    if x < 0:
        return "-" + _es_number(-x)
    digits, exponent = repr(x).lower().split("e") if "e" in repr(x) else (repr(x), "0")
    mantissa_digits = digits.replace(".", "")
    point = digits.index(".") if "." in digits else len(digits)
    stripped = mantissa_digits.lstrip("0")
    point -= len(mantissa_digits) - len(stripped)
    s = stripped.rstrip("0") or "0"
    n = point + int(exponent)
    k = len(s)
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + s
    sign = "+" if n - 1 >= 0 else "-"
    mantissa = s[0] + ("." + s[1:] if k > 1 else "")
    return f"{mantissa}e{sign}{abs(n - 1)}"


def canonical_json(value: Any) -> str:
    """RFC 8785 canonical JSON for the values a spec holds (strings, numbers, lists, objects)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("canonical JSON has no NaN or infinity")
        return _es_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(f"{canonical_json(k)}:{canonical_json(v)}" for k, v in items) + "}"
    raise TypeError(f"cannot canonicalize {type(value).__name__}")


NUMERIC_MAGNITUDE = 1e300
"""The largest |lower| and |upper| of a numeric metric: the estimate's standard error in value
units is up to a few thousand times the range's width, which must stay a finite float."""

NUMERIC_RESOLUTION = 1e-12
"""The narrowest numeric range relative to its larger end (and 1e-300 absolutely): narrower,
mapping a value to t in [-1, 1] and back rounds it to a handful of steps or to subnormal numbers."""


def _check_numeric_range(name: str, lower: float, upper: float) -> None:
    """Refuse a numeric range whose arithmetic overflows or underflows floats, saying why."""
    if max(abs(lower), abs(upper)) > NUMERIC_MAGNITUDE:
        raise SpecError(
            f"metric {name}: lower and upper must lie within +-{NUMERIC_MAGNITUDE:g}, where"
            " estimates in value units stay finite"
        )
    if upper - lower < max(1e-300, NUMERIC_RESOLUTION * max(abs(lower), abs(upper))):
        raise SpecError(
            f"metric {name}: upper - lower is too narrow for float arithmetic; it must be at"
            f" least {NUMERIC_RESOLUTION:g} times the larger of |lower| and |upper| (and 1e-300)"
        )


def _finite_number(value: Any, what: str) -> float:
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


def _number_text(x: float) -> str:
    """A bound or edge as people write it: 100, not 100.0."""
    return _es_number(x)


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


def _dimensions_from_json(metric: Any, raw: Any) -> Dimensions:
    """The JSON form ``{"platform": ["ios", "android"]}`` as :data:`Dimensions`."""
    if not isinstance(raw, dict):
        raise SpecError(
            f"metric {metric}: dimensions must be an object of name: [values],"
            ' like {"platform": ["ios", "android", "web"]}'
        )
    return tuple((name, values) for name, values in raw.items())


def _dims(dimensions: Mapping[str, Sequence[str]] | None) -> Dimensions:
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


@dataclass(frozen=True)
class MetricSpec:
    """What is measured and how: name, type, its domain, eps, mechanism and period.

    The domain is ``categories`` (boolean, categorical), ``lower`` and ``upper`` (numeric) or
    the bucket ``edges`` (histogram, whose categories are the bucket labels). Build one with
    :meth:`boolean`, :meth:`categorical`, :meth:`numeric` or :meth:`histogram`;
    ``mechanism="auto"`` is resolved at once, so a spec is always resolved. ``delivery`` is
    the metric's rule (:data:`DELIVERIES`), in the fingerprint when ``shuffled``.
    """

    name: str
    type: MetricType
    categories: tuple[str, ...]
    epsilon: float
    mechanism: str
    period: PeriodKind = "day"
    lower: float | None = None
    upper: float | None = None
    edges: tuple[float, ...] | None = None
    max_length: int | None = None
    dimensions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    delivery: Delivery = "direct"
    _randomizer: Mechanism | NumericMechanism | PrefixSketch = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not METRIC_NAME.fullmatch(self.name):
            raise SpecError(
                "metric name must start with a lowercase letter and use only a-z, 0-9, _ . -"
                " (at most 64 characters)"
            )
        if self.type not in METRIC_TYPES:
            raise SpecError(
                f"metric {self.name}: type must be one of boolean, categorical, numeric,"
                " histogram, text"
            )
        if self.period not in PERIOD_KINDS:
            raise SpecError(f"metric {self.name}: period must be one of day, week, month")
        if not isinstance(self.mechanism, str):
            raise SpecError(f"metric {self.name}: mechanism must be a name (a string)")
        if self.delivery not in DELIVERIES:
            raise SpecError(f"metric {self.name}: delivery must be one of direct, shuffled")
        object.__setattr__(self, "dimensions", check_dimensions(self.name, self.dimensions))
        if self.type == "numeric":
            self._resolve_numeric()
            return
        if self.type == "text":
            self._resolve_text()
            self._check_text_cells()
            return
        if self.max_length is not None:
            raise SpecError(f"metric {self.name}: max_length is for text metrics only")
        if self.type == "histogram":
            object.__setattr__(self, "categories", self._bucket_labels())
        elif self.lower is not None or self.upper is not None or self.edges is not None:
            raise SpecError(f"metric {self.name}: lower, upper and edges are for numbers only")
        categories = tuple(self.categories)
        if self.type == "boolean" and categories != BOOLEAN_CATEGORIES:
            raise SpecError(f"metric {self.name}: boolean categories are always false, true")
        if not all(isinstance(c, str) and c for c in categories):
            raise SpecError(f"metric {self.name}: categories must be non-empty strings")
        if len(set(categories)) != len(categories):
            raise SpecError(f"metric {self.name}: categories must be distinct")
        if len(categories) < 2:
            raise SpecError(f"metric {self.name}: needs at least 2 categories")
        if self.mechanism in NUMERIC_MECHANISMS:
            raise SpecError(
                f"metric {self.name}: {self.mechanism} is a mechanism for numeric metrics;"
                f" a {self.type} metric uses auto, krr, oue or olh"
                + (" (or brr)" if self.type == "boolean" else "")
            )
        if self.mechanism != "auto" and self.mechanism not in MECHANISMS:
            raise SpecError(
                f"metric {self.name}: unknown mechanism; choose auto, brr, krr, oue or olh"
            )
        if self.mechanism == "brr" and self.type != "boolean":
            raise SpecError(f"metric {self.name}: brr is for boolean metrics only")
        name = self.mechanism
        if name == "auto" and self.type != "boolean" and len(categories) == 2:
            name = "krr"
        try:
            randomizer = make_mechanism(name, len(categories), self.epsilon)
        except ValueError as exc:
            raise SpecError(f"metric {self.name}: {exc}") from None
        object.__setattr__(self, "categories", categories)
        object.__setattr__(self, "epsilon", randomizer.epsilon)
        object.__setattr__(self, "mechanism", randomizer.name)
        object.__setattr__(self, "_randomizer", randomizer)

    def _resolve_numeric(self) -> None:
        """Check ``lower`` < ``upper`` and resolve the numeric mechanism."""
        if self.categories or self.edges is not None or self.max_length is not None:
            raise SpecError(
                f"metric {self.name}: a numeric metric has no categories or edges (nor a"
                " max_length)"
            )
        lower = _finite_number(self.lower, f"metric {self.name}: lower")
        upper = _finite_number(self.upper, f"metric {self.name}: upper")
        if not lower < upper:
            raise SpecError(f"metric {self.name}: lower must be less than upper")
        if not math.isfinite(upper - lower):
            raise SpecError(f"metric {self.name}: upper - lower must be a finite number")
        _check_numeric_range(self.name, lower, upper)
        if self.mechanism in MECHANISMS:
            raise SpecError(
                f"metric {self.name}: {self.mechanism} is a mechanism for categories; a numeric"
                " metric uses auto, duchi, pm or hybrid"
            )
        if self.mechanism != "auto" and self.mechanism not in NUMERIC_MECHANISMS:
            raise SpecError(
                f"metric {self.name}: unknown mechanism; choose auto, duchi, pm or hybrid"
            )
        try:
            randomizer = make_numeric_mechanism(self.mechanism, self.epsilon)
        except ValueError as exc:
            raise SpecError(f"metric {self.name}: {exc}") from None
        object.__setattr__(self, "categories", ())
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "epsilon", randomizer.epsilon)
        object.__setattr__(self, "mechanism", randomizer.name)
        object.__setattr__(self, "_randomizer", randomizer)

    def _resolve_text(self) -> None:
        """Check ``max_length`` and resolve the text mechanism (``auto`` is ``pem``)."""
        if self.categories or self.edges is not None or (self.lower, self.upper) != (None, None):
            raise SpecError(
                f"metric {self.name}: a text metric has max_length only (no categories, edges,"
                " lower or upper)"
            )
        if self.max_length is None:
            raise SpecError(f"metric {self.name}: a text metric needs max_length (UTF-8 bytes)")
        if self.mechanism != "auto" and self.mechanism not in TEXT_MECHANISMS:
            raise SpecError(
                f"metric {self.name}: unknown mechanism; a text metric uses auto or pem"
            )
        try:
            randomizer = make_text_mechanism(self.mechanism, self.max_length, self.epsilon)
        except ValueError as exc:
            raise SpecError(f"metric {self.name}: {exc}") from None
        object.__setattr__(self, "categories", ())
        object.__setattr__(self, "epsilon", randomizer.epsilon)
        object.__setattr__(self, "mechanism", randomizer.name)
        object.__setattr__(self, "_randomizer", randomizer)

    def _check_text_cells(self) -> None:
        """A text metric's dimensions within :data:`MAX_TEXT_CELLS` cells and
        :data:`MAX_TEXT_CELL_COUNTS` sketch counts per period (each cell keeps a whole sketch)."""
        if not self.dimensions:
            return
        cells = math.prod(len(values) + 1 for _, values in self.dimensions)
        counts = cells * self.text_randomizer.cell_count
        if cells > MAX_TEXT_CELLS or counts > MAX_TEXT_CELL_COUNTS:
            raise SpecError(
                f"metric {self.name}: its dimensions make {cells:,} cells of"
                f" {self.text_randomizer.cell_count:,} sketch counts each ({counts:,}); a text"
                f" metric takes at most {MAX_TEXT_CELLS} cells and {MAX_TEXT_CELL_COUNTS:,}"
                " counts (fewer dimension values, or a shorter max_length)"
            )

    def _bucket_labels(self) -> tuple[str, ...]:
        """Check the edges (finite, strictly increasing) and label the buckets, ``[0, 100)``."""
        if self.categories or self.lower is not None or self.upper is not None:
            raise SpecError(f"metric {self.name}: a histogram has edges only, no categories")
        if not isinstance(self.edges, list | tuple):
            raise SpecError(f"metric {self.name}: edges must be a list of numbers")
        edges = tuple(_finite_number(e, f"metric {self.name}: each edge") for e in self.edges)
        if len(edges) < 3:
            raise SpecError(f"metric {self.name}: a histogram needs at least 3 edges (2 buckets)")
        if len(edges) - 1 > MAX_CATEGORIES:
            raise SpecError(f"metric {self.name}: at most {MAX_CATEGORIES:,} buckets")
        if any(b <= a for a, b in itertools.pairwise(edges)):
            raise SpecError(
                f"metric {self.name}: edges must be strictly increasing (sorted, no duplicates)"
            )
        object.__setattr__(self, "edges", edges)
        texts = [_number_text(e) for e in edges]
        labels = [f"[{a}, {b})" for a, b in itertools.pairwise(texts)]
        labels[-1] = labels[-1][:-1] + "]"
        return tuple(labels)

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
        return cls(
            name,
            "boolean",
            BOOLEAN_CATEGORIES,
            epsilon,
            mechanism,
            period,
            dimensions=_dims(dimensions),
            delivery=delivery,
        )

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
        return cls(
            name,
            "categorical",
            tuple(categories),
            epsilon,
            mechanism,
            period,
            dimensions=_dims(dimensions),
            delivery=delivery,
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
        return cls(
            name,
            "numeric",
            (),
            epsilon,
            mechanism,
            period,
            lower=lower,
            upper=upper,
            dimensions=_dims(dimensions),
            delivery=delivery,
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
        return cls(
            name,
            "histogram",
            (),
            epsilon,
            mechanism,
            period,
            edges=tuple(edges),
            dimensions=_dims(dimensions),
            delivery=delivery,
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
        return cls(
            name,
            "text",
            (),
            epsilon,
            mechanism,
            period,
            max_length=max_length,
            dimensions=_dims(dimensions),
            delivery=delivery,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MetricSpec:
        """Build from the JSON form (as served by ``GET /v1/metrics``).

        ``fingerprint`` is ignored and a null field counts as absent.
        """
        if not isinstance(data, dict):
            raise SpecError("a metric spec must be a JSON object")
        data = {key: value for key, value in data.items() if value is not None}
        kind = data.get("type")
        categories = data.get("categories", BOOLEAN_CATEGORIES if kind == "boolean" else ())
        if not isinstance(categories, list | tuple):
            raise SpecError("a metric spec's categories must be a list")
        labels = None
        if kind == "histogram":  # its categories are the bucket labels, derived from the edges
            labels, categories = tuple(categories), ()
        edges = data.get("edges")
        if edges is not None and not isinstance(edges, list | tuple):
            raise SpecError(f"metric {data.get('name')}: edges must be a list of numbers")
        spec = cls(
            name=data.get("name"),  # type: ignore[arg-type]
            type=kind,  # type: ignore[arg-type]
            categories=tuple(categories),
            epsilon=data.get("epsilon"),  # type: ignore[arg-type]
            mechanism=data.get("mechanism", "auto"),
            period=data.get("period", "day"),
            lower=data.get("lower"),
            upper=data.get("upper"),
            edges=tuple(edges) if edges is not None else None,
            max_length=data.get("max_length"),
            dimensions=_dimensions_from_json(data.get("name"), data.get("dimensions", {})),
            delivery=data.get("delivery", "direct"),
        )
        if labels and labels != spec.categories:
            raise SpecError(
                f"metric {spec.name}: a histogram's categories are its bucket labels, derived"
                " from its edges; these differ"
            )
        return spec

    @property
    def k(self) -> int:
        """The number of categories (a histogram's buckets; 0 for a numeric or text metric)."""
        return len(self.categories)

    @property
    def domain(self) -> str:
        """What the metric records, in a few words for messages and pages (it is public):
        ``values in [0, 5000]``, ``6 buckets`` or ``5 categories``."""
        if self.type == "numeric":
            return f"values in [{self.lower:g}, {self.upper:g}]"
        if self.type == "text":
            return f"strings of up to {self.max_length} bytes"
        return f"{self.k} {'buckets' if self.type == 'histogram' else 'categories'}"

    @property
    def randomizer(self) -> Mechanism:
        """The resolved frequency oracle, with its parameters (not for numeric or text metrics)."""
        if isinstance(self._randomizer, NumericMechanism):
            raise TypeError(f"metric {self.name} is numeric: use numeric_randomizer")
        if isinstance(self._randomizer, PrefixSketch):
            raise TypeError(f"metric {self.name} is text: use text_randomizer")
        return self._randomizer

    @property
    def text_randomizer(self) -> PrefixSketch:
        """The resolved sketch mechanism of a text metric."""
        if not isinstance(self._randomizer, PrefixSketch):
            raise TypeError(f"metric {self.name} is not text")
        return self._randomizer

    def padded(self, value: Any) -> bytes:
        """A text metric's value as the padded bytes its reports carry;
        :class:`~.errors.InvalidInput` names the metric, never the value."""
        try:
            return self.text_randomizer.encode(value)
        except ValueError as exc:
            raise InvalidInput(f"metric {self.name}: {exc}") from None

    @property
    def numeric_randomizer(self) -> NumericMechanism:
        """The resolved numeric mechanism of a numeric metric."""
        if not isinstance(self._randomizer, NumericMechanism):
            raise TypeError(f"metric {self.name} is not numeric")
        return self._randomizer

    def scale(self, value: Any) -> float:
        """A numeric metric's value clamped to [lower, upper] and mapped to t in [-1, 1];
        :class:`~.errors.InvalidInput` names the metric, never the value."""
        if self.type != "numeric":
            raise TypeError(f"metric {self.name} is not numeric")
        number = self._finite_value(value)
        lower, upper = self.lower, self.upper  # type: ignore[assignment]
        clamped = min(max(number, lower), upper)  # type: ignore[type-var]
        return max(-1.0, min(1.0, (clamped - lower) / (upper - lower) * 2 - 1))  # type: ignore[operator]

    def unscale(self, t: float) -> float:
        """A point on the [-1, 1] axis back in the metric's units."""
        return self.lower + (self.upper - self.lower) * ((t + 1) / 2)  # type: ignore[operator]

    def bucket_of(self, value: Any) -> int:
        """A histogram's bucket index for a number: below the first edge counts in the
        first bucket, above the last in the last."""
        if self.type != "histogram":
            raise TypeError(f"metric {self.name} is not a histogram")
        number = self._finite_value(value)
        return max(0, min(self.k - 1, bisect.bisect_right(self.edges, number) - 1))  # type: ignore[arg-type]

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

    def fingerprint_fields(self) -> dict[str, Any]:
        """The fields the fingerprint covers (``categories`` only for categorical metrics)."""
        fields: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "epsilon": self.epsilon,
            "mechanism": self.mechanism,
            "period": self.period,
        }
        if self.type == "categorical":
            fields["categories"] = list(self.categories)
        elif self.type == "numeric":
            fields["lower"] = self.lower
            fields["upper"] = self.upper
        elif self.type == "histogram":
            fields["edges"] = list(self.edges)  # type: ignore[arg-type]
        elif self.type == "text":
            fields["max_length"] = self.max_length
        if self.dimensions:
            fields["dimensions"] = {name: list(values) for name, values in self.dimensions}
        if self.delivery != "direct":  # absent when direct: every older fingerprint is unchanged
            fields["delivery"] = self.delivery
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

    def index_of(self, value: Any) -> int:
        """The category index of a recorded value; :class:`~.errors.InvalidInput` names the
        metric, never the value."""
        if self.type == "boolean":
            if isinstance(value, bool):
                return int(value)
            raise InvalidInput(f"metric {self.name}: expects a bool")
        if self.type == "histogram":
            return self.bucket_of(value)
        if self.type in ("numeric", "text"):
            raise InvalidInput(f"metric {self.name} is {self.type}: it has no categories")
        if isinstance(value, str):
            try:
                return self.categories.index(value)
            except ValueError:
                raise InvalidInput(
                    f"metric {self.name}: value is not one of its categories (case-sensitive):"
                    f" {self._category_list()}"
                ) from None
        raise InvalidInput(f"metric {self.name}: expects a category name (str)")

    def _category_list(self, shown: int = 20) -> str:
        """The categories for an error message (they are public), the first ``shown`` of a
        long list."""
        listed = ", ".join(self.categories[:shown])
        return listed if self.k <= shown else f"{listed}, ... ({self.k} in all)"

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


def _as_utc_date(moment: dt.datetime | dt.date) -> dt.date:
    if isinstance(moment, dt.datetime):
        if moment.tzinfo is not None:
            moment = moment.astimezone(dt.UTC)
        return moment.date()
    return moment


def period_label(kind: str, moment: dt.datetime | dt.date) -> str:
    """The label of the ``kind`` period holding ``moment``: 2026-11-21, 2026-W47 or 2026-11."""
    day = _as_utc_date(moment)
    if kind == "day":
        return day.isoformat()
    if kind == "week":
        year, week, _ = day.isocalendar()
        return f"{year:04d}-W{week:02d}"
    if kind == "month":
        return f"{day.year:04d}-{day.month:02d}"
    raise InvalidInput("period must be one of day, week, month")


def period_start(kind: str, label: str) -> dt.date:
    """The first day of a period label; :class:`~.errors.InvalidInput` if it is not a
    well-formed label."""
    pattern = _PERIOD_PATTERNS.get(kind)
    if pattern is None:
        raise InvalidInput("period must be one of day, week, month")
    if not isinstance(label, str) or not pattern.match(label):
        raise InvalidInput(f"period {label!r} is not a {kind} label")
    try:
        if kind == "day":
            return dt.date.fromisoformat(label)
        if kind == "week":
            year, week = int(label[:4]), int(label[6:])
            return dt.date.fromisocalendar(year, week, 1)
        return dt.date(int(label[:4]), int(label[5:7]), 1)
    except ValueError:
        raise InvalidInput(f"period {label!r} is not a valid {kind}") from None


def resolve_period(kind: str, value: str) -> str:
    """The ``kind`` period label a user means by ``value``: a label of that kind, or, for week
    and month periods, a ``YYYY-MM-DD`` date inside the period.

    Raises :class:`~deniable.client.errors.InvalidInput` naming what is accepted; the one
    rule the collector's API and the CLI both apply.
    """
    try:
        if period_label(kind, period_start(kind, value)) == value:
            return value
    except ValueError:
        pass
    if kind != "day" and isinstance(value, str) and _PERIOD_PATTERNS["day"].match(value):
        try:
            return period_label(kind, dt.date.fromisoformat(value))
        except ValueError:
            pass
    accepted = "a YYYY-MM-DD date" if kind == "day" else f"a {kind} label or a YYYY-MM-DD date"
    raise InvalidInput(f"{value!r} is not {accepted}")


def next_period(kind: str, label: str) -> str:
    """The period right after ``label``."""
    start = period_start(kind, label)
    if kind == "day":
        return (start + dt.timedelta(days=1)).isoformat()
    if kind == "week":
        return period_label(kind, start + dt.timedelta(days=7))
    return period_label(kind, (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1))


def period_count(kind: str, start: str, end: str) -> int:
    """How many periods ``start``..``end`` holds (inclusive), counted without listing them."""
    first, last = period_start(kind, start), period_start(kind, end)
    if kind == "day":
        return (last - first).days + 1
    if kind == "week":
        return (last - first).days // 7 + 1
    return (last.year - first.year) * 12 + last.month - first.month + 1


def period_range(kind: str, start: str, end: str) -> list[str]:
    """Every period label from ``start`` to ``end`` inclusive, oldest first."""
    if period_start(kind, start) > period_start(kind, end):
        raise InvalidInput("start is after end")
    labels = [start]
    while labels[-1] != end:
        labels.append(next_period(kind, labels[-1]))
    return labels
