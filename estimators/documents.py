"""The estimate and series documents: what the collector answers at
``GET /v1/metrics/{name}/estimate`` and ``/series``, and what ``deniable estimate`` and
``deniable series`` print, whether asked of a collector or computed from an exported file.

Each document has one builder here, used by the collector's routes and by the CLI's offline
estimates, so online and offline answers have the same shape by construction. The dataclasses
are the API's response models too (pydantic reads standard dataclasses), so the OpenAPI
document describes exactly what these builders return.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

from .results import CategoryEstimate, Estimate


@dataclass(frozen=True)
class MetricRange:
    """Which metric a document is about, and the first and last period it covers.

    ``start`` and ``end`` are null only offline, when a file holds no report in the range and
    the range was not named.
    """

    metric: str
    start: str | None
    end: str | None


@dataclass(frozen=True)
class RangeEstimate(Estimate, MetricRange):
    """A population estimate of one metric over the periods start..end.

    Its fields are metric, start and end, then the estimate's own: a dataclass takes its
    bases' fields starting from the last base listed.
    """


@dataclass(frozen=True)
class SeriesPoint:
    """One period's own estimate in a series; a period without reports has n = 0."""

    period: str
    n: int
    estimates: list[CategoryEstimate]


@dataclass(frozen=True)
class Series:
    """One estimate per period of a range, oldest first, with the options they share."""

    metric: str
    confidence: float
    method: str
    simultaneous: bool
    series: list[SeriesPoint]


def estimate_document(
    metric: str, start: str | None, end: str | None, estimate: Estimate
) -> dict[str, Any]:
    """The estimate document of ``metric`` over start..end, as a JSON-ready dict."""
    values = {field.name: getattr(estimate, field.name) for field in fields(estimate)}
    return asdict(RangeEstimate(metric=metric, start=start, end=end, **values))


def series_document(
    metric: str,
    points: Iterable[tuple[str, Estimate]],
    *,
    confidence: float,
    method: str,
    simultaneous: bool,
) -> dict[str, Any]:
    """The series document of ``metric``: one (period label, its own estimate) per point, in
    the order given, and the options every point was estimated with."""
    series = [SeriesPoint(label, estimate.n, estimate.estimates) for label, estimate in points]
    return asdict(Series(metric, confidence, method, simultaneous, series))
