"""The value types of deniable's estimators: per-period sufficient statistics and estimates.

They are plain frozen dataclasses so that the collector, the CLI and the tests share one shape
(pydantic reads them as they are, so they also describe the HTTP API's answers); the documents
the API and ``deniable estimate`` print wrap an :class:`Estimate` (:mod:`.documents`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class PeriodCounts:
    """The sufficient statistics of one period: n reports and the support count C_v per category."""

    period: str
    n: int
    counts: Sequence[int]


@dataclass(frozen=True)
class CategoryEstimate:
    """One category's estimated share with its confidence interval (and count = n * share)."""

    category: str
    frequency: float | None
    std_error: float | None
    ci_low: float
    ci_high: float
    count: float | None


@dataclass(frozen=True)
class Estimate:
    """A population estimate over one or more periods, with how it was made."""

    mechanism: str
    epsilon: float
    n: int
    periods: int
    confidence: float
    method: str
    pooling: str
    simultaneous: bool
    estimates: list[CategoryEstimate]

    def to_dict(self) -> dict[str, Any]:
        """The estimate as a JSON-ready dict (``estimates`` as a list of dicts)."""
        return asdict(self)
