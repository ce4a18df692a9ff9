"""The collector's database as a :class:`~deniable.estimators.engine.CountsSource`: one
metric's stored counts (and a numeric metric's sums) over one range of periods."""

from __future__ import annotations

from typing import Any

import numpy as np

from deniable.client.kinds import TextSpec
from deniable.client.spec import MetricSpec
from deniable.estimators import Estimate, PeriodCounts, PeriodSums
from deniable.estimators.documents import MetricAbout
from deniable.estimators.engine import CellStats, LabelledRange
from deniable.estimators.kinds import counted_shares

from ..storage.engine import Database
from ..storage.queries import (
    read_cells,
    read_counts,
    read_counts_about,
    read_sums,
    read_text_cells,
)


class StoredCounts(LabelledRange):
    """The stored counts of ``spec`` over the periods ``labels`` (oldest first), each read
    once, when the engine first asks for it."""

    def __init__(self, database: Database, spec: MetricSpec, labels: list[str]) -> None:
        self.database = database
        self.spec = spec
        self.labels = labels
        self._counts: list[PeriodCounts] | None = None
        self.about: MetricAbout | None = None
        """The metric's unit, description and owner, when the counts' statement read them."""

    def counts(self) -> list[PeriodCounts]:
        """The counts of each period, in label order (read once)."""
        if self._counts is None:
            n, counts, self.about = read_counts_about(self.database, self.spec, self.labels)
            self._counts = [
                PeriodCounts(label, value, row)
                for label, value, row in zip(self.labels, n.tolist(), counts, strict=True)
            ]
        return self._counts

    def sums(self) -> list[PeriodSums]:
        """A numeric metric's sums of each period."""
        return read_sums(self.database, self.spec, self.labels)

    def text_counts(self) -> np.ndarray:
        """A text metric's sketch counts in the last period."""
        _, counts = read_counts(self.database, self.spec, [self.labels[-1]])
        return counts[0]

    def cells(self) -> dict[str, CellStats]:
        """Each cell's statistics: packed rows, or a text metric's sparse sketch counts (each
        cell's whole sketch per period)."""
        read = read_text_cells if isinstance(self.spec, TextSpec) else read_cells
        return read(self.database, self.spec, self.labels)

    def shares(self, spec: MetricSpec, options: dict[str, Any]) -> Estimate:
        """The shares' estimate from the stored counts."""
        return counted_shares(spec, self.counts(), options)
