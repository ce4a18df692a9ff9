"""The shared event vectors (tests/vectors/events.json) are what the Python client computes.

The JavaScript SDK's tests (sdk/js/test/events.test.mjs) replay the same specs and sequences,
so a change to event rules, fingerprints, day aggregates or windows fails here until the file is
regenerated (``python -m tests.vectors.events_generate``), and then there until the JS SDK follows.
"""

from __future__ import annotations

import itertools
import json

import pytest

from deniable.client.errors import SpecError
from deniable.client.events import AGGREGATES
from deniable.client.spec import MetricSpec
from tests.vectors.events_generate import PATH, build


def _stored() -> dict:
    """The file as stored."""
    return json.loads(PATH.read_text(encoding="utf-8"))


def test_the_event_vectors_are_what_the_python_client_computes() -> None:
    assert _stored() == json.loads(json.dumps(build()))


def test_the_sequences_cover_every_aggregate_and_window() -> None:
    stored = _stored()
    specs = {s["input"]["name"]: MetricSpec.from_dict(s["input"]) for s in stored["specs"]}
    rules = [specs[s["spec"]] for s in stored["sequences"] if s["windows"]]
    assert {s.events.aggregate for s in rules if s.events} == set(AGGREGATES)
    windows = {
        (s.events.window, "rolling") if s.events.rolling else (s.period, "period")
        for s in rules
        if s.events
    }
    assert windows == {
        (1, "rolling"),
        (7, "rolling"),
        (28, "rolling"),
        ("day", "period"),
        ("week", "period"),
        ("month", "period"),
    }
    kinds = {
        (specs[s["spec"]].type, specs[s["spec"]].events.aggregate) for s in stored["sequences"]
    }
    assert {("numeric", "median"), ("histogram", "median")} <= kinds


def test_the_sequences_exercise_inactive_days_the_backfill_limit_and_a_clock_set_back() -> None:
    for sequence in _stored()["sequences"]:
        days = [step["day"] for step in sequence["steps"]]
        assert any(b < a for a, b in itertools.pairwise(days))
        assert any(not step["open"] and step["calls"] for step in sequence["steps"])
        labels = [label for label, _ in sequence["windows"]]
        assert len(labels) == len(set(labels)), "one report per window"
    # Back on 2026-03-17 after 45 days off: a 28-day window that closed more than 31 days
    # before (by 2026-02-13) is dropped, one that closed on 2026-02-14 is still reported.
    rolling = next(s for s in _stored()["sequences"] if s["spec"] == "taps.r28")
    labels = {label for label, _ in rolling["windows"]}
    assert not any("2026-01-31" <= label <= "2026-02-13" for label in labels)
    assert "2026-02-14" in labels


def test_the_invalid_event_specs_are_refused_with_their_message() -> None:
    for case in _stored()["invalid_specs"]:
        with pytest.raises(SpecError) as raised:
            MetricSpec.from_dict(case["input"])
        assert str(raised.value) == case["error"]


def test_a_spec_without_events_keeps_its_fingerprint_fields() -> None:
    plain = next(s for s in _stored()["specs"] if s["input"]["name"] == "plain")
    assert "events" not in plain["resolved"]
    with_events = [s["resolved"] for s in _stored()["specs"] if "events" in s["input"]]
    assert all(set(r["events"]) == {"aggregate", "window", "report_empty"} for r in with_events)
