"""The numeric kind: a number in [lower, upper] (values outside are clamped), mapped to t in
[-1, 1] and reported through a numeric mechanism (duchi, pm, hybrid), for its mean."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import SpecError
from ..events import NUMBER_AGGREGATES
from ..mechanisms import MECHANISMS, NUMERIC_MECHANISMS, NumericMechanism, make_numeric_mechanism
from ..spec import (
    NUMERIC_MAGNITUDE,
    NUMERIC_RESOLUTION,
    MetricSpec,
    MetricType,
    finite_number,
)

LONGEST_FLOAT = 24
"""The most characters ``repr`` gives a finite float (``-2.2250738585072014e-308``)."""


def check_numeric_range(name: str, lower: float, upper: float) -> None:
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


@dataclass(frozen=True)
class NumericSpec(MetricSpec):
    """A number in [``lower``, ``upper``], for its mean."""

    type: ClassVar[MetricType] = "numeric"
    event_aggregates: ClassVar[frozenset[str]] = NUMBER_AGGREGATES
    fixed_method: ClassVar[str | None] = "unbiased"
    """A mean has one estimator."""

    lower: float = field(kw_only=True)
    upper: float = field(kw_only=True)
    _mechanism: NumericMechanism = field(init=False, repr=False, compare=False)

    def _resolve(self) -> None:
        """Check ``lower`` < ``upper`` and resolve the numeric mechanism."""
        lower = finite_number(self.lower, f"metric {self.name}: lower")
        upper = finite_number(self.upper, f"metric {self.name}: upper")
        if not lower < upper:
            raise SpecError(f"metric {self.name}: lower must be less than upper")
        if not math.isfinite(upper - lower):
            raise SpecError(f"metric {self.name}: upper - lower must be a finite number")
        check_numeric_range(self.name, lower, upper)
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
            mechanism = make_numeric_mechanism(self.mechanism, self.epsilon)
        except ValueError as exc:
            raise SpecError(f"metric {self.name}: {exc}") from None
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "epsilon", mechanism.epsilon)
        object.__setattr__(self, "mechanism", mechanism.name)
        object.__setattr__(self, "_mechanism", mechanism)

    @classmethod
    def _from_fields(cls, data: dict[str, Any], common: dict[str, Any]) -> MetricSpec:
        """The spec from its JSON fields; categories, edges or a max_length are refused."""
        if data["categories"] or data.get("edges") is not None or "max_length" in data:
            raise SpecError(
                f"metric {common['name']}: a numeric metric has no categories or edges (nor a"
                " max_length)"
            )
        return cls(**common, lower=data.get("lower"), upper=data.get("upper"))

    @property
    def domain(self) -> str:
        """``values in [0, 5000]``."""
        return f"values in [{self.lower:g}, {self.upper:g}]"

    def domain_fields(self) -> dict[str, Any]:
        """The bounds."""
        return {"lower": self.lower, "upper": self.upper}

    @property
    def numeric_randomizer(self) -> NumericMechanism:
        """The resolved numeric mechanism."""
        return self._mechanism

    @property
    def report_randomizer(self) -> NumericMechanism:
        """The numeric mechanism, which every report of this kind comes from."""
        return self._mechanism

    @property
    def count_width(self) -> int:
        """None: a numeric report adds to its period's sums, not to counts."""
        return 0

    @property
    def payload_chars(self) -> int:
        """A float's shortest ``repr``."""
        return LONGEST_FLOAT

    def prepare(self, value: Any) -> float:
        """The value's t in [-1, 1]."""
        return self.scale(value)

    def scale(self, value: Any) -> float:
        """The value clamped to [lower, upper] and mapped to t in [-1, 1];
        :class:`~..errors.InvalidInput` names the metric, never the value."""
        number = self._finite_value(value)
        lower, upper = self.lower, self.upper
        clamped = min(max(number, lower), upper)
        return max(-1.0, min(1.0, (clamped - lower) / (upper - lower) * 2 - 1))

    def unscale(self, t: float) -> float:
        """A point on the [-1, 1] axis back in the metric's units."""
        return self.lower + (self.upper - self.lower) * ((t + 1) / 2)
