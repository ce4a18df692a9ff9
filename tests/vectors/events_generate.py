"""Write tests/vectors/events.json: event metrics (issue 40) as the Python client computes them.

A file of its own beside wire.json and set.json: both SDKs' tests read it
(tests/client/test_event_vectors.py and sdk/js/test/events.test.mjs). Regenerate with
``python -m tests.vectors.events_generate``. It holds specs with an ``events`` rule and their
fingerprints, specs both SDKs refuse (with the message), and sequences of days a device lived
through (its events or observations, whether it flushed that day) with the value of every window
it reports, in order, as the Python Recorder's WindowBook yields them before randomization.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

from deniable.client.errors import SpecError
from deniable.client.ledger import Ledger
from deniable.client.recorder import Recorder
from deniable.client.spec import MetricSpec
from deniable.client.stats import Counters

PATH = Path(__file__).with_name("events.json")

START = dt.date(2026, 1, 1)
"""The first day of every sequence (a Thursday: the first ISO week is partial)."""

SPECS: list[dict[str, Any]] = [
    {
        "name": "opened",
        "type": "boolean",
        "epsilon": 1.0,
        "events": {"aggregate": "any"},
    },
    {
        "name": "opened.week",
        "type": "boolean",
        "epsilon": 1.0,
        "period": "week",
        "events": {"aggregate": "any", "window": "period"},
    },
    {
        "name": "opened.r7",
        "type": "boolean",
        "epsilon": 0.5,
        "events": {"aggregate": "any", "window": 7},
    },
    {
        "name": "opened.r1",
        "type": "boolean",
        "epsilon": 0.5,
        "mechanism": "brr",
        "events": {"aggregate": "any", "window": 1, "report_empty": True},
    },
    {
        "name": "taps",
        "type": "numeric",
        "lower": 0,
        "upper": 50,
        "epsilon": 1.0,
        "events": {"aggregate": "count"},
    },
    {
        "name": "taps.r28",
        "type": "histogram",
        "edges": [0, 1, 2, 5, 10, 100],
        "epsilon": 2.0,
        "events": {"aggregate": "count", "window": 28},
    },
    {
        "name": "spend",
        "type": "numeric",
        "lower": 0,
        "upper": 100,
        "epsilon": 1.0,
        "period": "month",
        "events": {"aggregate": "sum", "report_empty": False},
    },
    {
        "name": "spend.r7",
        "type": "numeric",
        "lower": 0,
        "upper": 100,
        "epsilon": 1.0,
        "events": {"aggregate": "sum", "window": 7, "report_empty": True},
    },
    {
        "name": "latency.min",
        "type": "numeric",
        "lower": 0,
        "upper": 1000,
        "epsilon": 1.0,
        "events": {"aggregate": "min", "window": 1},
    },
    {
        "name": "latency.max",
        "type": "numeric",
        "lower": 0,
        "upper": 1000,
        "epsilon": 1.0,
        "period": "week",
        "events": {"aggregate": "max"},
    },
    {
        "name": "latency.mean",
        "type": "numeric",
        "lower": -5.5,
        "upper": 1000,
        "epsilon": 1.0,
        "mechanism": "duchi",
        "events": {"aggregate": "mean", "window": 7},
    },
    {
        "name": "latency.median",
        "type": "numeric",
        "lower": 0,
        "upper": 1000,
        "epsilon": 1.0,
        "events": {"aggregate": "median", "window": 28},
    },
    {
        "name": "latency.hmedian",
        "type": "histogram",
        "edges": [0, 10, 50, 100, 500, 1000],
        "epsilon": 1.0,
        "period": "month",
        "events": {"aggregate": "median"},
    },
    {
        "name": "level.last",
        "type": "numeric",
        "lower": 0,
        "upper": 10,
        "epsilon": 1.0,
        "events": {"aggregate": "last", "window": "period"},
        "dimensions": {"platform": ["web", "node"]},
    },
    {
        "name": "screen.mode",
        "type": "categorical",
        "categories": ["home", "search", "settings"],
        "epsilon": 1.0,
        "events": {"aggregate": "mode", "window": 7},
    },
    {
        "name": "screen.mode.week",
        "type": "categorical",
        "categories": ["home", "search", "settings", "help"],
        "epsilon": 1.0,
        "mechanism": "oue",
        "period": "week",
        "delivery": "shuffled",
        "events": {"aggregate": "mode"},
    },
    {
        "name": "plain",
        "type": "categorical",
        "categories": ["a", "b"],
        "epsilon": 1.0,
    },
]
"""Specs as a collector serves them (the last without events: its fingerprint is unchanged);
every sequence below runs on one of the event ones."""


def _invalid(name: str, kind: dict[str, Any], events: Any) -> dict[str, Any]:
    """A spec of ``kind`` (type and its fields) with ``events``."""
    return {"name": name, "epsilon": 1.0, **kind, "events": events}


_NUMERIC = {"type": "numeric", "lower": 0, "upper": 10}
_BOOLEAN = {"type": "boolean"}

INVALID_SPECS: list[dict[str, Any]] = [
    _invalid("e1", _NUMERIC, "count"),
    _invalid("e2", _NUMERIC, ["count"]),
    _invalid("e3", _NUMERIC, {"aggregate": "count", "windows": 7, "extra": 1}),
    _invalid("e4", _NUMERIC, {"aggregate": "total"}),
    _invalid("e5", _NUMERIC, {"window": 7}),
    _invalid("e6", _NUMERIC, {"aggregate": "count", "window": 14}),
    _invalid("e7", _NUMERIC, {"aggregate": "count", "window": "7"}),
    _invalid("e8", _NUMERIC, {"aggregate": "count", "window": True}),
    _invalid("e9", _NUMERIC, {"aggregate": "sum", "report_empty": "yes"}),
    _invalid("e10", _BOOLEAN, {"aggregate": "count"}),
    _invalid("e11", {"type": "categorical", "categories": ["a", "b"]}, {"aggregate": "any"}),
    _invalid("e12", {"type": "histogram", "edges": [0, 1, 2]}, {"aggregate": "mode"}),
    _invalid(
        "e13",
        {"type": "set", "categories": ["a", "b"], "max_items": 1},
        {"aggregate": "count"},
    ),
    _invalid("e14", {**_NUMERIC, "period": "week"}, {"aggregate": "count", "window": 7}),
    _invalid("e15", _NUMERIC, {"aggregate": "count", "report_empty": False}),
    _invalid("e16", _BOOLEAN, {"aggregate": "any", "report_empty": False}),
    _invalid("e17", _NUMERIC, {"aggregate": "mean", "report_empty": True}),
    _invalid("e18", _NUMERIC, {"aggregate": "median", "window": 28, "report_empty": True}),
]
"""Specs both SDKs refuse, each with Python's message."""


def _values(spec: MetricSpec, rng: random.Random) -> list[Any]:
    """A day's calls for ``spec``: a count of events, or observed values (numbers around the
    metric's range, some outside it, or category names)."""
    rule = spec.events
    assert rule is not None
    if rng.random() < 0.3:
        return []
    size = rng.randint(1, 4)
    if rule.counted:
        return [None] * size
    if rule.aggregate == "mode":
        weights = [3, 2] + [1] * (len(spec.categories) - 2)
        return rng.choices(list(spec.categories), weights=weights, k=size)
    low, high = (spec.edges[0], spec.edges[-1]) if spec.edges else (spec.lower, spec.upper)
    assert low is not None and high is not None
    span = high - low
    out: list[Any] = []
    for _ in range(size):
        roll = rng.random()
        if roll < 0.1:
            out.append(round(low - rng.uniform(0, span / 4), 2))
        elif roll < 0.2:
            out.append(round(high + rng.uniform(0, span / 4), 2))
        elif roll < 0.35:
            out.append(rng.randint(int(low), int(high)))
        else:
            out.append(round(rng.uniform(low, high), rng.choice([1, 3, 6])))
    return out


def _steps(spec: MetricSpec, seed: int) -> list[dict[str, Any]]:
    """The days a device lived through: mostly daily with days off, 45 days off (days 30 to
    74: back on day 75, 2026-03-17, so windows that closed before 2026-02-14 are past the
    backfill limit), a clock set back on day 90, and a last start 20 days after to close every
    window."""
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    offsets = [*range(0, 30), *range(75, 120)]
    for offset in offsets:
        if offset not in (0, 75, 90) and rng.random() < 0.25:
            continue
        day = START + dt.timedelta(days=offset)
        steps.append(
            {"day": day.isoformat(), "open": offset in (0, 75) or rng.random() < 0.8, "calls": []}
        )
        steps[-1]["calls"] = _values(spec, rng)
        if offset == 90:
            back = START + dt.timedelta(days=offset - 3)
            steps.append({"day": back.isoformat(), "open": True, "calls": _values(spec, rng)})
    end = START + dt.timedelta(days=offsets[-1] + 20)
    steps.append({"day": end.isoformat(), "open": True, "calls": []})
    return steps


def run(spec: MetricSpec, steps: list[dict[str, Any]]) -> list[list[Any]]:
    """The windows a device reports over ``steps``, as ``[label, value]`` in order: the Python
    Recorder started on the first step's day, its calls made, ``drain()`` (the periodic commit,
    which closes windows) on each open day; each window's value is taken where the WindowBook
    hands it to the randomizer."""
    now = [dt.datetime.fromisoformat(steps[0]["day"]).replace(hour=12, tzinfo=dt.UTC)]
    recorder = Recorder(
        Ledger(bytes(32), max_reports_per_period=1, lifetime_epsilon=None),
        Counters(),
        on_unknown=lambda name: None,
        max_queue=10_000,
        clock=lambda: now[0],
        through_shuffler=True,
    )
    book = recorder._book
    reported: list[list[Any]] = []
    due = book.due

    def recording_due(specs: dict[str, MetricSpec]) -> Any:
        """``book.due``, noting each window's label and value as it passes."""
        for item in due(specs):
            reported.append([item[1].label, item[2]])
            yield item

    book.due = recording_due  # type: ignore[method-assign]
    recorder.install([spec])
    for step in steps:
        now[0] = dt.datetime.fromisoformat(step["day"]).replace(hour=12, tzinfo=dt.UTC)
        for value in step["calls"]:
            assert (
                recorder.event(spec.name) if value is None else recorder.observe(spec.name, value)
            )
        if step["open"]:
            recorder.drain()
    return reported


def build() -> dict[str, Any]:
    """Every event vector, computed by the Python client."""
    invalid = []
    for data in INVALID_SPECS:
        try:
            MetricSpec.from_dict(data)
        except SpecError as exc:
            invalid.append({"input": data, "error": str(exc)})
            continue
        raise AssertionError(f"an invalid event spec was accepted: {data}")
    specs = [MetricSpec.from_dict(data) for data in SPECS]
    sequences = []
    for seed, spec in enumerate(s for s in specs if s.events is not None):
        steps = _steps(spec, seed)
        sequences.append({"spec": spec.name, "steps": steps, "windows": run(spec, steps)})
    return {
        "about": "Event metrics (issue 40) as the Python client computes"
        " them; generated by tests/vectors/events_generate.py. A sequence's step is a day the"
        " device lived: its calls (null: event(), else observe(value)), then if open the periodic"
        " commit that marks the day active and closes windows; windows lists [label, value] of"
        " every report, in order, before randomization.",
        "specs": [{"input": d, "resolved": s.to_dict()} for d, s in zip(SPECS, specs, strict=True)],
        "invalid_specs": invalid,
        "sequences": sequences,
    }


def render() -> str:
    """The vectors file's text."""
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    """Write the file."""
    PATH.write_text(render(), encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
