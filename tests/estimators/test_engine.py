"""The estimate engine (estimators/engine.py): one dispatch over any CountsSource, equal to the
document builders it replaced, and each adapter (database, archive, export file) a source."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deniable.client.spec import MetricSpec
from deniable.estimators import (
    Estimate,
    PeriodCounts,
    PeriodSums,
    estimate,
    estimate_document,
    estimate_quantiles,
    histogram_document,
    mean_document,
)
from deniable.estimators.engine import CountsSource, DocumentOptions, document
from deniable.estimators.kinds import counted_shares, share_options

LABELS = ["2026-11-01", "2026-11-02", "2026-11-03"]


class Counts:
    """An in-memory source: fixed counts and sums over :data:`LABELS`."""

    def __init__(self, counts: list[PeriodCounts], sums: list[PeriodSums]) -> None:
        self._counts, self._sums = counts, sums

    @property
    def first(self) -> str | None:
        return LABELS[0]

    @property
    def last(self) -> str | None:
        return LABELS[-1]

    def counts(self) -> list[PeriodCounts]:
        return self._counts

    def sums(self) -> list[PeriodSums]:
        return self._sums

    def text_counts(self) -> np.ndarray:
        raise AssertionError("not a text metric")

    def shares(self, spec: MetricSpec, options: dict[str, Any]) -> Estimate:
        return counted_shares(spec, self._counts, options)


def _counts(k: int) -> list[PeriodCounts]:
    rng = np.random.default_rng(7)
    return [
        PeriodCounts(label, 300, rng.multinomial(300, [1 / k] * k).tolist()) for label in LABELS
    ]


def test_shares_are_the_builders_own() -> None:
    spec = MetricSpec.categorical("browser", ["a", "b", "c"], epsilon=1.0)
    source: CountsSource = Counts(_counts(spec.k), [])
    query = DocumentOptions(confidence=0.9, method="consistent", simultaneous=True)
    result = estimate(spec.randomizer, spec.categories, source.counts(), **share_options(query))
    expected = estimate_document(spec.name, LABELS[0], LABELS[-1], result)
    assert document(spec, source, query) == expected


def test_a_histogram_adds_its_quantiles() -> None:
    spec = MetricSpec.histogram("load", [0, 10, 20, 40, 80], epsilon=2.0)
    source = Counts(_counts(spec.k), [])
    query = DocumentOptions(quantiles=(0.5, 0.9))
    assert spec.edges is not None
    result = estimate(spec.randomizer, spec.categories, source.counts(), **share_options(query))
    quantiles = estimate_quantiles(spec.randomizer, spec.edges, source.counts(), (0.5, 0.9))
    expected = histogram_document(spec.name, LABELS[0], LABELS[-1], result, quantiles, spec.edges)
    assert document(spec, source, query) == expected


def test_a_numeric_metric_gives_its_mean() -> None:
    spec = MetricSpec.numeric("load_ms", lower=0, upper=100, epsilon=1.0)
    sums = [PeriodSums(label, 200, 20.0 + i, 150.0 + i) for i, label in enumerate(LABELS)]
    source = Counts([], sums)
    query = DocumentOptions(pooling="independent")
    expected = mean_document(
        spec, LABELS[0], LABELS[-1], sums, confidence=0.95, pooling="independent"
    )
    assert document(spec, source, query) == expected


@pytest.mark.parametrize(
    "adapter",
    [
        "deniable.collector.queries.stored:StoredCounts",
        "deniable.sources.archivesource:ArchiveCounts",
        "deniable.cli.offline:ExportCounts",
    ],
)
def test_each_adapter_is_a_counts_source(adapter: str) -> None:
    """The three sources the issue names each answer every question of the protocol."""
    import importlib

    module, name = adapter.split(":")
    cls = getattr(importlib.import_module(module), name)
    wanted = {"first", "last", "counts", "sums", "text_counts", "shares"}
    assert wanted <= set(dir(cls))
