"""The shared set vectors (tests/vectors/set.json) are what the Python client computes.

The JavaScript SDK's tests (sdk/js/test/sets.test.mjs) replay the same draws, so a change to
the set randomizer fails here until the file is regenerated
(``python -m tests.vectors.set_generate``), and then there until the JS SDK follows.
"""

from __future__ import annotations

import json

import pytest

from deniable.client.errors import SpecError
from deniable.client.mechanisms import PaddingSampling
from tests.vectors.set_generate import PATH, build


def test_the_set_vectors_are_what_the_python_client_computes() -> None:
    stored = json.loads(PATH.read_text(encoding="utf-8"))
    assert stored == json.loads(json.dumps(build()))


def test_the_set_vectors_cover_every_oracle_and_sets_above_l() -> None:
    stored = json.loads(PATH.read_text(encoding="utf-8"))
    assert {case["resolved"] for case in stored["cases"]} == {"krr", "oue", "olh"}
    assert any(len(d["prepared"]) > d["max_items"] for d in stored["draws"])
    assert any(d["sampled"] >= d["k"] for d in stored["draws"])


def test_the_invalid_cases_and_values_are_refused() -> None:
    stored = json.loads(PATH.read_text(encoding="utf-8"))
    for case in stored["invalid_cases"]:
        with pytest.raises(SpecError):
            PaddingSampling(case["k"], case["max_items"], case["epsilon"], case["oracle"])
    ps = PaddingSampling(4, 2, 1.0, "krr")
    for value in stored["invalid_values"]:
        with pytest.raises(ValueError):
            ps.check_value(value)
