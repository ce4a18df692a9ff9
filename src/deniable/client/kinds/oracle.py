"""What the kinds reported through a frequency oracle over k categories share (categorical,
boolean, histogram): the oracle's resolution, the category index and the payload bound."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError
from ..mechanisms import MECHANISMS, NUMERIC_MECHANISMS, OLH_PRIME, Mechanism, make_mechanism
from ..spec import MetricSpec


def oracle_payload_chars(mechanism: str, k: int) -> int:
    """The most characters a payload of the oracle ``mechanism`` over ``k`` items takes: an
    index's digits, an oue bit vector's base64, or an olh (a, b, y) object."""
    if mechanism == "oue":
        return 2 + 4 * math.ceil(math.ceil(k / 8) / 3)
    if mechanism == "olh":
        digits = len(str(OLH_PRIME))
        return len('{"a":,"b":,"y":}') + 3 * digits
    return len(str(k - 1))


def check_categories(metric: str, categories: tuple[str, ...]) -> None:
    """Check a kind's categories: at least two, distinct, each a non-empty string;
    :class:`~.errors.SpecError` names the metric and the problem."""
    if not all(isinstance(c, str) and c for c in categories):
        raise SpecError(f"metric {metric}: categories must be non-empty strings")
    if len(set(categories)) != len(categories):
        raise SpecError(f"metric {metric}: categories must be distinct")
    if len(categories) < 2:
        raise SpecError(f"metric {metric}: needs at least 2 categories")


@dataclass(frozen=True)
class OracleSpec(MetricSpec):
    """A kind whose reports come from a frequency oracle (krr, brr, oue, olh) over its
    categories; a subclass holds ``categories`` as a field."""

    _oracle: Mechanism = field(init=False, repr=False, compare=False)

    def _resolve_oracle(self, categories: tuple[str, ...]) -> None:
        """Check ``categories`` and resolve the mechanism over them (``auto`` picks krr for
        two categories but a boolean's, else the least variance)."""
        check_categories(self.name, categories)
        boolean = self._takes_brr()
        if self.mechanism in NUMERIC_MECHANISMS:
            raise SpecError(
                f"metric {self.name}: {self.mechanism} is a mechanism for numeric metrics;"
                f" a {self.type} metric uses auto, krr, oue or olh"
                + (" (or brr)" if boolean else "")
            )
        if self.mechanism != "auto" and self.mechanism not in MECHANISMS:
            raise SpecError(
                f"metric {self.name}: unknown mechanism; choose auto, brr, krr, oue or olh"
            )
        if self.mechanism == "brr" and not boolean:
            raise SpecError(f"metric {self.name}: brr is for boolean metrics only")
        name = self.mechanism
        if name == "auto" and not boolean and len(categories) == 2:
            name = "krr"
        try:
            oracle = make_mechanism(name, len(categories), self.epsilon)
        except ValueError as exc:
            raise SpecError(f"metric {self.name}: {exc}") from None
        object.__setattr__(self, "categories", categories)
        object.__setattr__(self, "epsilon", oracle.epsilon)
        object.__setattr__(self, "mechanism", oracle.name)
        object.__setattr__(self, "_oracle", oracle)

    @classmethod
    def _takes_brr(cls) -> bool:
        """Whether brr may randomize this kind (a boolean's two fixed categories only)."""
        return False

    @property
    def randomizer(self) -> Mechanism:
        """The resolved frequency oracle, with its parameters."""
        return self._oracle

    @property
    def report_randomizer(self) -> Mechanism:
        """The frequency oracle, which every report of this kind comes from."""
        return self._oracle

    @property
    def frequency_oracle(self) -> Mechanism:
        """The frequency oracle (this kind has categories)."""
        return self._oracle

    @property
    def count_width(self) -> int:
        """One support count per category or bucket."""
        return self.k

    @property
    def value_count(self) -> int:
        """A device records one of k categories or buckets."""
        return self.k

    def prepare(self, value: Any) -> int:
        """The category or bucket index of a recorded value."""
        return self.index_of(value)

    @property
    def payload_chars(self) -> int:
        """An index's digits, an oue bit vector's base64, or an olh (a, b, y) object."""
        return oracle_payload_chars(self.mechanism, self.k)

    def _category_list(self, shown: int = 20) -> str:
        """The categories for an error message (they are public), the first ``shown`` of a
        long list."""
        listed = ", ".join(self.categories[:shown])
        return listed if self.k <= shown else f"{listed}, ... ({self.k} in all)"
