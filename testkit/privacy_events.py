"""Specs with and without events, shared by the tests of where the privacy account of event
metrics is shown (the document, ``deniable privacy`` and the dashboard)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from deniable.client import MetricSpec
from deniable.estimators.privacy import PrivacyDocument

PLAIN = [
    MetricSpec.boolean("dark_mode", epsilon=1.0),
    MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=1.0, period="week"),
]
ACTIVES = MetricSpec.boolean("search_actives", epsilon=1.0).with_events("any", window=7)
CRASHES = MetricSpec.histogram("crashes", [0, 1, 2, 5], epsilon=2.0, mechanism="krr").with_events(
    "count"
)
WEEKLY = MetricSpec.boolean("used_export", epsilon=0.5, period="week").with_events("any")
EVENTS = [ACTIVES, CRASHES, WEEKLY]
EVENT_FIELDS = {"aggregate", "rolling", "window_days", "per_window", "per_day_of_events"}


def by_name(metrics: Any) -> dict[str, Any]:
    """Rows of an account or a document, by metric name."""
    return {m["metric"] if isinstance(m, dict) else m.metric: m for m in metrics}


def as_json(document: PrivacyDocument) -> dict[str, Any]:
    """The document as the API serializes it (its response model)."""
    return TypeAdapter(PrivacyDocument).dump_python(document, mode="json")
