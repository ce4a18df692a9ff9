"""Typed privacy guarantees: ``PureDP(epsilon)`` and ``ApproxDP(epsilon, delta)``, under one rounding rule.

A guarantee is a frozen value. Guarantees compose sequentially (``a + b``: the epsilons add up,
and the deltas), scale by a count of reports (``n * g``: n compositions of ``g``) and compare
(``a <= b``: ``a`` loses no more privacy than ``b``), so the ledger, the account and the
shuffle accountant never add, multiply or compare bare eps floats. Local and central guarantees
are told apart by type: a randomizer declares a :class:`PureDP`, a shuffled batch an
:class:`ApproxDP`.

The rounding rule (docs/STATS.md, "Rounding privacy guarantees"), the one rule of this module:

- **Parameters are exact rationals.** A float given as a parameter (a spec's eps, a lifetime
  cap, a delta) stands for the decimal it is written as, its shortest round-trip ``repr``: the
  number the JSON spec or the setting carries (``0.1`` is 1/10, not the binary float nearest to
  it). Arithmetic and comparisons are exact on these rationals (:class:`fractions.Fraction`),
  so ten reports at 0.1 spend exactly 1 and fit a cap of 1 with no slack constant.
- **A result shown as a float is rounded up, never down.** :attr:`PureDP.epsilon` (and
  :attr:`ApproxDP.delta`) is the least float whose decimal reading is at least the exact
  value: the float nearest to it, stepped once more toward +inf with :func:`math.nextafter`
  when that one reads below it. A declared float reads back as itself; a sum such as
  0.1 + 0.7, which float addition rounds down to 0.7999999999999999, gives 0.8.

Each guarantee also carries :attr:`PureDP.figure`: the same quantity computed as the figures
deniable has always published (plain float products and :func:`math.fsum` sums, rounded to
nearest), which the account and the privacy document render so that every served figure stays
byte for byte what it was. ``figure`` is for display only; every decision (admission under a
lifetime cap, the least of two bounds) uses the exact value.

Infinity is a guarantee too (``PureDP(math.inf)``: unbounded, as for memoized reports that
send the same answer twice). Negative, NaN or non-numeric parameters, and a delta outside
[0, 1), are refused with :class:`~.errors.InvalidInput`. Standard library only, as all of
:mod:`deniable.client`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from .errors import InvalidInput

__all__ = ["ApproxDP", "PureDP", "compose", "exact", "round_up"]


@functools.lru_cache(maxsize=4096)
def exact(value: float) -> Fraction:
    """The rational a finite float parameter stands for: the decimal it is written as (cached:
    an account reads the same few parameters again and again)."""
    if isinstance(value, int):
        return Fraction(value)
    return Fraction(repr(float(value)))


def round_up(value: Fraction) -> float:
    """The least float whose decimal reading is at least ``value``: the rounding rule."""
    shown = float(value)
    while exact(shown) < value:
        shown = math.nextafter(shown, math.inf)
    return shown


def _parameter(name: str, value: object) -> float:
    """``value`` as a float parameter, or InvalidInput for a bool, a non-number or NaN."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{name} must be a number")
    number = float(value)
    if math.isnan(number):
        raise InvalidInput(f"{name} must be a number, not NaN")
    return number


def _epsilon(value: object) -> Fraction | None:
    """An eps parameter as its exact rational (``None``: unbounded), refused if negative."""
    number = _parameter("epsilon", value)
    if number < 0:
        raise InvalidInput("epsilon must be at least 0")
    return None if math.isinf(number) else exact(number)


def _delta(value: object) -> Fraction:
    """A delta parameter as its exact rational, refused outside [0, 1)."""
    number = _parameter("delta", value)
    if not 0 <= number < 1:
        raise InvalidInput("delta must be in [0, 1)")
    return exact(number)


def _factor(value: object) -> tuple[int | Fraction, int | float]:
    """A scaling factor (a count of reports, or a ratio) as its exact value and itself."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("a guarantee scales by a number")
    if (isinstance(value, float) and not math.isfinite(value)) or value < 0:
        raise InvalidInput("a guarantee scales by a finite number of at least 0")
    return (value if isinstance(value, int) else exact(value)), value


def _add(a: Fraction | None, b: Fraction | None) -> Fraction | None:
    """The exact sum of two eps (``None``: unbounded)."""
    return None if a is None or b is None else a + b


def _scale(value: Fraction | None, factor: int | Fraction) -> Fraction | None:
    """``value`` times ``factor`` exactly; zero times unbounded is zero (no report, no loss)."""
    if factor == 0:
        return Fraction(0)
    return None if value is None else value * factor


def _at_most(a: Fraction | None, b: Fraction | None) -> bool:
    """Whether eps ``a`` is at most eps ``b`` (``None``: unbounded)."""
    return b is None or (a is not None and a <= b)


def _times(figure: float, factor: int | float) -> float:
    """The published figure of ``factor`` times a guarantee (a plain float product)."""
    return 0.0 if factor == 0 else factor * figure


_G = TypeVar("_G")


def _with_fields(guarantee: _G, **fields: object) -> _G:
    """``guarantee`` with ``fields`` set, which its frozen dataclass refuses to plain assignment
    (for its own ``__init__`` and ``_of`` only)."""
    for name, value in fields.items():
        object.__setattr__(guarantee, name, value)
    return guarantee


@dataclass(frozen=True, init=False, eq=False)
class PureDP:
    """eps-differential privacy: any output's probability changes by at most e^eps between
    any two inputs (the local guarantee of a randomizer and of a device's reports)."""

    value: Fraction | None
    """eps exactly (``None``: unbounded)."""
    figure: float
    """eps as the published figures compute it (display only; see the module docstring)."""

    def __init__(self, epsilon: float) -> None:
        """eps-DP for a number eps >= 0 (``math.inf``: unbounded); InvalidInput otherwise."""
        _with_fields(self, value=_epsilon(epsilon), figure=float(epsilon))

    @classmethod
    def _of(cls, value: Fraction | None, figure: float) -> PureDP:
        """A guarantee from its exact eps and its figure (the results of arithmetic)."""
        return _with_fields(cls.__new__(cls), value=value, figure=figure)

    @property
    def epsilon(self) -> float:
        """eps as a float, rounded up (:func:`round_up`; ``inf``: unbounded)."""
        return math.inf if self.value is None else round_up(self.value)

    @property
    def bounded(self) -> bool:
        """Whether a finite eps bounds it."""
        return self.value is not None

    def approx(self) -> ApproxDP:
        """The same guarantee as (eps, 0)-DP."""
        return ApproxDP._of(self.value, Fraction(0), self.figure, 0.0)

    def __add__(self, other: object) -> PureDP | ApproxDP:
        """Sequential composition: the epsilons add up (with an ApproxDP, the deltas too)."""
        if isinstance(other, ApproxDP):
            return self.approx() + other
        if not isinstance(other, PureDP):
            return NotImplemented
        return PureDP._of(_add(self.value, other.value), self.figure + other.figure)

    def __mul__(self, count: object) -> PureDP:
        """``count`` compositions of this guarantee (a count of reports, or a ratio >= 0)."""
        factor, given = _factor(count)
        return PureDP._of(_scale(self.value, factor), _times(self.figure, given))

    __rmul__ = __mul__

    def _other(self, other: object) -> Fraction | None:
        """The exact eps of ``other`` to compare with, or TypeError for a non-PureDP."""
        if not isinstance(other, PureDP):
            raise TypeError("a PureDP compares with a PureDP only (an ApproxDP: use approx())")
        return other.value

    def __eq__(self, other: object) -> bool:
        """Equal when both are PureDP with the same exact eps (an ApproxDP never is)."""
        return isinstance(other, PureDP) and self.value == other.value

    def __hash__(self) -> int:
        """Hashed on the exact eps, as it compares."""
        return hash(("PureDP", self.value))

    def __le__(self, other: object) -> bool:
        """Whether this guarantee loses no more privacy than ``other`` (exactly)."""
        return _at_most(self.value, self._other(other))

    def __lt__(self, other: object) -> bool:
        """Whether this guarantee is at most ``other`` and not equal to it."""
        return self <= other and self != other

    def __ge__(self, other: object) -> bool:
        """Whether this guarantee loses at least as much privacy as ``other``."""
        return _at_most(self._other(other), self.value)

    def __gt__(self, other: object) -> bool:
        """Whether this guarantee is at least ``other`` and not equal to it."""
        return self >= other and self != other

    def reports_within(self, budget: PureDP) -> int | None:
        """The most reports at this guarantee whose composition fits ``budget`` (``None``: no
        limit, for a zero eps or an unbounded budget), exactly: the floor of their ratio."""
        if budget.value is None or self.value == 0:
            return None
        if self.value is None:
            return 0
        return math.floor(budget.value / self.value)

    def __repr__(self) -> str:
        """``PureDP(epsilon=...)`` with the rounded-up eps."""
        return f"PureDP(epsilon={self.epsilon!r})"


@dataclass(frozen=True, init=False, eq=False)
class ApproxDP:
    """(eps, delta)-differential privacy: any event's probability is at most e^eps times the
    other input's plus delta (the central guarantee of a shuffled batch)."""

    value: Fraction | None
    """eps exactly (``None``: unbounded)."""
    delta_value: Fraction
    """delta exactly, in [0, 1)."""
    figure: float
    """eps as the published figures compute it (display only)."""
    delta_figure: float
    """delta as the published figures compute it (display only)."""

    def __init__(self, epsilon: float, delta: float) -> None:
        """(eps, delta)-DP for eps >= 0 and delta in [0, 1); InvalidInput otherwise."""
        _with_fields(
            self,
            value=_epsilon(epsilon),
            delta_value=_delta(delta),
            figure=float(epsilon),
            delta_figure=float(delta),
        )

    @classmethod
    def _of(
        cls, value: Fraction | None, delta: Fraction, figure: float, delta_figure: float
    ) -> ApproxDP:
        """A guarantee from its exact parameters and figures; a delta of 1 or more is refused."""
        if not delta < 1:
            raise InvalidInput("the composed delta reaches 1: the guarantee would say nothing")
        return _with_fields(
            cls.__new__(cls),
            value=value,
            delta_value=delta,
            figure=figure,
            delta_figure=delta_figure,
        )

    @property
    def epsilon(self) -> float:
        """eps as a float, rounded up (``inf``: unbounded)."""
        return math.inf if self.value is None else round_up(self.value)

    @property
    def delta(self) -> float:
        """delta as a float, rounded up."""
        return round_up(self.delta_value)

    def __add__(self, other: object) -> ApproxDP:
        """Basic sequential composition: the epsilons add up, and the deltas."""
        if isinstance(other, PureDP):
            other = other.approx()
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP._of(
            _add(self.value, other.value),
            self.delta_value + other.delta_value,
            self.figure + other.figure,
            self.delta_figure + other.delta_figure,
        )

    def __mul__(self, count: object) -> ApproxDP:
        """``count`` compositions of this guarantee: count x eps, count x delta."""
        factor, given = _factor(count)
        return ApproxDP._of(
            _scale(self.value, factor),
            self.delta_value * factor,
            _times(self.figure, given),
            _times(self.delta_figure, given),
        )

    __rmul__ = __mul__

    def _other(self, other: object) -> ApproxDP:
        """``other`` to compare with, or TypeError for anything but an ApproxDP (a PureDP is
        compared as one only through :meth:`PureDP.approx`: local and central stay apart)."""
        if not isinstance(other, ApproxDP):
            raise TypeError("an ApproxDP compares with an ApproxDP only")
        return other

    def __eq__(self, other: object) -> bool:
        """Equal when both are ApproxDP with the same exact eps and delta."""
        return isinstance(other, ApproxDP) and (self.value, self.delta_value) == (
            other.value,
            other.delta_value,
        )

    def __hash__(self) -> int:
        """Hashed on the exact parameters, as it compares."""
        return hash(("ApproxDP", self.value, self.delta_value))

    def __le__(self, other: object) -> bool:
        """Whether this guarantee is at least as strong as ``other``: neither its eps nor its
        delta is larger (a partial order: two guarantees may be incomparable)."""
        that = self._other(other)
        return _at_most(self.value, that.value) and self.delta_value <= that.delta_value

    def __lt__(self, other: object) -> bool:
        """Whether this guarantee is at most ``other`` and not equal to it."""
        return self <= other and self != other

    def __ge__(self, other: object) -> bool:
        """Whether ``other`` is at least as strong as this guarantee."""
        return self._other(other) <= self

    def __gt__(self, other: object) -> bool:
        """Whether this guarantee is at least ``other`` and not equal to it."""
        return self >= other and self != other

    def __repr__(self) -> str:
        """``ApproxDP(epsilon=..., delta=...)`` with the rounded-up parameters."""
        return f"ApproxDP(epsilon={self.epsilon!r}, delta={self.delta!r})"


def compose(guarantees: Iterable[PureDP]) -> PureDP:
    """The sequential composition of ``guarantees`` (all of them pure): the exact sum, its
    figure the :func:`math.fsum` of theirs (as the account has always totalled them)."""
    items = list(guarantees)
    total: Fraction | None = Fraction(0)
    for guarantee in items:
        total = _add(total, guarantee.value)
    return PureDP._of(total, math.fsum(g.figure for g in items))
