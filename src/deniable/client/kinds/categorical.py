"""The categorical kind: one of a fixed list of categories; boolean is its case with the
categories ``false`` and ``true``, recorded as a bool, and brr besides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import InvalidInput, SpecError
from ..spec import BOOLEAN_CATEGORIES, MetricSpec, MetricType
from .oracle import OracleSpec


@dataclass(frozen=True)
class CategoricalSpec(OracleSpec):
    """A metric over a fixed list of categories (case-sensitive strings)."""

    type: ClassVar[MetricType] = "categorical"
    event_aggregates: ClassVar[frozenset[str]] = frozenset({"mode"})

    categories: tuple[str, ...] = field(kw_only=True)

    def _resolve(self) -> None:
        """Check the categories and resolve the frequency oracle."""
        self._resolve_oracle(tuple(self.categories))

    @classmethod
    def _from_fields(cls, data: dict[str, Any], common: dict[str, Any]) -> MetricSpec:
        """The spec from its JSON fields; bounds, edges or a max_length are refused."""
        if data.get("max_length") is not None:
            raise SpecError(f"metric {common['name']}: max_length is for text metrics only")
        if any(data.get(key) is not None for key in ("lower", "upper", "edges")):
            raise SpecError(f"metric {common['name']}: lower, upper and edges are for numbers only")
        return cls(**common, categories=tuple(data["categories"]))

    @property
    def domain(self) -> str:
        """``5 categories``."""
        return f"{self.k} categories"

    def domain_fields(self) -> dict[str, Any]:
        """The categories, in order."""
        return {"categories": list(self.categories)}

    def index_of(self, value: Any) -> int:
        """The index of a category name (case-sensitive)."""
        if isinstance(value, str):
            try:
                return self.categories.index(value)
            except ValueError:
                raise InvalidInput(
                    f"metric {self.name}: value is not one of its categories (case-sensitive):"
                    f" {self._category_list()}"
                ) from None
        raise InvalidInput(f"metric {self.name}: expects a category name (str)")


@dataclass(frozen=True)
class BooleanSpec(CategoricalSpec):
    """A yes/no metric: the categories are always ``false`` and ``true``; a value is a bool."""

    type: ClassVar[MetricType] = "boolean"
    event_aggregates: ClassVar[frozenset[str]] = frozenset({"any"})

    categories: tuple[str, ...] = field(default=BOOLEAN_CATEGORIES, kw_only=True)

    def _resolve(self) -> None:
        """Check the categories are ``false``, ``true`` and resolve the frequency oracle."""
        categories = tuple(self.categories)
        if categories != BOOLEAN_CATEGORIES:
            raise SpecError(f"metric {self.name}: boolean categories are always false, true")
        self._resolve_oracle(categories)

    @classmethod
    def _takes_brr(cls) -> bool:
        """brr randomizes a boolean."""
        return True

    def domain_fields(self) -> dict[str, Any]:
        """Nothing: a boolean's categories are fixed."""
        return {}

    def index_of(self, value: Any) -> int:
        """0 for False, 1 for True."""
        if isinstance(value, bool):
            return int(value)
        raise InvalidInput(f"metric {self.name}: expects a bool")
