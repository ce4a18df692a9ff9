"""The Parquet archive as a :class:`~deniable.estimators.engine.CountsSource`: one metric's
archived files, reduced to counts (:mod:`.archivecounts`), over one range of periods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from deniable.client.spec import MetricSpec
from deniable.estimators import Estimate, PeriodCounts, PeriodSums
from deniable.estimators.engine import CellStats, LabelledRange
from deniable.estimators.kinds import counted_shares

from .archivecounts import FileCounts


class ArchiveCounts(LabelledRange):
    """The counts of ``spec`` over the periods ``labels`` from each archived file's
    (``files`` by period; a period without a file has no reports)."""

    def __init__(
        self, spec: MetricSpec, labels: list[str], files: Mapping[str, FileCounts]
    ) -> None:
        self.spec = spec
        self.labels = labels
        self.files = files

    def counts(self) -> list[PeriodCounts]:
        """Each period's counts, in label order."""
        return [self._period(label) for label in self.labels]

    def _period(self, label: str) -> PeriodCounts:
        """One period's counts: its file's (every category counted, zero or not), or none."""
        found = self.files.get(label)
        if found is None:
            return PeriodCounts(label, 0, [0] * self.spec.count_width)
        support = found.whole.support
        assert support is not None  # a file of a metric with categories counts each one
        return PeriodCounts(label, found.whole.n, support.tolist())

    def sums(self) -> list[PeriodSums]:
        """A numeric metric's sums of each period."""
        files = self.files
        return [
            PeriodSums(
                label,
                files[label].whole.n,
                files[label].whole.total,
                files[label].whole.total_squares,
            )
            if label in files
            else PeriodSums(label, 0, 0.0, 0.0)
            for label in self.labels
        ]

    def text_counts(self) -> np.ndarray:
        """A text metric's sketch counts in the last period (zeros without a file)."""
        found = self.files.get(self.labels[-1])
        counts = found.whole.support if found is not None else None
        if counts is None:
            counts = np.zeros(self.spec.count_width, dtype=np.int64)
        return counts

    def cells(self) -> dict[str, CellStats]:
        """Each cell's statistics from the files' per-cell counts (files without cells add
        none: the caller refuses a breakdown of an archive that holds none)."""
        size, width = len(self.labels), self.spec.count_width
        cells: dict[str, CellStats] = {}
        for i, label in enumerate(self.labels):
            found = self.files.get(label)
            for cell, counts in (found.cells if found else {}).items():
                stats = cells.get(cell)
                if stats is None:
                    stats = cells[cell] = CellStats.empty(size, width)
                stats.n[i] = counts.n
                if counts.support is not None:
                    stats.counts[i] = counts.support
                stats.total[i], stats.total_squares[i] = counts.total, counts.total_squares
        return cells

    def shares(self, spec: MetricSpec, options: dict[str, Any]) -> Estimate:
        """The shares' estimate from the archived counts."""
        return counted_shares(spec, self.counts(), options)
