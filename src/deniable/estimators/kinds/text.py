"""The text kind's server side: one period's prefix-sketch counts (cells and tallies), and
its heavy hitters' document from them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from deniable.client.kinds import TextSpec

from ..heavyhitters import text_document
from .base import KindEstimator, Report, Span, register

if TYPE_CHECKING:
    from ..engine import CountsSource, DocumentQuery


@dataclass(frozen=True)
class SketchTally:
    """The accumulator of a text metric: the sketch counts of its one period."""

    counts: np.ndarray

    def merge(self, other: SketchTally) -> SketchTally:
        """Both sketches' counts added."""
        return SketchTally(self.counts + other.counts)


@register(TextSpec)
class TextEstimator(KindEstimator[TextSpec, SketchTally]):
    """Heavy hitters: sketch counts in, the discovered (or scored) strings' document out."""

    def from_reports(self, spec: TextSpec, reports: Iterable[Report]) -> SketchTally:
        """The sketch counts of the reports (of one period)."""
        sketch = spec.text_randomizer
        counts = np.zeros(spec.count_width, dtype=np.int64)
        for _, payload in reports:
            if not isinstance(payload, dict):
                raise TypeError(f"metric {spec.name}: a text payload is a sketch object")
            counts[sketch.supported(payload)] += 1
        return SketchTally(counts)

    def from_source(self, spec: TextSpec, source: CountsSource) -> SketchTally:
        """The source's sketch counts in its last period."""
        return SketchTally(source.text_counts())

    def compute(
        self, spec: TextSpec, accumulator: SketchTally, span: Span, query: DocumentQuery
    ) -> dict[str, Any]:
        """The heavy hitters' document of the period ``span`` ends with."""
        candidates = None if query.candidates is None else list(query.candidates)
        return text_document(
            spec.name,
            span[1],
            spec.text_randomizer,
            accumulator.counts,
            confidence=query.confidence,
            candidates=candidates,
        )
