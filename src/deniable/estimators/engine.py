"""One estimate engine: a metric's estimate document over a range, from any source of its
counts.

The collector's database, the Parquet archive of raw reports and an export file each adapt
their reports to a :class:`CountsSource`; :func:`document` makes the document from it, written
once for the three, so that the online answer and a re-analysed one are the same numbers.
Each surface checks its own options first (their words differ: ``q`` or ``--quantile``); the
engine raises :class:`~deniable.client.errors.InvalidInput` for what the estimators refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from deniable.client.spec import MetricSpec

from .choices import Method, Pooling
from .documents import counted_document
from .kinds import estimator_of
from .results import CellStats, Estimate, PeriodCounts, PeriodSums


class CountsSource(Protocol):
    """One metric's reports over one range, as an estimate reads them: the range's ``first``
    and ``last`` labels (None where unknown), each period's counts, a numeric metric's sums,
    a text metric's sketch counts in its one period, each dimension cell's statistics (for a
    breakdown), and the shares' estimate."""

    @property
    def first(self) -> str | None:
        """The first period label the document names."""
        ...

    @property
    def last(self) -> str | None:
        """The last period label the document names (a text metric's one period)."""
        ...

    def counts(self) -> list[PeriodCounts]:
        """Each period's report count and counts per category, oldest first."""
        ...

    def sums(self) -> list[PeriodSums]:
        """Each period's report count, sum and sum of squares (a numeric metric)."""
        ...

    def text_counts(self) -> np.ndarray:
        """A text metric's sketch counts in the period :attr:`last`."""
        ...

    def cells(self) -> dict[str, CellStats]:
        """Each dimension cell's statistics per period of the range, by cell text (a cell
        without reports absent)."""
        ...

    def shares(self, spec: MetricSpec, options: dict[str, Any]) -> Estimate:
        """The shares' estimate with ``options`` (confidence, method, simultaneous, pooling):
        :func:`.kinds.counted_shares` from the counts, unless the source knows better (an export
        file's exact mle over its distinct reports)."""
        ...


class LabelledRange:
    """A counts source's range as its period ``labels`` (oldest first, at least one): its
    first and last label, as :class:`CountsSource` names them."""

    labels: list[str]

    @property
    def first(self) -> str | None:
        """The range's first label."""
        return self.labels[0]

    @property
    def last(self) -> str | None:
        """The range's last label."""
        return self.labels[-1]


class DocumentQuery(Protocol):
    """How the estimate is made: the collector's ``EstimateQuery`` is one, the CLI's
    :class:`DocumentOptions` another."""

    @property
    def confidence(self) -> float:
        """The confidence level of every interval."""
        ...

    @property
    def method(self) -> Method | None:
        """The shares' method (None: :data:`~.choices.DEFAULT_METHOD`)."""
        ...

    @property
    def simultaneous(self) -> bool:
        """Whether the shares' intervals hold for all categories at once."""
        ...

    @property
    def pooling(self) -> Pooling:
        """How the periods' estimates combine."""
        ...

    @property
    def quantiles(self) -> tuple[float, ...] | None:
        """A histogram's quantiles (None: the defaults)."""
        ...

    @property
    def candidates(self) -> tuple[str, ...] | None:
        """A text metric's strings to score (None: discover)."""
        ...


@dataclass(frozen=True)
class DocumentOptions:
    """A :class:`DocumentQuery` as the CLI gives it, the estimators' defaults otherwise."""

    confidence: float = 0.95
    method: Method | None = None
    simultaneous: bool = False
    pooling: Pooling = "overlap-safe"
    quantiles: tuple[float, ...] | None = None
    candidates: tuple[str, ...] | None = None

    @classmethod
    def of(cls, options: dict[str, Any]) -> DocumentOptions:
        """The options of a CLI estimate (``confidence``, ``method``, ``simultaneous``,
        ``pooling``, ``quantiles``, ``candidates``; the others' defaults where absent)."""
        quantiles, candidates = options.get("quantiles"), options.get("candidates")
        return cls(
            options.get("confidence", 0.95),
            options.get("method"),
            options.get("simultaneous", False),
            options.get("pooling", "overlap-safe"),
            None if quantiles is None else tuple(quantiles),
            None if candidates is None else tuple(candidates),
        )


def document(spec: MetricSpec, source: CountsSource, query: DocumentQuery) -> dict[str, Any]:
    """The estimate document of ``spec`` over ``source``'s range, made by its kind's
    estimator (:mod:`.kinds`): a text metric's heavy hitters in its one period, a numeric
    metric's mean, or the shares of each category (a histogram's quantile intervals too); an
    event metric's says what its n counts (:func:`.documents.counted_document`)."""
    return counted_document(spec, estimator_of(spec).document(spec, source, query))
