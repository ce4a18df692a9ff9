"""``documents.plain`` turns an estimate's dataclasses into dicts exactly as
``dataclasses.asdict`` does: for dataclasses whose fields are all declared scalars (copied
whole, nothing inside looked at) and for the others (each field converted)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from deniable.client import MetricSpec
from deniable.estimators import PeriodCounts, documents, estimate
from deniable.estimators.documents import _shape, estimate_document, plain
from deniable.estimators.results import CategoryEstimate, Estimate, PeriodSums, QuantileInterval


def _estimate() -> Estimate:
    spec = MetricSpec.categorical("plain", ["a", "b", "c", "d"], epsilon=1.0, mechanism="oue")
    counts = [PeriodCounts("2026-12-01", 1000, [400, 300, 250, 120])]
    return estimate(spec.randomizer, ["a", "b", "c", "d"], counts, simultaneous=True)


def test_a_dataclass_of_scalars_only_is_flat_and_one_holding_others_is_not() -> None:
    assert _shape(CategoryEstimate)[1] is True
    assert _shape(Estimate)[1] is False


def test_plain_is_asdict_for_an_estimate_and_its_document() -> None:
    shares = _estimate()
    assert plain(shares) == dataclasses.asdict(shares)
    assert [plain(row) for row in shares.estimates] == [
        dataclasses.asdict(r) for r in shares.estimates
    ]
    document = estimate_document("plain", "2026-12-01", "2026-12-01", shares)
    assert list(document["estimates"][0]) == [
        field.name for field in dataclasses.fields(shares.estimates[0])
    ]
    assert document["estimates"] == [dataclasses.asdict(row) for row in shares.estimates]


def test_every_document_is_its_dataclasses_as_asdict_writes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each document function (series, histogram, mean) returns ``plain`` of its document:
    every value ``plain`` was given on the way is what ``dataclasses.asdict`` makes of it
    (a series' rows, copied whole at once, included)."""
    given: list[Any] = []
    real = documents.plain

    def recorded(value: Any) -> Any:
        given.append(value)
        return real(value)

    monkeypatch.setattr(documents, "plain", recorded)
    shares = _estimate()
    quantiles = [QuantileInterval(0.5, None, 2.0), QuantileInterval(0.9, 2.0, None)]
    numeric = MetricSpec.numeric("latency", lower=0.0, upper=100.0, epsilon=1.0)
    sums = [PeriodSums("2026-12-01", 400, 35.5, 210.25), PeriodSums("2026-12-02", 0, 0.0, 0.0)]
    options = {"confidence": 0.95, "method": "unbiased", "simultaneous": True}
    made = [
        documents.series_document("plain", [("2026-12-01", shares)] * 3, **options),
        documents.histogram_series_document(
            "plain", [("2026-12-01", shares, quantiles)] * 2, [1.0, 2.0, 3.0], **options
        ),
        documents.histogram_document(
            "plain", "2026-12-01", "2026-12-01", shares, quantiles, [1.0, 2.0, 3.0]
        ),
        documents.mean_document(
            numeric, "2026-12-01", "2026-12-02", sums, confidence=0.9, pooling="overlap-safe"
        ),
        documents.mean_series_document(numeric, sums, confidence=0.9),
    ]
    tops = [value for value in given if dataclasses.is_dataclass(value)]
    assert len(made) == 5 and len(tops) >= 5
    for value in tops:
        assert real(value) == dataclasses.asdict(value)
    assert made[0]["series"][2]["estimates"] == [dataclasses.asdict(r) for r in shares.estimates]


@dataclasses.dataclass(frozen=True)
class _Point:
    label: str
    share: float

    @functools.cached_property
    def percent(self) -> str:
        return f"{100 * self.share:.0f}%"


def test_rows_holding_more_than_their_fields_are_converted_field_by_field() -> None:
    """A row whose ``__dict__`` holds more than its fields (a cached property read) is not
    copied whole: ``plain`` of the rows is still ``asdict`` of each."""
    rows = [_Point("a", 0.25), _Point("b", 0.5)]
    assert rows[1].percent == "50%"
    assert plain(rows) == [dataclasses.asdict(row) for row in rows]
    assert plain(rows[:1]) == [{"label": "a", "share": 0.25}]
