"""The shared wire vectors (tests/vectors/wire.json) are what the Python client computes.

The JavaScript SDK's tests (sdk/js/test/vectors.test.mjs) read the same file, so a change to
the wire format, a fingerprint or a randomizer's algorithm fails here until the vectors are
regenerated (``python -m tests.vectors.generate``), and then fails there until the JS SDK follows.
"""

from __future__ import annotations

import json

from tests.vectors.generate import PATH, build


def test_the_shared_vectors_are_what_the_python_client_computes() -> None:
    stored = json.loads(PATH.read_text(encoding="utf-8"))
    assert stored == json.loads(json.dumps(build()))


def test_the_vectors_cover_every_mechanism_the_collector_accepts() -> None:
    stored = json.loads(PATH.read_text(encoding="utf-8"))
    mechanisms = {entry["resolved"]["mechanism"] for entry in stored["specs"]}
    assert {"brr", "krr", "oue", "olh", "duchi", "pm", "hybrid", "pem"} <= mechanisms
    assert {entry["resolved"]["type"] for entry in stored["specs"]} == {
        "boolean",
        "categorical",
        "numeric",
        "histogram",
        "text",
    }


def test_the_vectors_cover_dimensions_in_fingerprints_and_reports() -> None:
    stored = json.loads(PATH.read_text(encoding="utf-8"))
    with_dimensions = {
        e["resolved"]["type"] for e in stored["specs"] if "dimensions" in e["resolved"]
    }
    assert with_dimensions == {"boolean", "categorical", "numeric", "histogram", "text"}
    assert any('"dims":' in report["text"] for report in stored["reports"])
    assert stored["dimension_values"]
    assert all(entry["text"].startswith(',"dims":{') for entry in stored["dimension_values"])
