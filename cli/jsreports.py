"""Reports drawn through the JavaScript SDK's own record() path, for ``deniable audit --sdk js``.

Each draw runs ``node sdk/js/scripts/sample.mjs`` (the JS twin of
:func:`deniable.client.sampling.randomized_reports`) in the repository's built SDK and returns
the upload body it prints. The JS SDK draws only from ``crypto.getRandomValues``, so these
draws cannot be seeded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from deniable.client import InvalidInput, MetricSpec, Randomness

SDK_DIRECTORY = Path(__file__).resolve().parents[1] / "sdk" / "js"
"""The JavaScript SDK beside this checkout (``sdk/js``)."""

SAMPLER = SDK_DIRECTORY / "scripts" / "sample.mjs"
BUILT = SDK_DIRECTORY / "dist" / "index.js"


def js_problem() -> str | None:
    """Why the JS SDK cannot be driven from here (one line), or None."""
    if shutil.which("node") is None:
        return "node is not installed (Node.js 20 or later drives the JavaScript SDK)"
    if not SAMPLER.is_file():
        return f"the JavaScript SDK is not beside this install ({SDK_DIRECTORY}): use a checkout"
    if not BUILT.is_file():
        return (
            f"the JavaScript SDK is not built: run (cd {SDK_DIRECTORY} && npm ci && npm run build)"
        )
    return None


def js_reports(
    spec: MetricSpec, value: Any, count: int, *, randomness: Randomness | None = None
) -> bytes:
    """The body the JS SDK uploads after ``count`` records of ``value`` on ``spec``."""
    if randomness is not None:
        raise InvalidInput("the JavaScript SDK draws only from the CSPRNG: --seed does not apply")
    answer = subprocess.run(
        ["node", str(SAMPLER), json.dumps(spec.to_dict()), json.dumps(value), str(count)],
        capture_output=True,
        check=False,
    )
    if answer.returncode != 0:
        reason = answer.stderr.decode(errors="replace").strip().splitlines()
        raise InvalidInput(f"the JavaScript SDK refused: {reason[-1] if reason else 'no reason'}")
    return answer.stdout
