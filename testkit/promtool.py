"""Prometheus's ``promtool``, for the tests of the alerting rules in deploy/.

It is Debian's ``prometheus`` package (``/usr/bin/promtool``). Tests that need it are skipped
with the reason when it is missing, unless ``DENIABLE_REQUIRE_PROMTOOL`` is set (CI sets it):
then they fail instead, as the browser tests do with ``DENIABLE_REQUIRE_BROWSER``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PROMTOOL = os.environ.get("DENIABLE_PROMTOOL", "promtool")
"""promtool's path or name on PATH (Debian's package ``prometheus`` installs it)."""

REQUIRE_VARIABLE = "DENIABLE_REQUIRE_PROMTOOL"
"""When set, a missing promtool fails the tests that need it instead of skipping them (CI)."""

TIMEOUT = 120.0
"""Seconds one promtool run gets."""


def promtool_problem() -> str | None:
    """None if promtool can be run here, else why not (one line)."""
    if shutil.which(PROMTOOL) is None:
        return f"{PROMTOOL} missing (apt-get install prometheus)"
    return None


def require_promtool() -> None:
    """Skip (or, when ``DENIABLE_REQUIRE_PROMTOOL`` is set, fail) without promtool."""
    problem = promtool_problem()
    if problem is None:
        return
    message = f"promtool unavailable: {problem}"
    if os.environ.get(REQUIRE_VARIABLE):
        pytest.fail(message + f" and {REQUIRE_VARIABLE} is set")
    pytest.skip(message, allow_module_level=True)


def promtool(*arguments: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``promtool`` with ``arguments``; its exit status, stdout and stderr (never raises on
    a non-zero status: the caller asserts on it)."""
    return subprocess.run(
        [PROMTOOL, *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=cwd,
        check=False,
    )
