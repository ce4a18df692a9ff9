"""The text kind's server side: one period's prefix-sketch counts (cells and tallies), and
its heavy hitters' document from them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from deniable.client.kinds import TextSpec

from ..heavyhitters import ALPHA, text_document
from ..results import CellStats
from .base import KindEstimator, Report, SliceOptions, Span, register

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

    def from_cell(self, spec: TextSpec, stats: CellStats, labels: Sequence[str]) -> SketchTally:
        """The cell's sketch counts in its first (a text read's one) period."""
        return SketchTally(stats.counts[0])

    def slice_document(
        self, spec: TextSpec, accumulator: SketchTally, span: Span, options: SliceOptions
    ) -> dict[str, Any]:
        """The slice's heavy hitters in the period ``span`` starts with, at the slice
        confidence, run at alpha / (slices shown): with probability >= 1 - alpha no shown
        slice lists a string absent from it; its floor is stated at that alpha."""
        alpha = ALPHA / max(1, options.shown)
        return _document(spec, accumulator, span[0], options.confidence, options.candidates, alpha)

    def compute(
        self, spec: TextSpec, accumulator: SketchTally, span: Span, query: DocumentQuery
    ) -> dict[str, Any]:
        """The heavy hitters' document of the period ``span`` ends with."""
        candidates = None if query.candidates is None else list(query.candidates)
        return _document(spec, accumulator, span[1], query.confidence, candidates)


def _document(
    spec: TextSpec,
    tally: SketchTally,
    period: str | None,
    confidence: float,
    candidates: list[str] | None,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """The heavy hitters' document of ``tally`` in ``period``, by ``spec``'s sketch."""
    return text_document(
        spec.name,
        period,
        spec.text_randomizer,
        tally.counts,
        confidence=confidence,
        candidates=candidates,
        alpha=alpha,
    )
