"""The JavaScript SDK's browser bundles for tests that load them in a page: built on demand.

The README's test command runs pytest before the SDK's own ``npm ci && npm test``, so on a
clean checkout ``sdk/js/dist`` does not exist yet; a test that needs a bundle builds it here
(``npm ci`` when ``node_modules`` is missing, then ``npm run build``) instead of failing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SDK = Path(__file__).resolve().parents[1] / "sdk" / "js"
DIST = SDK / "dist"
BUILD_SECONDS = 600
"""The most an install and a build may take on a loaded machine."""


def built_bundles(*names: str) -> Path:
    """The folder holding the bundles ``names``, built first if any is missing; raises
    RuntimeError naming what failed (npm missing, or the install or build's last output)."""
    if all((DIST / name).exists() for name in names):
        return DIST
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: the JavaScript SDK's bundles cannot be built")
    steps = ([npm, "ci", "--no-audit", "--no-fund"],) if not (SDK / "node_modules").exists() else ()
    for step in (*steps, [npm, "run", "build"]):
        done = subprocess.run(
            step, cwd=SDK, capture_output=True, text=True, timeout=BUILD_SECONDS, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(step[1:])} failed: {done.stderr[-2000:]}")
    missing = [name for name in names if not (DIST / name).exists()]
    if missing:
        raise RuntimeError(f"the build made no {', '.join(missing)}")
    return DIST
