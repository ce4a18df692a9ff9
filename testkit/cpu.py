"""CPU time of processes, read from Linux's /proc, for benches that say where time goes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
"""Clock ticks per second, the unit of /proc's CPU times."""


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def total_cpu(pids: Sequence[int]) -> dict[int, float]:
    """CPU seconds of each process in ``pids``."""
    return {pid: cpu_seconds(pid) for pid in pids}


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (none if it is gone)."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError):
        return found
    return found


def process_tree_cpu(pid: int) -> float:
    """CPU seconds used so far by process ``pid`` and all its descendants."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        total += cpu_seconds(current)
        pending += children(current)
    return total
