"""The server side of each metric kind, one module each: its accumulator (from a batch of
reports or a count source, merged across periods, cells or files) and its estimate document.

A module registers its estimator for its client kind class (:func:`.base.register`);
importing it here is what puts it in the registry. Adding a kind is one module here beside
its client module (:mod:`deniable.client.kinds`), and tests/estimators/test_kind_conformance.py
runs the same conformance test over every client kind.
"""

from __future__ import annotations

from . import categorical, histogram, numeric, set, text
from .base import (
    Accumulator,
    KindEstimator,
    Report,
    SliceOptions,
    Span,
    estimator_of,
    register,
    registered,
)
from .categorical import ShareCounts, counted_shares, share_options
from .numeric import MeanSums
from .text import SketchTally

__all__ = [
    "Accumulator",
    "KindEstimator",
    "MeanSums",
    "Report",
    "ShareCounts",
    "SketchTally",
    "SliceOptions",
    "Span",
    "categorical",
    "counted_shares",
    "estimator_of",
    "histogram",
    "numeric",
    "register",
    "registered",
    "set",
    "share_options",
    "text",
]
