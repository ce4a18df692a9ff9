"""The web origins a setting admits for device routes across origins: exact origins only.

Standard library only, so settings load without the server; :mod:`.crossorigin` serves them.
"""

from __future__ import annotations

import json
import re
from typing import Any

ORIGIN = re.compile(r"https?://([a-z0-9.-]+|\[[0-9a-f:.]+\])(:[0-9]{1,5})?")
"""A web origin as a browser sends it: scheme, host, optional port; no path, no wildcard."""


def origins_of(value: Any, setting: str) -> list[str]:
    """The allowed web origins of a setting: a comma-separated string, a JSON list or a list,
    each an exact origin (``https://app.example:8443``); ValueError naming the setting and the
    bad entry."""
    items = value
    if isinstance(value, str):
        try:
            items = json.loads(value) if value.lstrip().startswith("[") else value.split(",")
        except ValueError:
            raise ValueError(f"{setting} must be a comma-separated list of origins") from None
    if not isinstance(items, list | tuple):
        raise ValueError(f"{setting} must be a comma-separated list of origins")
    origins = []
    for item in items:
        text = str(item).strip().rstrip("/")
        if not text:
            continue
        if not ORIGIN.fullmatch(text):
            raise ValueError(
                f"{setting}: {text[:80]!r} is not an origin (scheme://host[:port], lowercase,"
                " no path or wildcard)"
            )
        origins.append(text)
    return origins
