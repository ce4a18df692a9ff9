"""The text kind: any string (UTF-8, cut to ``max_length`` bytes), reported through the
prefix sketch (pem), for the strings many devices hold."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import InvalidInput, SpecError
from ..mechanisms import TEXT_MECHANISMS, PrefixSketch, make_text_mechanism
from ..spec import MAX_TEXT_CELL_COUNTS, MAX_TEXT_CELLS, MetricSpec, MetricType


@dataclass(frozen=True)
class TextSpec(MetricSpec):
    """A string of up to ``max_length`` UTF-8 bytes; dimensions within
    :data:`~..spec.MAX_TEXT_CELLS` cells and :data:`~..spec.MAX_TEXT_CELL_COUNTS` sketch
    counts."""

    type: ClassVar[MetricType] = "text"

    max_length: int = field(kw_only=True)
    _sketch: PrefixSketch = field(init=False, repr=False, compare=False)

    def _resolve(self) -> None:
        """Check ``max_length``, resolve the text mechanism (``auto`` is ``pem``) and hold
        the dimensions to the text cell caps."""
        if self.max_length is None:
            raise SpecError(f"metric {self.name}: a text metric needs max_length (UTF-8 bytes)")
        if self.mechanism != "auto" and self.mechanism not in TEXT_MECHANISMS:
            raise SpecError(
                f"metric {self.name}: unknown mechanism; a text metric uses auto or pem"
            )
        try:
            sketch = make_text_mechanism(self.mechanism, self.max_length, self.epsilon)
        except ValueError as exc:
            raise SpecError(f"metric {self.name}: {exc}") from None
        object.__setattr__(self, "epsilon", sketch.epsilon)
        object.__setattr__(self, "mechanism", sketch.name)
        object.__setattr__(self, "_sketch", sketch)
        self._check_text_cells()

    def _check_text_cells(self) -> None:
        """The dimensions within :data:`MAX_TEXT_CELLS` cells and :data:`MAX_TEXT_CELL_COUNTS`
        sketch counts per period (each cell keeps a whole sketch)."""
        if not self.dimensions:
            return
        cells = math.prod(len(values) + 1 for _, values in self.dimensions)
        counts = cells * self._sketch.cell_count
        if cells > MAX_TEXT_CELLS or counts > MAX_TEXT_CELL_COUNTS:
            raise SpecError(
                f"metric {self.name}: its dimensions make {cells:,} cells of"
                f" {self._sketch.cell_count:,} sketch counts each ({counts:,}); a text"
                f" metric takes at most {MAX_TEXT_CELLS} cells and {MAX_TEXT_CELL_COUNTS:,}"
                " counts (fewer dimension values, or a shorter max_length)"
            )

    @classmethod
    def _from_fields(cls, data: dict[str, Any], common: dict[str, Any]) -> MetricSpec:
        """The spec from its JSON fields; categories, edges or bounds are refused."""
        if data["categories"] or any(
            data.get(key) is not None for key in ("edges", "lower", "upper")
        ):
            raise SpecError(
                f"metric {common['name']}: a text metric has max_length only (no categories,"
                " edges, lower or upper)"
            )
        return cls(**common, max_length=data.get("max_length"))

    @property
    def domain(self) -> str:
        """``strings of up to 32 bytes``."""
        return f"strings of up to {self.max_length} bytes"

    def domain_fields(self) -> dict[str, Any]:
        """The longest string, in UTF-8 bytes."""
        return {"max_length": self.max_length}

    @property
    def text_randomizer(self) -> PrefixSketch:
        """The resolved prefix sketch."""
        return self._sketch

    @property
    def report_randomizer(self) -> PrefixSketch:
        """The prefix sketch, which every report of this kind comes from."""
        return self._sketch

    @property
    def count_width(self) -> int:
        """The sketch's cells and its (level, row) tallies."""
        return self._sketch.cell_count

    @property
    def payload_chars(self) -> int:
        """The sketch's ``{"b": bits, "l": level, "r": row}`` object."""
        return len('{"b":"","l":,"r":}') + 4 * math.ceil(128 / 3) + 2 + 2

    def prepare(self, value: Any) -> bytes:
        """The value's padded bytes."""
        return self.padded(value)

    def padded(self, value: Any) -> bytes:
        """The value as the padded bytes its reports carry; :class:`~..errors.InvalidInput`
        names the metric, never the value."""
        try:
            return self._sketch.encode(value)
        except ValueError as exc:
            raise InvalidInput(f"metric {self.name}: {exc}") from None
