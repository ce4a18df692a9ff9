"""The value types of deniable's estimators: per-period sufficient statistics and estimates.

They are plain frozen dataclasses so that the collector, the CLI and the tests share one shape
(pydantic reads them as they are, so they also describe the HTTP API's answers); the documents
the API and ``deniable estimate`` print wrap an :class:`Estimate` (:mod:`.documents`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PeriodCounts:
    """The sufficient statistics of one period: n reports and the support count C_v per category."""

    period: str
    n: int
    counts: Sequence[int]


@dataclass(frozen=True)
class PeriodSums:
    """The sufficient statistics of one period of a numeric metric: n reports, the sum of their
    payloads y and the sum of y^2 (on the mechanism's [-1, 1] axis, DESIGN.md)."""

    period: str
    n: int
    total: float
    total_squares: float


@dataclass(frozen=True)
class MeanEstimate:
    """The mean of a numeric metric with its confidence interval (on the [-1, 1] axis or in
    value units, :func:`~.numeric.in_value_units`).

    ``estimate`` always lies within [``ci_low``, ``ci_high``]; without reports ``estimate`` and
    ``std_error`` are null and the interval is the whole range.
    """

    estimate: float | None
    std_error: float | None
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class QuantileInterval:
    """An interval [``low``, ``high``] (value units, bucket edges) for the q-quantile.

    The end buckets are open: every value below the first edge is counted in the bottom
    bucket and every value above the last edge in the top one. So ``low`` is null (no lower
    bound: the quantile may lie below the first edge) when the quantile may fall in the bottom
    bucket, and ``high`` is null (no upper bound: it may lie above the last edge) when it may
    fall in the top one; an end that is a number is always an inner edge.
    """

    q: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class CategoryEstimate:
    """One category's estimated share with its confidence interval.

    ``frequency`` always lies within [``ci_low``, ``ci_high``], and an interval is never
    narrower than its margin (STATS.md section 4, "What every output shows"). ``count`` is
    the estimated count, N times ``frequency``. ``unbiased`` is the debiased estimate before
    any clipping or projection, which may leave [0, 1]; ``clipped`` says it did (the data
    pushed it below 0 or above 1), so the point shown sits at the edge of [0, 1] (unbiased)
    or is the method's own (consistent, mle).
    """

    category: str
    frequency: float | None
    std_error: float | None
    ci_low: float
    ci_high: float
    count: float | None
    unbiased: float | None = None
    clipped: bool = False


@dataclass(frozen=True)
class Estimate:
    """A population estimate over one or more periods, with how it was made.

    ``margin`` is the median over categories of the intervals' margin (half their width
    before clipping to [0, 1]); ``below_margin`` counts the categories whose estimate is
    smaller than its own margin, which cannot be told from 0, and
    ``margin_exceeds_most_shares`` says that is more than half of them (null, 0 and false
    without reports).
    """

    mechanism: str
    epsilon: float
    n: int
    periods: int
    confidence: float
    method: str
    pooling: str
    simultaneous: bool
    estimates: list[CategoryEstimate]
    margin: float | None = None
    below_margin: int = 0
    margin_exceeds_most_shares: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The estimate as a JSON-ready dict (``estimates`` as a list of dicts)."""
        return asdict(self)


@dataclass
class CellStats:
    """One cell's statistics per period of a read: n reports, and the support counts per
    category (``counts``, periods × k) or a numeric metric's sums of y and y^2."""

    n: np.ndarray
    counts: np.ndarray
    total: np.ndarray
    total_squares: np.ndarray

    @classmethod
    def empty(cls, periods: int, width: int) -> CellStats:
        """No reports in any of ``periods`` periods, with ``width`` counts per period."""
        return cls(
            np.zeros(periods, dtype=np.int64),
            np.zeros((periods, width), dtype=np.int64),
            np.zeros(periods),
            np.zeros(periods),
        )
