"""Metric specs: RFC 8785 canonical JSON, fingerprints, validation, and period labels."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random

import pytest

from deniable.client import MetricSpec
from deniable.client.kinds import CategoricalSpec
from deniable.client.spec import (
    canonical_json,
    next_period,
    period_label,
    period_range,
    period_start,
)

# ECMAScript Number-to-string results for IEEE doubles (the RFC 8785 appendix and ES spec cases).
ES_NUMBERS = [
    (0.0, "0"),
    (-0.0, "0"),
    (1.0, "1"),
    (100.0, "100"),
    (4.5, "4.5"),
    (0.002, "0.002"),
    (0.000001, "0.000001"),
    (1e-7, "1e-7"),
    (333333333.3333333, "333333333.3333333"),
    (295147905179352830000.0, "295147905179352830000"),
    (1e21, "1e+21"),
    (1e23, "1e+23"),
    (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (9007199254740992.0, "9007199254740992"),
    (-1.5e-9, "-1.5e-9"),
    (0.1 + 0.2, "0.30000000000000004"),
]


@pytest.mark.parametrize(("number", "text"), ES_NUMBERS)
def test_canonical_numbers_follow_ecmascript(number: float, text: str) -> None:
    assert canonical_json(number) == text


def test_canonical_objects_sort_keys_by_utf16_and_drop_whitespace() -> None:
    value = {"b": [1.0, "x"], "a": {"\uff61": 1, "\U0001f600": 2, "z": True}}
    # U+1F600 is the surrogate pair D83D DE00, so it sorts before U+FF61 in UTF-16 order
    # (though after it by code point).
    assert canonical_json(value) == '{"a":{"z":true,"\U0001f600":2,"\uff61":1},"b":[1,"x"]}'


def test_fingerprint_is_sha256_of_the_canonical_resolved_spec() -> None:
    spec = MetricSpec.categorical(
        "browser", ["chrome", "firefox", "safari", "other"], epsilon=0.5, mechanism="krr"
    )
    # For these values Python's compact sorted JSON coincides with RFC 8785: an independent check.
    expected_doc = {
        "categories": ["chrome", "firefox", "safari", "other"],
        "epsilon": 0.5,
        "mechanism": "krr",
        "name": "browser",
        "period": "day",
        "type": "categorical",
    }
    text = json.dumps(expected_doc, sort_keys=True, separators=(",", ":"))
    assert spec.fingerprint == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert spec.to_dict()["fingerprint"] == spec.fingerprint


def test_integral_epsilon_is_written_without_a_fraction() -> None:
    spec = MetricSpec.boolean("dark_mode", epsilon=1.0)
    assert '"epsilon":1,' in canonical_json(spec.fingerprint_fields())
    assert MetricSpec.boolean("dark_mode", epsilon=1).fingerprint == spec.fingerprint


def test_fingerprint_changes_with_every_field() -> None:
    base = MetricSpec.categorical("m", ["a", "b", "c"], epsilon=1.0, mechanism="krr")
    variants = [
        MetricSpec.categorical("n", ["a", "b", "c"], epsilon=1.0, mechanism="krr"),
        MetricSpec.categorical("m", ["a", "c", "b"], epsilon=1.0, mechanism="krr"),
        MetricSpec.categorical("m", ["a", "b", "c"], epsilon=1.1, mechanism="krr"),
        MetricSpec.categorical("m", ["a", "b", "c"], epsilon=1.0, mechanism="oue"),
        MetricSpec.categorical("m", ["a", "b", "c"], epsilon=1.0, mechanism="krr", period="week"),
    ]
    assert len({base.fingerprint, *(v.fingerprint for v in variants)}) == len(variants) + 1


def test_from_dict_round_trips() -> None:
    spec = MetricSpec.categorical("os", ["linux", "mac", "windows"], epsilon=2.0, period="month")
    assert MetricSpec.from_dict(spec.to_dict()) == spec
    boolean = MetricSpec.boolean("flag", epsilon=0.25)
    assert MetricSpec.from_dict(boolean.to_dict()) == boolean
    assert MetricSpec.from_dict({**boolean.to_dict(), "categories": None}) == boolean
    with pytest.raises(ValueError, match="categories must be a list"):
        MetricSpec.from_dict({**spec.to_dict(), "categories": "linux,mac"})


def test_auto_resolves_to_a_concrete_mechanism_allowed_for_the_type() -> None:
    assert MetricSpec.categorical("ab", ["a", "b"], epsilon=1.0).mechanism == "krr"
    assert MetricSpec.boolean("flag", epsilon=1.0, mechanism="auto").mechanism == "brr"
    assert MetricSpec.categorical("small", list("abcd"), epsilon=2.0).mechanism == "krr"
    assert MetricSpec.categorical("big", [str(i) for i in range(64)], epsilon=0.5).mechanism in {
        "oue",
        "olh",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Bad Name"}, "metric name"),
        ({"name": "trailing\n"}, "metric name"),
        ({"categories": ["a", "a"]}, "distinct"),
        ({"categories": ["a"]}, "at least 2"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": 37.0}, "epsilon must be at most 20"),
        ({"epsilon": 1e-320}, "epsilon must be at least 0.001"),
        ({"mechanism": "laplace"}, "unknown mechanism"),
        ({"mechanism": "brr"}, "boolean metrics only"),
        ({"period": "hour"}, "period"),
    ],
)
def test_invalid_specs_name_the_problem(kwargs: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "name": "m",
        "categories": ["a", "b", "c"],
        "epsilon": 1.0,
        "mechanism": "krr",
        "period": "day",
    }
    fields.update(kwargs)
    with pytest.raises(ValueError, match=message):
        CategoricalSpec(**fields)  # type: ignore[arg-type]


def test_index_of_names_the_metric_but_never_the_value() -> None:
    spec = MetricSpec.categorical("os", ["linux", "mac"], epsilon=1.0)
    with pytest.raises(ValueError) as caught:
        spec.index_of("secret-os-name")
    assert "os" in str(caught.value) and "secret-os-name" not in str(caught.value)
    with pytest.raises(ValueError, match="expects a bool"):
        MetricSpec.boolean("flag", epsilon=1.0).index_of(1)


def test_period_labels_use_utc_iso_weeks_and_months() -> None:
    late_evening_in_new_york = dt.datetime(
        2026, 12, 31, 20, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5))
    )
    assert period_label("day", late_evening_in_new_york) == "2027-01-01"
    assert period_label("week", dt.date(2027, 1, 1)) == "2026-W53"
    assert period_label("week", dt.date(2027, 1, 4)) == "2027-W01"
    assert period_label("month", dt.date(2026, 11, 30)) == "2026-11"


def test_period_ranges_cross_year_and_month_ends() -> None:
    assert period_range("day", "2026-02-27", "2026-03-01") == [
        "2026-02-27",
        "2026-02-28",
        "2026-03-01",
    ]
    assert period_range("week", "2026-W52", "2027-W01") == ["2026-W52", "2026-W53", "2027-W01"]
    assert period_range("month", "2026-11", "2027-01") == ["2026-11", "2026-12", "2027-01"]
    assert next_period("month", "2026-01") == "2026-02"
    with pytest.raises(ValueError, match="after"):
        period_range("day", "2026-11-02", "2026-11-01")


@pytest.mark.parametrize("kind", ["day", "week", "month"])
def test_a_period_range_is_its_first_label_stepped_to_its_last(kind: str) -> None:
    """The labels counted from the first day are the ones ``next_period`` steps through,
    for ranges of 1 to 400 periods from every start in two years (leap days, week 53)."""
    rng = random.Random(5)
    first = dt.date(2023, 12, 1)
    for _ in range(300):
        start = period_label(kind, first + dt.timedelta(days=rng.randrange(800)))
        stepped = [start]
        for _ in range(rng.randrange(400)):
            stepped.append(next_period(kind, stepped[-1]))
        assert period_range(kind, start, stepped[-1]) == stepped


@pytest.mark.parametrize(
    ("kind", "label"),
    [
        ("day", "2026-02-30"),
        ("day", "2026-11"),
        ("week", "2026-W54"),
        ("month", "2026-13"),
        ("week", 7),
    ],
)
def test_malformed_period_labels_are_refused(kind: str, label: object) -> None:
    with pytest.raises(ValueError):
        period_start(kind, label)  # type: ignore[arg-type]


@pytest.mark.parametrize("epsilon", [20.000001, 64.0, 9e-4, 1e-320])
@pytest.mark.parametrize("kind", ["boolean", "categorical"])
def test_a_served_spec_outside_the_epsilon_bounds_is_refused(kind: str, epsilon: float) -> None:
    """A collector cannot make clients send barely randomized reports, nor useless ones."""
    served = {"name": "m", "type": kind, "epsilon": epsilon, "fingerprint": "0" * 16}
    if kind == "categorical":
        served["categories"] = ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"metric m: epsilon must be at (most 20|least 0\.001)"):
        MetricSpec.from_dict(served)
