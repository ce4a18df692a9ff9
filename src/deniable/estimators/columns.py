"""The payload columns of a frame of raw reports, per mechanism: what the estimators read from
raw reports and what an export file (:mod:`deniable.sources.reportfile`) holds. Standard
library only, so that the CLI names them without loading numpy or polars."""

from __future__ import annotations

OLH_COLUMNS = ("a", "b", "y")
"""The payload columns of an olh report: the hash's two coefficients and the reported value."""

TEXT_COLUMNS = ("b", "l", "r")
"""The payload columns of a pem (text) report: its base64 bits, its prefix level, its row."""


def payload_columns(mechanism: str) -> tuple[str, ...]:
    """The columns that hold a ``mechanism`` report's payload."""
    if mechanism == "pem":
        return TEXT_COLUMNS
    return OLH_COLUMNS if mechanism == "olh" else ("payload",)
