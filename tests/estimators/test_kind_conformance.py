"""Every client kind has a server kind that keeps the contract of an accumulator (one
conformance test over :data:`deniable.client.kinds.KINDS`): it is made from a seeded batch of
reports, merging the accumulators of two halves gives the whole's, and its document is the
one the estimate engine made before the kinds had modules of their own.

Adding a kind means an estimators module registered for its class and an example here: the
first test fails until both are in step."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from deniable.client.kinds import KINDS, HistogramSpec, NumericSpec, SetSpec, TextSpec
from deniable.client.randomness import SeededRandomness
from deniable.client.spec import MetricSpec
from deniable.estimators import (
    Estimate,
    PeriodCounts,
    PeriodSums,
    estimate_document,
    estimate_quantiles,
    histogram_document,
    mean_document,
)
from deniable.estimators.choices import check_quantiles
from deniable.estimators.engine import CellStats, DocumentOptions, DocumentQuery, document
from deniable.estimators.heavyhitters import text_document
from deniable.estimators.kinds import (
    Accumulator,
    MeanSums,
    ShareCounts,
    SketchTally,
    SliceOptions,
    counted_shares,
    estimator_of,
    registered,
    share_options,
)
from deniable.estimators.setfrequency import set_document, set_estimate

EXAMPLES: dict[str, tuple[dict[str, Any], list[Any]]] = {
    "boolean": ({"name": "dark_mode", "type": "boolean", "epsilon": 1.0}, [False, True, True]),
    "categorical": (
        {
            "name": "browser",
            "type": "categorical",
            "categories": ["chrome", "firefox", "safari"],
            "epsilon": 2.0,
            "mechanism": "oue",
        },
        ["chrome", "safari", "chrome", "firefox"],
    ),
    "histogram": (
        {"name": "load_hist", "type": "histogram", "edges": [0, 100, 250, 1000], "epsilon": 2.0},
        [-5, 150.5, 300, 999, 50],
    ),
    "numeric": (
        {"name": "load_ms", "type": "numeric", "lower": 0, "upper": 5000, "epsilon": 1.0},
        [0, 2500.5, 4000, 120],
    ),
    "text": (
        {"name": "search", "type": "text", "max_length": 4, "epsilon": 4.0},
        ["cats", "dogs", "cats", "cats"],
    ),
    "set": (
        {
            "name": "features",
            "type": "set",
            "categories": ["search", "share", "export", "print"],
            "max_items": 2,
            "epsilon": 2.0,
            "mechanism": "oue",
        },
        [["search"], ["share", "export"], [], ["search", "share", "export"]],
    ),
}
"""For each kind: a spec's JSON form and the values its devices record (cycled)."""

PERIODS = ["2026-11-01", "2026-11-02", "2026-11-03"]
"""The periods the reports of a batch fall in (a text metric's: the last only)."""

QUERY = DocumentOptions(confidence=0.9)
"""The options of every document compared here."""


def example(type_name: str) -> MetricSpec:
    """The example spec of ``type_name``."""
    return MetricSpec.from_dict(EXAMPLES[type_name][0])


def batch(spec: MetricSpec, size: int = 240, seed: int = 11) -> list[tuple[str, Any]]:
    """``size`` seeded reports of ``spec``: (period, payload), the example values cycled."""
    values = EXAMPLES[spec.type][1]
    rng, pick = SeededRandomness(seed), random.Random(seed)
    periods = PERIODS[-1:] if isinstance(spec, TextSpec) else PERIODS
    randomizer: Any = spec.report_randomizer

    def report(value: Any) -> Any:
        """One report of ``value`` (a text metric's at a level drawn as a device pins it)."""
        if isinstance(spec, TextSpec):
            level = pick.randint(1, spec.text_randomizer.levels)
            return randomizer.randomize(spec.prepare(value), level, rng)
        return randomizer.randomize(spec.prepare(value), rng)

    return [(pick.choice(periods), report(values[i % len(values)])) for i in range(size)]


@dataclass
class Pinned:
    """A :class:`~deniable.estimators.engine.CountsSource` over an accumulator's statistics."""

    spec: MetricSpec
    accumulator: Accumulator
    first: str | None = PERIODS[0]
    last: str | None = PERIODS[-1]

    def counts(self) -> list[PeriodCounts]:
        """The counts of a kind with categories."""
        assert isinstance(self.accumulator, ShareCounts)
        return list(self.accumulator.periods)

    def sums(self) -> list[PeriodSums]:
        """A numeric metric's sums."""
        assert isinstance(self.accumulator, MeanSums)
        return list(self.accumulator.periods)

    def text_counts(self) -> np.ndarray:
        """A text metric's sketch counts."""
        assert isinstance(self.accumulator, SketchTally)
        return self.accumulator.counts

    def cells(self) -> dict[str, CellStats]:
        """No cells."""
        return {}

    def shares(self, spec: MetricSpec, options: dict[str, Any]) -> Estimate:
        """The shares from the counts."""
        return counted_shares(spec, self.counts(), options)


def engine_before(spec: MetricSpec, source: Pinned, query: DocumentQuery) -> dict[str, Any]:
    """The estimate engine's dispatch as it was written before the kinds' modules, by type."""
    if isinstance(spec, TextSpec):
        candidates = None if query.candidates is None else list(query.candidates)
        return text_document(
            spec.name,
            source.last,
            spec.text_randomizer,
            source.text_counts(),
            confidence=query.confidence,
            candidates=candidates,
        )
    first, last = source.first, source.last
    if isinstance(spec, SetSpec):  # as the set kind's estimate route made it
        shares = set_estimate(
            spec.set_randomizer,
            spec.categories,
            source.counts(),
            confidence=query.confidence,
            simultaneous=query.simultaneous,
            pooling=query.pooling,
        )
        return set_document(spec.name, first, last, shares)
    if isinstance(spec, NumericSpec):
        return mean_document(
            spec, first, last, source.sums(), confidence=query.confidence, pooling=query.pooling
        )
    result = source.shares(spec, share_options(query))
    if not isinstance(spec, HistogramSpec):
        return estimate_document(spec.name, first, last, result)
    qs = check_quantiles(None if query.quantiles is None else list(query.quantiles))
    intervals = estimate_quantiles(
        spec.randomizer,
        spec.edges,
        source.counts(),
        qs,
        confidence=query.confidence,
        pooling=query.pooling,
    )
    return histogram_document(spec.name, first, last, result, intervals, spec.edges)


def same(a: Any, b: Any, exact: bool) -> bool:
    """Whether two documents or statistics are equal (to 1e-12 where ``exact`` is false)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], exact) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y, exact) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and not exact:
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)


def statistics(accumulator: Accumulator) -> Any:
    """An accumulator's statistics as plain JSON values."""
    if isinstance(accumulator, SketchTally):
        return accumulator.counts.tolist()
    assert isinstance(accumulator, ShareCounts | MeanSums)
    return [vars(period) for period in accumulator.periods]


def test_every_client_kind_has_a_server_kind_and_an_example() -> None:
    assert set(KINDS) == set(EXAMPLES)
    for kind in KINDS.values():
        assert estimator_of(kind) is not None
    assert set(registered()) <= set(KINDS.values())


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_an_accumulator_of_two_halves_merged_is_the_whole_s(type_name: str) -> None:
    spec = example(type_name)
    estimator, reports = estimator_of(spec), batch(spec)
    whole = estimator.from_reports(spec, reports)
    half = len(reports) // 3
    merged = estimator.from_reports(spec, reports[:half]).merge(
        estimator.from_reports(spec, reports[half:])
    )
    exact = not isinstance(spec, NumericSpec)
    assert same(statistics(merged), statistics(whole), exact)
    n = sum(p.n for p in whole.periods) if not isinstance(whole, SketchTally) else len(reports)
    assert n == len(reports)


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_an_accumulator_counts_what_each_report_supports(type_name: str) -> None:
    spec = example(type_name)
    reports = batch(spec, size=40)
    accumulator = estimator_of(spec).from_reports(spec, reports)
    if isinstance(spec, NumericSpec):
        assert isinstance(accumulator, MeanSums)
        for period in accumulator.periods:
            ys = [float(y) for label, y in reports if label == period.period]
            assert period.n == len(ys)
            assert math.isclose(period.total, sum(ys), abs_tol=1e-12)
        return
    expected = np.zeros((len(PERIODS), spec.count_width), dtype=np.int64)
    randomizer: Any = spec.report_randomizer
    for label, payload in reports:
        expected[PERIODS.index(label), randomizer.supported(payload)] += 1
    if isinstance(accumulator, SketchTally):
        assert accumulator.counts.tolist() == expected[-1].tolist()
    else:
        assert isinstance(accumulator, ShareCounts)
        for period in accumulator.periods:
            assert list(period.counts) == expected[PERIODS.index(period.period)].tolist()


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_a_kind_computes_the_document_the_engine_made_before(type_name: str) -> None:
    spec = example(type_name)
    estimator = estimator_of(spec)
    accumulator = estimator.from_reports(spec, batch(spec))
    source = Pinned(spec, accumulator)
    before = json.dumps(engine_before(spec, source, QUERY), sort_keys=True)
    computed = estimator.compute(spec, accumulator, (source.first, source.last), QUERY)
    assert json.dumps(computed, sort_keys=True) == before
    assert json.dumps(document(spec, source, QUERY), sort_keys=True) == before


def cell_of(spec: MetricSpec, accumulator: Accumulator) -> CellStats:
    """The accumulator's statistics as one dimension cell's over :data:`PERIODS` (a text
    metric's over its one period)."""
    if isinstance(accumulator, SketchTally):
        stats = CellStats.empty(1, spec.count_width)
        stats.counts[0] = accumulator.counts
        return stats
    stats = CellStats.empty(len(PERIODS), spec.count_width)
    assert isinstance(accumulator, ShareCounts | MeanSums)
    for period in accumulator.periods:
        i = PERIODS.index(period.period)
        stats.n[i] = period.n
        if isinstance(period, PeriodSums):
            stats.total[i], stats.total_squares[i] = period.total, period.total_squares
        else:
            stats.counts[i] = period.counts
    return stats


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_a_cell_s_statistics_read_back_as_the_accumulator(type_name: str) -> None:
    spec = example(type_name)
    estimator = estimator_of(spec)
    whole = estimator.from_reports(spec, batch(spec))
    labels = PERIODS[-1:] if isinstance(spec, TextSpec) else PERIODS
    read = estimator.from_cell(spec, cell_of(spec, whole), labels)
    assert same(statistics(read), statistics(whole), exact=True)
    options = SliceOptions(0.99, "unbiased", "overlap-safe", 3)
    sliced = estimator.slice_document(spec, read, (labels[0], labels[-1]), options)
    assert sliced["metric"] == spec.name
