"""The question one estimate read asks, as a frozen value that checks itself.

The API's estimate and series routes fill an :class:`EstimateQuery` from the request, the
dashboard from its forms and the Prometheus exposition with the defaults; the query functions
answer it. What can be checked without the metric is checked here, as the estimate route
checked it first; what needs the metric is checked by the function that answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from deniable.estimators import DEFAULT_METHOD, Method, Pooling
from deniable.estimators.choices import METHODS, POOLINGS
from deniable.estimators.heavyhitters import MAX_CANDIDATES

from ..numbers import NumberRule
from .refusal import refuse

CONFIDENCE_RULE = NumberRule("confidence", 0, 1, open_low=True, open_high=True)
"""How the ``confidence`` query is read: a level strictly between 0 and 1."""
QUANTILE_RULE = NumberRule("q", 0, 1, open_low=True, open_high=True)
"""How each ``q`` query value is read: a quantile strictly between 0 and 1."""


@dataclass(frozen=True)
class EstimateQuery:
    """One read of a metric's estimates: the ``metric``, the range ``start``..``end`` as given
    (None: the defaults), the ``confidence``, the ``method`` (None: the metric's default),
    whether intervals hold for all categories at once (``simultaneous``), the ``pooling``,
    a histogram's ``quantiles`` (None: the defaults of an estimate, none in a series), a text
    metric's ``candidates``, the ``by`` dimensions and ``where`` filters of a breakdown, the
    two slices to ``compare`` and the window to ``compare_to``.

    Building one refuses (:class:`~.refusal.QueryRefused`) a value no metric could take."""

    metric: str
    start: str | None = None
    end: str | None = None
    confidence: float = 0.95
    method: Method | None = None
    simultaneous: bool = True
    pooling: Pooling = "overlap-safe"
    quantiles: tuple[float, ...] | None = None
    candidates: tuple[str, ...] | None = None
    by: tuple[str, ...] | None = None
    where: tuple[str, ...] | None = None
    compare: str | None = None
    compare_to: str | None = None

    def __post_init__(self) -> None:
        """Refuse what no metric takes: too many candidates first (as the API always did),
        then a level, method, pooling or quantile outside its range."""
        if self.candidates is not None and len(self.candidates) > MAX_CANDIDATES:
            raise refuse(f"candidates: at most {MAX_CANDIDATES:,} strings per query")
        if not 0 < self.confidence < 1:
            raise refuse(CONFIDENCE_RULE.expected())
        if self.method is not None and self.method not in METHODS:
            raise refuse(f"method must be one of {', '.join(METHODS)}")
        if self.pooling not in POOLINGS:
            raise refuse(f"pooling must be one of {', '.join(POOLINGS)}")
        if any(not 0 < q < 1 for q in self.quantiles or ()):
            raise refuse(QUANTILE_RULE.expected())

    @property
    def sliced(self) -> bool:
        """Whether the query asks per slice (``by``, ``where`` or ``compare``)."""
        return self.by is not None or self.where is not None or self.compare is not None

    def shares_method(self, numeric: bool) -> Method:
        """The method of its estimates: the one asked, else unbiased for a mean or the
        estimators' default for shares."""
        return self.method or ("unbiased" if numeric else DEFAULT_METHOD)


def listed(values: list[str] | None) -> tuple[str, ...] | None:
    """A repeatable query parameter as a query field (None stays None)."""
    return None if values is None else tuple(values)
