"""The metric kinds, one module each, and the registry that reads a type string once.

A kind is a frozen dataclass over :class:`~deniable.client.spec.MetricSpec` that adds its own
fields and knows how to prepare a value, its randomizer, its count width and its payload check.
Adding a kind is a module here and one entry in :data:`KINDS`; tests/client/test_kinds.py runs
its conformance test over every entry.
"""

from __future__ import annotations

from ..spec import MetricSpec, MetricType
from .categorical import BooleanSpec, CategoricalSpec
from .histogram import HistogramSpec
from .numeric import NumericSpec
from .oracle import OracleSpec
from .set import SetSpec
from .text import TextSpec

KINDS: dict[MetricType, type[MetricSpec]] = {
    kind.type: kind
    for kind in (
        BooleanSpec,
        CategoricalSpec,
        NumericSpec,
        HistogramSpec,
        TextSpec,
        SetSpec,
    )
}
"""Every kind by its wire type name: the one place a type string becomes a class."""

__all__ = [
    "KINDS",
    "BooleanSpec",
    "CategoricalSpec",
    "HistogramSpec",
    "NumericSpec",
    "OracleSpec",
    "SetSpec",
    "TextSpec",
]
