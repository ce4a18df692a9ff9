"""Every registered metric kind keeps the contract of a kind (one conformance test over
:data:`deniable.client.kinds.KINDS`): it is read from JSON through the registry, prepares its
values, says its count width, accepts the payloads its own recording path sends and refuses a
malformed one, round-trips through its JSON form, and keeps its fingerprint.

Adding a kind means adding it to the registry and an example here: the first test fails until
both are in step, so no kind escapes the others."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deniable.client.errors import SpecError
from deniable.client.kinds import KINDS, OracleSpec, SetSpec
from deniable.client.randomness import SeededRandomness
from deniable.client.sampling import randomized_reports
from deniable.client.spec import METRIC_TYPES, MetricSpec
from deniable.client.wire import payload_text

EXAMPLES: dict[str, tuple[dict[str, Any], list[Any], str]] = {
    "boolean": (
        {"name": "dark_mode", "type": "boolean", "epsilon": 1.0},
        [False, True],
        "f8c35d3c143244ed",
    ),
    "categorical": (
        {
            "name": "browser",
            "type": "categorical",
            "categories": ["chrome", "firefox", "safari"],
            "epsilon": 1.0,
            "mechanism": "oue",
            "dimensions": {"platform": ["ios", "web"]},
        },
        ["chrome", "safari"],
        "6576c30552781394",
    ),
    "histogram": (
        {
            "name": "load_hist",
            "type": "histogram",
            "edges": [0, 100, 250, 1000],
            "epsilon": 2.0,
            "period": "week",
        },
        [-5, 150.5, 1000, 10**6],
        "ebcfe7f235cbc2e1",
    ),
    "numeric": (
        {
            "name": "load_ms",
            "type": "numeric",
            "lower": 0,
            "upper": 5000,
            "epsilon": 1.0,
            "mechanism": "pm",
        },
        [0, 2500.5, 9999],
        "23b8025be76cd296",
    ),
    "text": (
        {"name": "search", "type": "text", "max_length": 8, "epsilon": 4.0, "period": "month"},
        ["cats", "a longer string than eight bytes"],
        "adc9271fc8f9255c",
    ),
    "set": (
        {
            "name": "features",
            "type": "set",
            "categories": ["search", "share", "export", "print", "sync"],
            "max_items": 3,
            "epsilon": 1.0,
        },
        [[], ["sync", "search"], {"print", "share", "export", "search"}],
        "a92f073272e2d9ef",
    ),
}
"""For each kind: a spec's JSON form, values a device may record, and its fingerprint as
the Python SDK has always computed it (the vectors pin the same for the JS SDK)."""

MALFORMED = ["not", "a", "payload"]
"""A payload no randomizer sends: a JSON list."""


def example(type_name: str) -> MetricSpec:
    """The example spec of ``type_name``, read from its JSON form."""
    return MetricSpec.from_dict(EXAMPLES[type_name][0])


def test_every_registered_kind_has_an_example_and_every_type_a_kind() -> None:
    assert set(KINDS) == set(EXAMPLES) == set(METRIC_TYPES)
    for type_name, kind in KINDS.items():
        assert kind.type == type_name and issubclass(kind, MetricSpec)


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_the_registry_reads_the_type_string_into_its_kind(type_name: str) -> None:
    spec = example(type_name)
    assert type(spec) is KINDS[type_name]
    assert isinstance(spec, MetricSpec) and spec.type == type_name


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_a_kind_prepares_its_values_for_its_randomizer(type_name: str) -> None:
    spec = example(type_name)
    for value in EXAMPLES[type_name][1]:
        prepared = spec.prepare(value)
        if isinstance(spec, OracleSpec):
            assert prepared == spec.index_of(value) and 0 <= prepared < spec.k
        elif isinstance(spec, SetSpec):
            assert prepared == tuple(sorted({spec.categories.index(v) for v in value}))
        elif type_name == "numeric":
            assert isinstance(prepared, float) and -1.0 <= prepared <= 1.0
        else:
            assert isinstance(prepared, bytes) and len(prepared) == spec.max_length


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_a_kind_says_how_many_counts_a_report_adds(type_name: str) -> None:
    spec = example(type_name)
    width = spec.count_width
    assert isinstance(width, int) and width >= 0
    if isinstance(spec, OracleSpec):
        assert width == spec.k == len(spec.categories) and spec.value_count == spec.k
    elif isinstance(spec, SetSpec):
        assert width == spec.k + spec.max_items and spec.value_count is None
        assert not spec.memoizable
    else:
        assert spec.k == 0 and spec.value_count is None


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_a_kind_accepts_what_its_recording_path_sends_and_refuses_a_malformed_payload(
    type_name: str,
) -> None:
    spec = example(type_name)
    for value in EXAMPLES[type_name][1]:
        body = randomized_reports(spec, value, 20, randomness=SeededRandomness(7))
        reports = json.loads(body)["reports"]
        assert len(reports) == 20
        for report in reports:
            payload = report["payload"]
            assert spec.check_payload(payload) == payload
            assert len(payload_text(payload)) <= spec.payload_chars
    with pytest.raises(ValueError):
        spec.check_payload(MALFORMED)


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_a_kind_round_trips_through_its_json_form_and_keeps_its_fingerprint(
    type_name: str,
) -> None:
    spec = example(type_name)
    again = MetricSpec.from_dict(spec.to_dict())
    assert again == spec and type(again) is type(spec)
    assert again.fingerprint == spec.fingerprint == EXAMPLES[type_name][2]
    assert json.loads(json.dumps(spec.to_dict())) == spec.to_dict()


def test_an_unknown_type_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SpecError, match="type must be one of boolean, categorical"):
        MetricSpec.from_dict({"name": "m", "type": "gauge", "epsilon": 1.0})


def test_the_factories_return_the_kinds() -> None:
    made = [
        MetricSpec.boolean("b", epsilon=1.0),
        MetricSpec.categorical("c", ["x", "y"], epsilon=1.0),
        MetricSpec.histogram("h", [0, 1, 2], epsilon=1.0),
        MetricSpec.numeric("n", lower=0, upper=1, epsilon=1.0),
        MetricSpec.text("t", max_length=8, epsilon=4.0),
        MetricSpec.set_of("s", ["x", "y"], max_items=1, epsilon=1.0),
    ]
    assert [type(spec) for spec in made] == [KINDS[spec.type] for spec in made]
    assert [spec.type for spec in made] == [
        "boolean",
        "categorical",
        "histogram",
        "numeric",
        "text",
        "set",
    ]
    assert all(isinstance(spec.domain, str) and spec.domain for spec in made)
