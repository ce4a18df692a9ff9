"""The histogram kind: a number counted in the buckets between its edges, reported through a
frequency oracle over the buckets, whose labels (``[0, 100)``) are its categories."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..canonical import number_text
from ..errors import SpecError
from ..events import NUMBER_AGGREGATES
from ..mechanisms import MAX_CATEGORIES
from ..spec import MetricSpec, MetricType, finite_number
from .oracle import OracleSpec


@dataclass(frozen=True)
class HistogramSpec(OracleSpec):
    """A number counted in the buckets between ``edges`` (finite, strictly increasing), for
    its distribution: below the first edge counts in the first bucket, above the last in the
    last."""

    type: ClassVar[MetricType] = "histogram"
    event_aggregates: ClassVar[frozenset[str]] = NUMBER_AGGREGATES

    edges: tuple[float, ...] = field(kw_only=True)
    categories: tuple[str, ...] = field(init=False)

    def _resolve(self) -> None:
        """Check the edges, label the buckets and resolve the frequency oracle over them."""
        self._resolve_oracle(self._bucket_labels())

    def _bucket_labels(self) -> tuple[str, ...]:
        """Check the edges (finite, strictly increasing) and label the buckets, ``[0, 100)``."""
        if not isinstance(self.edges, list | tuple):
            raise SpecError(f"metric {self.name}: edges must be a list of numbers")
        edges = tuple(finite_number(e, f"metric {self.name}: each edge") for e in self.edges)
        if len(edges) < 3:
            raise SpecError(f"metric {self.name}: a histogram needs at least 3 edges (2 buckets)")
        if len(edges) - 1 > MAX_CATEGORIES:
            raise SpecError(f"metric {self.name}: at most {MAX_CATEGORIES:,} buckets")
        if any(b <= a for a, b in itertools.pairwise(edges)):
            raise SpecError(
                f"metric {self.name}: edges must be strictly increasing (sorted, no duplicates)"
            )
        object.__setattr__(self, "edges", edges)
        texts = [number_text(e) for e in edges]
        labels = [f"[{a}, {b})" for a, b in itertools.pairwise(texts)]
        labels[-1] = labels[-1][:-1] + "]"
        return tuple(labels)

    @classmethod
    def _from_fields(cls, data: dict[str, Any], common: dict[str, Any]) -> MetricSpec:
        """The spec from its JSON fields; its categories, if given, must be the bucket labels
        its edges make, and bounds or a max_length are refused."""
        name = common["name"]
        if data.get("max_length") is not None:
            raise SpecError(f"metric {name}: max_length is for text metrics only")
        if data.get("lower") is not None or data.get("upper") is not None:
            raise SpecError(f"metric {name}: a histogram has edges only, no categories")
        edges = data.get("edges")
        if edges is None:
            raise SpecError(f"metric {name}: edges must be a list of numbers")
        spec = cls(**common, edges=tuple(edges))
        labels = tuple(data["categories"])
        if labels and labels != spec.categories:
            raise SpecError(
                f"metric {name}: a histogram's categories are its bucket labels, derived"
                " from its edges; these differ"
            )
        return spec

    @property
    def domain(self) -> str:
        """``6 buckets``."""
        return f"{self.k} buckets"

    def domain_fields(self) -> dict[str, Any]:
        """The edges."""
        return {"edges": list(self.edges)}

    def bucket_of(self, value: Any) -> int:
        """The bucket index of a number: below the first edge counts in the first bucket,
        above the last in the last."""
        number = self._finite_value(value)
        return max(0, min(self.k - 1, bisect.bisect_right(self.edges, number) - 1))

    def index_of(self, value: Any) -> int:
        """The bucket of a recorded number."""
        return self.bucket_of(value)
