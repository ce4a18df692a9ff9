"""Reports drawn through the JavaScript SDK's own record() path, for ``deniable audit --sdk js``.

Each draw runs ``node scripts/sample.mjs`` of a built JavaScript SDK (the JS twin of
:func:`deniable.client.sampling.randomized_reports`; by default the checkout's ``sdk/js``) and
returns the upload body it prints. The JS SDK draws only from ``crypto.getRandomValues``, so
these draws cannot be seeded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from deniable.client import InvalidInput, MetricSpec, Randomness

SDK_DIRECTORY = Path(__file__).resolve().parents[3] / "sdk" / "js"
"""The JavaScript SDK beside this checkout (``sdk/js``), audited unless another is named."""

SAMPLER = Path("scripts") / "sample.mjs"
BUILT = Path("dist") / "index.js"


def js_problem(directory: Path = SDK_DIRECTORY) -> str | None:
    """Why the JS SDK in ``directory`` cannot be driven from here (one line), or None."""
    if shutil.which("node") is None:
        return "node is not installed (Node.js 20 or later drives the JavaScript SDK)"
    if not (directory / SAMPLER).is_file():
        return f"no JavaScript SDK at {directory} (no {SAMPLER}): use a checkout or --sdk-dir"
    if not (directory / BUILT).is_file():
        return f"the JavaScript SDK is not built: run (cd {directory} && npm ci && npm run build)"
    return None


def js_reports(
    spec: MetricSpec,
    value: Any,
    count: int,
    *,
    randomness: Randomness | None = None,
    directory: Path = SDK_DIRECTORY,
) -> bytes:
    """The body the JS SDK in ``directory`` uploads after ``count`` records of ``value``; an
    event metric is refused (its sampler draws through record(), not the window path)."""
    if spec.events is not None:
        raise InvalidInput(
            f"metric {spec.name} aggregates events: the JavaScript SDK's window path has no"
            " sampler yet; audit it with --sdk python"
        )
    if randomness is not None:
        raise InvalidInput("the JavaScript SDK draws only from the CSPRNG: --seed does not apply")
    answer = subprocess.run(
        [
            "node",
            str(directory / SAMPLER),
            json.dumps(spec.to_dict()),
            json.dumps(value),
            str(count),
        ],
        capture_output=True,
        check=False,
    )
    if answer.returncode != 0:
        reason = answer.stderr.decode(errors="replace").strip().splitlines()
        raise InvalidInput(f"the JavaScript SDK refused: {reason[-1] if reason else 'no reason'}")
    return answer.stdout
