"""Reading JSON documents in tests: every number a document holds, so a suppression check
can assert that a suppressed slice shows none."""

from __future__ import annotations

from typing import Any


def numbers_in(value: Any) -> list[float]:
    """Every number anywhere in a JSON value (bools aside)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, dict):
        return [x for v in value.values() for x in numbers_in(v)]
    if isinstance(value, list):
        return [x for v in value for x in numbers_in(v)]
    return []
