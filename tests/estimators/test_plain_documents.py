"""``documents.plain`` turns an estimate's dataclasses into dicts exactly as
``dataclasses.asdict`` does: for dataclasses whose fields are all declared scalars (copied
whole, nothing inside looked at) and for the others (each field converted)."""

from __future__ import annotations

import dataclasses

from deniable.client import MetricSpec
from deniable.estimators import PeriodCounts, estimate
from deniable.estimators.documents import _shape, estimate_document, plain
from deniable.estimators.results import CategoryEstimate, Estimate


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
