"""Raw reports as a polars DataFrame in the agreed export schema.

Columns: id, metric, fingerprint, period (strings), then the payload: ``payload`` Int64 for
brr/krr, ``payload`` String (base64) for oue, ``a``, ``b``, ``y`` Int64 for olh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

Row = tuple[str, str, Any]
"""One report: (id, period, payload as decoded JSON)."""


def schema(mechanism: str) -> dict[str, Any]:
    """The export schema for a mechanism's reports."""
    base: dict[str, Any] = {
        "id": pl.String,
        "metric": pl.String,
        "fingerprint": pl.String,
        "period": pl.String,
    }
    if mechanism == "olh":
        return {**base, "a": pl.Int64, "b": pl.Int64, "y": pl.Int64}
    return {**base, "payload": pl.String if mechanism == "oue" else pl.Int64}


def empty_frame(spec: Any) -> pl.DataFrame:
    """A frame with no reports but the right columns."""
    return pl.DataFrame(schema=schema(spec.mechanism))


def frame_of(spec: Any, rows: Sequence[Row]) -> pl.DataFrame:
    """The reports ``rows`` of metric ``spec`` as a frame; payloads are checked by the mechanism."""
    parse = spec.randomizer.parse_payload
    ids = [r[0] for r in rows]
    periods = [r[1] for r in rows]
    payloads = [parse(r[2]) for r in rows]
    columns: dict[str, Any] = {
        "id": ids,
        "metric": [spec.name] * len(rows),
        "fingerprint": [spec.fingerprint] * len(rows),
        "period": periods,
    }
    if spec.mechanism == "olh":
        columns.update({key: [p[key] for p in payloads] for key in ("a", "b", "y")})
    else:
        columns["payload"] = payloads
    return pl.DataFrame(columns, schema=schema(spec.mechanism))
