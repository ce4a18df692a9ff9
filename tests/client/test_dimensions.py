"""Public dimensions: the spec's checks and fingerprint, and the clear values reports carry."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from deniable.client import Client
from deniable.client.errors import SpecError
from deniable.client.spec import (
    MAX_DIMENSION_CELLS,
    MAX_DIMENSION_VALUES,
    MAX_TEXT_CELL_COUNTS,
    MAX_TEXT_CELLS,
    MetricSpec,
)

PLATFORMS = {"platform": ["ios", "android", "web"]}


def test_dimensions_are_in_the_fingerprint_and_json_form() -> None:
    plain = MetricSpec.boolean("dark_mode", epsilon=1.0)
    split = MetricSpec.boolean("dark_mode", epsilon=1.0, dimensions=PLATFORMS)
    assert plain.fingerprint != split.fingerprint
    assert "dimensions" not in plain.to_dict()
    assert split.to_dict()["dimensions"] == PLATFORMS
    assert MetricSpec.from_dict(split.to_dict()) == split


@pytest.mark.parametrize(
    ("dimensions", "problem"),
    [
        ({"platform": ["ios", "other"]}, "may not list 'other'"),
        ({"platform": []}, "non-empty list"),
        ({"Platform": ["ios"]}, "dimension name"),
        ({"platform": ["i,os"]}, "short ASCII"),
        ({"a": [str(i) for i in range(30)], "b": [str(i) for i in range(40)]}, "1,271 cells"),
        ({"user": [f"u{i:04d}" for i in range(999)]}, "user lists 999 values; at most 64"),
        ({"a": [f"v{i}" for i in range(65)]}, "a lists 65 values; at most 64"),
        (
            {"uhi": [f"u{i:02d}" for i in range(31)], "ulo": [f"{i:02d}" for i in range(30)]},
            "make 992 cells .* at most 65 are allowed",
        ),
        ({"a": list("vwxyz"), "b": list("abcdefghij")}, "make 66 cells .* at most 65 are allowed"),
    ],
)
def test_bad_dimensions_are_refused_naming_the_problem(dimensions: dict, problem: str) -> None:
    with pytest.raises(SpecError, match=problem):
        MetricSpec.categorical("tab", ["a", "b"], epsilon=1.0, dimensions=dimensions)


def test_a_dimension_at_the_value_cap_is_taken() -> None:
    spec = MetricSpec.boolean("v", epsilon=1.0, dimensions={"a": [f"v{i}" for i in range(64)]})
    assert len(spec.dimensions[0][1]) == MAX_DIMENSION_VALUES == 64
    two = MetricSpec.boolean(
        "v", epsilon=1.0, dimensions={"a": list("wxyz"), "b": list("abcdefghijkl")}
    )
    assert math.prod(len(values) + 1 for _, values in two.dimensions) == MAX_DIMENSION_CELLS == 65


def test_text_metrics_take_dimensions_within_the_sketch_caps() -> None:
    """A text metric's cells each keep a whole sketch: at most MAX_TEXT_CELLS cells and
    MAX_TEXT_CELL_COUNTS counts (8-byte strings: 15 cells; 64-byte: none), naming both."""
    spec = MetricSpec.text("q", max_length=8, epsilon=4, dimensions=PLATFORMS)
    assert spec.to_dict()["dimensions"] == {k: list(v) for k, v in sorted(PLATFORMS.items())}
    fifteen = {"a": ["x", "y"], "b": ["p", "q", "r", "s"]}
    assert MetricSpec.text("q", max_length=8, epsilon=4, dimensions=fifteen).dimensions
    with pytest.raises(SpecError, match=r"16 cells of 131,200 sketch counts each \(2,099,200\)"):
        MetricSpec.text(
            "q", max_length=8, epsilon=4, dimensions={"a": ["x", "y", "z"], **PLATFORMS}
        )
    with pytest.raises(SpecError, match="at most 50 cells and 2,000,000 counts"):
        MetricSpec.text(
            "q", max_length=1, epsilon=4, dimensions={"a": [f"v{i}" for i in range(50)]}
        )
    with pytest.raises(SpecError, match="2 cells of 1,049,600"):
        MetricSpec.text("q", max_length=64, epsilon=4, dimensions={"a": ["x"]})
    assert MetricSpec.text(
        "q", max_length=1, epsilon=4, dimensions={"a": [f"v{i}" for i in range(49)]}
    ).dimensions
    assert MAX_TEXT_CELLS == 50 and MAX_TEXT_CELL_COUNTS == 2_000_000


def test_reports_carry_the_context_in_the_clear_and_unlisted_values_as_other(tmp_path) -> None:
    bodies: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(202, json={"accepted": len(body["reports"]), "duplicates": 0})

    specs = [
        MetricSpec.boolean("dark_mode", epsilon=1.0, dimensions=PLATFORMS),
        MetricSpec.boolean("plain", epsilon=1.0),
    ]
    with Client(
        "http://collector.invalid",
        state_dir=tmp_path,
        metrics=specs,
        context={"platform": "ios", "country": "fr"},
        max_reports_per_period=5,
        lifetime_epsilon=None,
        transport=httpx.MockTransport(answer),
    ) as client:
        client.record("dark_mode", True)
        client.record("plain", True)
        client.set_context({"platform": "tizen"})
        client.record("dark_mode", False)
        assert client.flush(timeout=10)
    reports = [r for body in bodies for r in body["reports"]]
    dims = [(r["metric"], r.get("dims")) for r in reports]
    assert dims == [
        ("dark_mode", {"platform": "ios"}),
        ("plain", None),
        ("dark_mode", {"platform": "other"}),
    ]
    assert all(r["payload"] in (0, 1) for r in reports)
