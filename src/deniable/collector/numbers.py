"""Every number a request carries in its query or a form, parsed once and strictly.

A :class:`NumberRule` names a parameter and its range; :meth:`NumberRule.parse` takes the
text as sent: ASCII digits only (``²`` and other Unicode digits pass ``str.isdigit`` but are
refused), at most :data:`MAX_NUMBER_CHARS` characters, finite, inside the range. A bad value
is an :class:`InvalidNumber` whose message names the parameter and the range, never the
value. The API's query parameters use it through :meth:`NumberRule.query` (FastAPI answers
422), the dashboard's forms through :meth:`NumberRule.parse` directly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Query
from pydantic import BeforeValidator

from deniable.client.errors import InvalidInput

MAX_NUMBER_CHARS = 32
"""The longest number text read: longer is refused before it is converted."""

WHOLE = re.compile(r"[0-9]+")
"""A whole number: ASCII digits, no sign, no separators."""

DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
"""A decimal number in ASCII, optionally signed, with an optional exponent (no inf, nan, hex
or underscores)."""


class InvalidNumber(InvalidInput):
    """A query or form number that is not one, or outside its range; the message names the
    parameter and the range."""


@dataclass(frozen=True)
class NumberRule:
    """A query or form parameter's number: its name, whole or not, and its range (``low`` and
    ``high`` included unless ``open_low`` / ``open_high``)."""

    name: str
    low: float
    high: float
    whole: bool = False
    open_low: bool = False
    open_high: bool = False

    def expected(self) -> str:
        """What the parameter must be, in words."""
        low, high = _text(self.low), _text(self.high)
        if self.whole:
            return f"{self.name} must be a whole number from {low} to {high}"
        above = f"above {low}" if self.open_low else f"at least {low}"
        below = f"below {high}" if self.open_high else f"at most {high}"
        return f"{self.name} must be a number {above} and {below}"

    def parse(self, text: Any) -> int | float:
        """The number ``text`` writes (surrounding spaces ignored); :class:`InvalidNumber` naming
        the parameter if it is not one of the range."""
        if not isinstance(text, str):
            raise InvalidNumber(self.expected())
        text = text.strip()
        pattern = WHOLE if self.whole else DECIMAL
        if len(text) > MAX_NUMBER_CHARS or not pattern.fullmatch(text):
            raise InvalidNumber(self.expected())
        number: int | float = int(text) if self.whole else float(text)
        if not math.isfinite(number) or not self._inside(number):
            raise InvalidNumber(self.expected())
        return number

    def _inside(self, number: float) -> bool:
        above = number > self.low if self.open_low else number >= self.low
        below = number < self.high if self.open_high else number <= self.high
        return above and below

    def validator(self) -> BeforeValidator:
        """A pydantic validator applying :meth:`parse` to a query value (a list's items too)."""
        return BeforeValidator(self.parse)

    def query(self, description: str) -> Any:
        """FastAPI's ``Query`` for the parameter: its range in the OpenAPI document."""
        low, high = self.low, self.high
        return Query(
            description=description,
            gt=low if self.open_low else None,
            ge=None if self.open_low else low,
            lt=high if self.open_high else None,
            le=None if self.open_high else high,
        )


def _text(bound: float) -> str:
    """A range bound as people write it: 1,000,000, 20, 0.5."""
    return f"{bound:,.0f}" if float(bound).is_integer() else f"{bound:g}"


def query_number(rule: NumberRule, kind: type, description: str) -> Any:
    """The type of a query parameter read by ``rule``: ``kind`` (int or float), parsed by
    :meth:`NumberRule.parse`, documented with its range."""
    return Annotated[kind, rule.validator(), rule.query(description)]
