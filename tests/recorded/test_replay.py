"""Every recorded API answer (``answers.json``, recorded from the code before issue 39's
refactor) replayed against a freshly built scenario: status, content type and body must be
byte-identical, so no refactor changes what the collector answers.

One change was recorded on purpose since: the two Prometheus scrapes
(``/v1/estimates/metrics``, ``?page=2``) on 2026-12-05, when issue 41 asked for an info series
whose labels do not change every day (the estimate's window moved from its labels to two
timestamp gauges). And on 2026-12-06 the three series by slice (``by``, ``where``) gained the
metric's ``unit``, ``description`` and ``owner`` at their end, as DESIGN.md promises every
series document and as the estimate by slice already carried them: the series route's model
had dropped them on the way out, which it no longer validates against (orjson writes the
document, as for the estimate). Every other answer is as recorded before issue 39."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from .answers import NON_DETERMINISTIC, answers, load
from .reads import READS
from .scenario import running

COMPARED = ("status", "content_type", "body")
"""What must match in each answer."""
DIFF_LINES = 30
"""The most lines of a body diff a failure shows."""
LINE_CHARS = 240
"""The most characters of one diff line a failure shows (a privacy statement is one line)."""


def readable(body: str) -> list[str]:
    """A body's lines for a diff: a JSON body indented (its keys in their order), else as is."""
    try:
        return json.dumps(json.loads(body), indent=1, ensure_ascii=False).splitlines()
    except ValueError:
        return body.splitlines()


def difference(recorded: dict[str, Any], replayed: dict[str, Any]) -> str:
    """What differs between a recorded and a replayed answer, briefly (empty if nothing)."""
    wrong = [field for field in COMPARED if recorded[field] != replayed[field]]
    if not wrong:
        return ""
    lines = [f"{recorded['method']} {recorded['path']} ({recorded['role']}): {', '.join(wrong)}"]
    for field in ("status", "content_type"):
        if field in wrong:
            lines.append(f"  {field}: recorded {recorded[field]!r}, now {replayed[field]!r}")
    if "body" in wrong:
        diff = difflib.unified_diff(
            readable(recorded["body"]),
            readable(replayed["body"]),
            "recorded",
            "now",
            lineterm="",
            n=1,
        )
        lines.extend(line[:LINE_CHARS] for line in list(diff)[:DIFF_LINES])
    return "\n".join(lines)


def test_the_recording_asks_the_listed_reads() -> None:
    """The recorded file holds one answer per listed read, in order (record again after
    changing the list), and nothing is normalized unless listed as non-deterministic."""
    recorded = load()
    assert [(a["method"], a["path"], a["role"]) for a in recorded] == [
        (r.method, r.path, r.role) for r in READS
    ], "the reads changed: run python -m tests.recorded.record on the code before the change"
    assert not NON_DETERMINISTIC


def test_every_recorded_answer_is_byte_identical(tmp_path: Path) -> None:
    """Replay every recorded read against a fresh scenario; the first differing one is shown
    with a short diff, and how many differ in all."""
    recorded = load()
    with running(tmp_path) as server:
        replayed = answers(server)
    differences = [
        found
        for found in (difference(a, b) for a, b in zip(recorded, replayed, strict=True))
        if found
    ]
    assert not differences, (
        f"{len(differences)} of {len(recorded)} recorded answers changed; the first:\n"
        + differences[0]
    )
