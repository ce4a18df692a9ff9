"""``python -m tests.recorded.record``: build the scenario and write every answer to
``answers.json`` (run before a refactor; the replay test then holds the code to it)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .answers import ANSWERS, answers, dump
from .scenario import running


def main() -> None:
    """Record the answers of a freshly built scenario."""
    with tempfile.TemporaryDirectory() as directory, running(Path(directory)) as server:
        recorded = answers(server)
    ANSWERS.write_text(dump(recorded), encoding="utf-8")
    print(f"recorded {len(recorded)} answers in {ANSWERS}")


if __name__ == "__main__":
    main()
