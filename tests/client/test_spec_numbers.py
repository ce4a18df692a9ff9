"""Numeric and histogram specs: construction, the JSON form, fingerprints, ``auto``, scaling,
buckets, and every bad input refused as a :class:`SpecError` that says what is wrong."""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction
from typing import Any

import pytest

from deniable.client import InvalidInput, MetricSpec, SpecError
from deniable.client.kinds import HistogramSpec, NumericSpec
from deniable.client.mechanisms import HYBRID_THRESHOLD, Duchi, Hybrid, Piecewise


def _sha16(document: dict[str, Any]) -> str:
    """The fingerprint computed independently: Python's compact sorted JSON, which for these
    documents (integral numbers written as ints, ASCII strings) is RFC 8785."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_numeric_spec_has_its_bounds_and_no_categories() -> None:
    spec = MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=1.0, mechanism="pm")
    assert (spec.type, spec.lower, spec.upper, spec.edges) == ("numeric", 0.0, 5000.0, None)
    assert spec.categories == () and spec.k == 0
    assert isinstance(spec.lower, float) and isinstance(spec.upper, float)
    assert spec.numeric_randomizer == Piecewise(1.0)
    with pytest.raises(TypeError, match="numeric_randomizer"):
        _ = spec.randomizer


def test_histogram_spec_labels_its_buckets_with_the_last_one_closed() -> None:
    spec = MetricSpec.histogram("load_hist", [0, 100, 250, 500, 1000, 5000], epsilon=1.0)
    assert spec.edges == (0.0, 100.0, 250.0, 500.0, 1000.0, 5000.0)
    assert spec.categories == (
        "[0, 100)",
        "[100, 250)",
        "[250, 500)",
        "[500, 1000)",
        "[1000, 5000]",
    )
    assert spec.k == 5 and spec.randomizer.k == 5
    assert MetricSpec.histogram("h", [-1.5, 1e-7, 0.25], epsilon=1).categories == (
        "[-1.5, 1e-7)",
        "[1e-7, 0.25]",
    )
    with pytest.raises(TypeError, match="not numeric"):
        _ = spec.numeric_randomizer


def test_the_documented_examples_have_exactly_the_pinned_fingerprints() -> None:
    numeric = MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=1.0, mechanism="pm")
    assert numeric.fingerprint_fields() == {
        "name": "load_ms",
        "type": "numeric",
        "lower": 0.0,
        "upper": 5000.0,
        "epsilon": 1.0,
        "mechanism": "pm",
        "period": "day",
    }
    assert numeric.fingerprint == _sha16(
        {
            "name": "load_ms",
            "type": "numeric",
            "lower": 0,
            "upper": 5000,
            "epsilon": 1,
            "mechanism": "pm",
            "period": "day",
        }
    )
    hist = MetricSpec.histogram(
        "load_hist", [0, 100, 250, 500, 1000, 5000], epsilon=1.0, mechanism="oue"
    )
    assert set(hist.fingerprint_fields()) == {
        "name",
        "type",
        "edges",
        "epsilon",
        "mechanism",
        "period",
    }
    assert hist.fingerprint == _sha16(
        {
            "name": "load_hist",
            "type": "histogram",
            "edges": [0, 100, 250, 500, 1000, 5000],
            "epsilon": 1,
            "mechanism": "oue",
            "period": "day",
        }
    )


def test_integral_and_float_bounds_give_one_fingerprint() -> None:
    """RFC 8785 writes 0 and 0.0 alike, so a spec typed either way is the same metric."""
    a = MetricSpec.numeric("m", lower=0, upper=10, epsilon=1, mechanism="duchi")
    b = MetricSpec.numeric("m", lower=0.0, upper=10.0, epsilon=1.0, mechanism="duchi")
    assert a == b and a.fingerprint == b.fingerprint
    h1 = MetricSpec.histogram("h", [0, 1, 2], epsilon=1, mechanism="krr")
    h2 = MetricSpec.histogram("h", [0.0, 1.0, 2.0], epsilon=1.0, mechanism="krr")
    assert h1.fingerprint == h2.fingerprint and h1.categories == h2.categories


def test_fingerprint_changes_with_every_numeric_field() -> None:
    base = dict(name="m", lower=0, upper=10, epsilon=1.0, mechanism="pm", period="day")
    changes: list[dict[str, Any]] = [
        {"name": "n"},
        {"lower": -1},
        {"upper": 10.5},
        {"epsilon": 2.0},
        {"mechanism": "duchi"},
        {"period": "week"},
    ]
    prints = {MetricSpec.numeric(**{**base, **c}).fingerprint for c in changes}  # type: ignore[arg-type]
    prints.add(MetricSpec.numeric(**base).fingerprint)  # type: ignore[arg-type]
    assert len(prints) == len(changes) + 1
    edges = [0, 10, 20]
    hist = {
        MetricSpec.histogram("h", e, epsilon=1.0, mechanism="krr").fingerprint
        for e in (edges, [0, 10, 21], [0, 10, 20, 30], [-1, 10, 20])
    }
    assert len(hist) == 4


@pytest.mark.parametrize(
    "spec",
    [
        MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=1.0),
        MetricSpec.numeric("temp", lower=-40.5, upper=60.25, epsilon=0.5, period="month"),
        MetricSpec.numeric("x", lower=1e-9, upper=3e-9, epsilon=3, mechanism="pm"),
        MetricSpec.histogram("load_hist", [0, 100, 250, 500, 1000, 5000], epsilon=1.0),
        MetricSpec.histogram("h", [-2.5, 0, 0.1, 7], epsilon=2, mechanism="olh", period="week"),
    ],
    ids=lambda spec: spec.name,
)
def test_to_dict_from_dict_round_trips_through_json(spec: MetricSpec) -> None:
    document = json.loads(json.dumps(spec.to_dict()))
    again = MetricSpec.from_dict(document)
    assert again == spec and again.fingerprint == spec.fingerprint
    assert document["fingerprint"] == spec.fingerprint
    assert "categories" not in document


def test_a_served_histogram_may_list_its_bucket_labels_but_only_the_right_ones() -> None:
    spec = MetricSpec.histogram("h", [0, 1, 2], epsilon=1.0)
    served = {**spec.to_dict(), "categories": list(spec.categories)}
    assert MetricSpec.from_dict(served) == spec
    with pytest.raises(SpecError, match="bucket labels"):
        MetricSpec.from_dict({**served, "categories": ["low", "high"]})


@pytest.mark.parametrize(
    ("epsilon", "expected"),
    [(0.001, "duchi"), (0.3, "duchi"), (0.6094, "duchi"), (0.6095, "hybrid"), (1, "hybrid")]
    + [(e, "hybrid") for e in (1.29, 2.0, 4.0, 10.0, 20.0)],
)
def test_auto_is_duchi_up_to_the_hybrid_threshold_and_hybrid_above(
    epsilon: float, expected: str
) -> None:
    spec = MetricSpec.numeric("m", lower=0, upper=1, epsilon=epsilon)
    assert spec.mechanism == expected
    assert spec.to_dict()["mechanism"] == expected
    candidates = [Duchi(epsilon), Piecewise(epsilon), Hybrid(epsilon)]
    least = min(m.worst_case_variance for m in candidates)
    assert spec.numeric_randomizer.worst_case_variance == least
    assert HYBRID_THRESHOLD == 0.6094


def test_auto_for_a_histogram_is_the_categorical_choice() -> None:
    assert MetricSpec.histogram("h", [0, 1, 2], epsilon=1.0).mechanism == "krr"
    assert MetricSpec.histogram("h", list(range(5)), epsilon=2.0).mechanism == "krr"
    many = MetricSpec.histogram("h", list(range(66)), epsilon=0.5)
    assert many.mechanism in {"oue", "olh"} and many.k == 65


def test_scale_clamps_and_maps_onto_minus_one_to_one() -> None:
    spec = MetricSpec.numeric("m", lower=100, upper=300, epsilon=1.0)
    assert spec.scale(100) == -1.0 and spec.scale(300) == 1.0 and spec.scale(200) == 0.0
    assert spec.scale(150.0) == -0.5
    assert spec.scale(-1e300) == -1.0 and spec.scale(1e300) == 1.0
    assert spec.scale(Fraction(250)) == 0.5
    for t in (-1.0, -0.3, 0.0, 0.7, 1.0):
        assert spec.scale(spec.unscale(t)) == pytest.approx(t, abs=1e-15)


def test_bucket_of_counts_out_of_range_values_in_the_end_buckets() -> None:
    spec = MetricSpec.histogram("h", [0, 100, 250, 500], epsilon=1.0)
    cases = [(-5, 0), (0, 0), (99.999, 0), (100, 1), (249, 1), (250, 2), (500, 2), (1e9, 2)]
    for value, bucket in cases:
        assert spec.bucket_of(value) == bucket
        assert spec.index_of(value) == bucket


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 10**400, "412", True, None, [1]])
def test_a_bad_value_names_the_metric_never_the_value(bad: object) -> None:
    numeric = MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=1.0)
    hist = MetricSpec.histogram("load_hist", [0, 100, 250], epsilon=1.0)
    for call in (numeric.scale, hist.bucket_of, hist.index_of):
        with pytest.raises(InvalidInput) as caught:
            call(bad)
        message = str(caught.value)
        assert "load_" in message and "412" not in message and "True" not in message
    with pytest.raises(InvalidInput, match="numeric"):
        numeric.index_of(3.0)


NUMERIC = {"name": "m", "type": "numeric", "lower": 0, "upper": 10, "epsilon": 1.0}
HISTOGRAM = {"name": "h", "type": "histogram", "edges": [0, 10, 20], "epsilon": 1.0}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lower": math.nan}, "metric m: lower must be a finite number"),
        ({"upper": math.inf}, "metric m: upper must be a finite number"),
        ({"lower": -math.inf}, "metric m: lower must be a finite number"),
        ({"lower": "0"}, "metric m: lower must be a finite number"),
        ({"upper": True}, "metric m: upper must be a finite number"),
        ({"lower": False}, "metric m: lower must be a finite number"),
        ({"upper": 10**400}, "metric m: upper must be a finite number"),
        ({"lower": None}, "metric m: lower must be a finite number"),
        ({"lower": 10}, "metric m: lower must be less than upper"),
        ({"lower": 11}, "metric m: lower must be less than upper"),
        ({"lower": -1e308, "upper": 1e308}, "upper - lower must be a finite number"),
        ({"lower": 0, "upper": 1e308}, "must lie within"),
        ({"lower": -1e301, "upper": 0}, "must lie within"),
        ({"lower": 0, "upper": 5e-324}, "too narrow for float arithmetic"),
        ({"lower": 0, "upper": 1e-301}, "too narrow for float arithmetic"),
        ({"lower": 1e9, "upper": 1e9 + 1e-4}, "too narrow for float arithmetic"),
        ({"categories": ["a", "b"]}, "no categories"),
        ({"edges": [0, 1, 2]}, "no categories or edges"),
        ({"mechanism": "krr"}, "krr is a mechanism for categories"),
        ({"mechanism": "oue"}, "oue is a mechanism for categories"),
        ({"mechanism": "brr"}, "brr is a mechanism for categories"),
        ({"mechanism": "laplace"}, "unknown mechanism; choose auto, duchi, pm or hybrid"),
        ({"mechanism": ["pm"]}, "mechanism must be a name"),
        ({"epsilon": math.nan}, "metric m: epsilon"),
        ({"epsilon": "1"}, "metric m: epsilon must be a number"),
        ({"epsilon": 21}, "epsilon must be at most 20"),
    ],
)
def test_bad_numeric_specs_are_refused_saying_why(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        MetricSpec.from_dict({**NUMERIC, **changes})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"edges": [0, 10, math.nan]}, "metric h: each edge must be a finite number"),
        ({"edges": [-math.inf, 0, 10]}, "each edge must be a finite number"),
        ({"edges": [0, 10, math.inf]}, "each edge must be a finite number"),
        ({"edges": [0, "10", 20]}, "each edge must be a finite number"),
        ({"edges": [0, True, 20]}, "each edge must be a finite number"),
        ({"edges": [0, 10, 10**400]}, "each edge must be a finite number"),
        ({"edges": [0, 20, 10]}, "strictly increasing"),
        ({"edges": [0, 10, 10, 20]}, "strictly increasing"),
        ({"edges": [10, 0, -10]}, "strictly increasing"),
        ({"edges": [0, 10]}, "at least 3 edges"),
        ({"edges": [0]}, "at least 3 edges"),
        ({"edges": []}, "at least 3 edges"),
        ({"edges": "0,10,20"}, "edges must be a list"),
        ({"edges": None}, "edges must be a list"),
        ({"edges": list(range(10_002))}, "at most 10,000 buckets"),
        ({"lower": 0}, "edges only, no categories"),
        ({"mechanism": "pm"}, "pm is a mechanism for numeric metrics"),
        ({"mechanism": "duchi"}, "duchi is a mechanism for numeric metrics"),
        ({"mechanism": "hybrid"}, "hybrid is a mechanism for numeric metrics"),
        ({"mechanism": "brr"}, "brr is for boolean metrics only"),
        ({"mechanism": "laplace"}, "unknown mechanism"),
    ],
)
def test_bad_histogram_specs_are_refused_saying_why(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        MetricSpec.from_dict({**HISTOGRAM, **changes})


def test_categories_given_to_number_types_in_code_are_refused() -> None:
    with pytest.raises(TypeError, match="categories"):
        NumericSpec("m", 1.0, "auto", categories=("a", "b"), lower=0, upper=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="categories"):
        HistogramSpec("h", 1.0, "auto", categories=("a", "b"), edges=(0, 1, 2))  # type: ignore[call-arg]


def test_bounds_and_edges_given_to_category_types_are_refused() -> None:
    with pytest.raises(SpecError, match="for numbers only"):
        MetricSpec.from_dict({"name": "b", "type": "boolean", "epsilon": 1.0, "lower": 0})
    with pytest.raises(SpecError, match="for numbers only"):
        MetricSpec.from_dict(
            {"name": "c", "type": "categorical", "categories": ["x", "y"], "epsilon": 1.0}
            | {"edges": [0, 1, 2]}
        )
    with pytest.raises(SpecError, match="pm is a mechanism for numeric metrics"):
        MetricSpec.categorical("c", ["x", "y", "z"], epsilon=1.0, mechanism="pm")


def test_domain_names_what_each_type_records() -> None:
    numeric = MetricSpec.numeric("load_ms", lower=0, upper=2500.5, epsilon=1.0)
    histogram = MetricSpec.histogram("load_hist", [0, 10, 100, 1000], epsilon=1.0)
    categorical = MetricSpec.categorical("browser", ["a", "b", "c", "d"], epsilon=1.0)
    assert numeric.domain == "values in [0, 2500.5]"
    assert histogram.domain == f"{len(histogram.edges) - 1} buckets"
    assert categorical.domain == "4 categories"
    assert MetricSpec.boolean("dark_mode", epsilon=1.0).domain == "2 categories"
