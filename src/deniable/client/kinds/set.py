"""The set kind: a device holds a subset of a fixed list of categories (the features used
today, say), reported by padding-and-sampling to a declared maximum size ``max_items`` (L)
through a frequency oracle over the k categories and L dummy items (docs/STATS.md section 16)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import InvalidInput, SpecError
from ..mechanisms import Mechanism, PaddingSampling, make_set_mechanism
from ..spec import MetricSpec, MetricType
from .oracle import check_categories, oracle_payload_chars


@dataclass(frozen=True)
class SetSpec(MetricSpec):
    """A metric whose value is a subset of ``categories``, estimated as each category's share
    of devices; ``max_items`` is L, the most categories a device is expected to hold at once
    (a larger set is sampled down to L, which biases its categories' shares low)."""

    type: ClassVar[MetricType] = "set"
    memoizable: ClassVar[bool] = False
    """A set's values, the subsets, are too many to remember: every report is drawn afresh."""
    fixed_method: ClassVar[str | None] = "unbiased"
    """Its shares have one estimator: they are not on a simplex."""
    sliced_series: ClassVar[bool] = False
    """A series by slice of its shares is not available yet."""

    categories: tuple[str, ...] = field(kw_only=True)
    max_items: int = field(kw_only=True)
    _set: PaddingSampling = field(init=False, repr=False, compare=False)

    def _resolve(self) -> None:
        """Check the categories and ``max_items`` and resolve the oracle over k + L items
        (``auto``: the least variance)."""
        categories = tuple(self.categories)
        check_categories(self.name, categories)
        if self.max_items is None:
            raise SpecError(
                f"metric {self.name}: a set metric needs max_items, the most categories a"
                " device is expected to hold at once"
            )
        if self.mechanism not in ("auto", "krr", "oue", "olh"):
            raise SpecError(f"metric {self.name}: a set metric's oracle is auto, krr, oue or olh")
        try:
            randomizer = make_set_mechanism(
                len(categories), self.max_items, self.epsilon, self.mechanism
            )
        except ValueError as exc:
            raise SpecError(f"metric {self.name}: {exc}") from None
        object.__setattr__(self, "categories", categories)
        object.__setattr__(self, "epsilon", randomizer.epsilon)
        object.__setattr__(self, "mechanism", randomizer.oracle.name)
        object.__setattr__(self, "_set", randomizer)

    @classmethod
    def _from_fields(cls, data: dict[str, Any], common: dict[str, Any]) -> MetricSpec:
        """The spec from its JSON fields; bounds, edges or a max_length are refused."""
        if any(data.get(key) is not None for key in ("lower", "upper", "edges")):
            raise SpecError(f"metric {common['name']}: lower, upper and edges are for numbers only")
        if data.get("max_length") is not None:
            raise SpecError(f"metric {common['name']}: max_length is for text metrics only")
        return cls(**common, categories=tuple(data["categories"]), max_items=data.get("max_items"))

    @property
    def domain(self) -> str:
        """``sets of up to 3 of 5 categories``."""
        return f"sets of up to {self.max_items} of {self.k} categories"

    def domain_fields(self) -> dict[str, Any]:
        """The categories, in order, and max_items."""
        return {"categories": list(self.categories), "max_items": self.max_items}

    @property
    def report_randomizer(self) -> PaddingSampling:
        """Padding-and-sampling, which every report of a set comes from."""
        return self._set

    @property
    def set_randomizer(self) -> PaddingSampling:
        """The resolved padding-and-sampling randomizer."""
        return self._set

    @property
    def randomizer(self) -> Mechanism:
        """The frequency oracle over the k + L items, which a report's payload is from."""
        return self._set.oracle

    @property
    def frequency_oracle(self) -> Mechanism:
        """The oracle over the k + L items (its counts are what the collector keeps)."""
        return self._set.oracle

    @property
    def count_width(self) -> int:
        """One support count per item of the oracle: the k categories and the L dummies."""
        return self._set.width

    def prepare(self, value: Any) -> tuple[int, ...]:
        """A set (or list, tuple) of category names as sorted distinct category indices."""
        return self.items_of(value)

    def items_of(self, value: Any) -> tuple[int, ...]:
        """A set, frozenset, list or tuple of category names as sorted distinct category
        indices; :class:`~.errors.InvalidInput` names the metric, never the value."""
        if not isinstance(value, set | frozenset | list | tuple) or not all(
            type(v) is str for v in value
        ):
            raise InvalidInput(
                f"metric {self.name}: expects a set (or list) of category names (str)"
            )
        try:
            return tuple(sorted({self.categories.index(v) for v in value}))
        except ValueError:
            listed = ", ".join(self.categories[:20])
            shown = listed if self.k <= 20 else f"{listed}, ... ({self.k} in all)"
            raise InvalidInput(
                f"metric {self.name}: a value is not one of its categories (case-sensitive):"
                f" {shown}"
            ) from None

    def index_of(self, value: Any) -> int:
        """A set has no single category: record a set of them."""
        raise InvalidInput(f"metric {self.name} is a set: record a set of categories")

    @property
    def payload_chars(self) -> int:
        """The oracle's payload over k + L items."""
        return oracle_payload_chars(self.mechanism, self.count_width)
