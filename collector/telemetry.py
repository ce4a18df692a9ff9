"""Prometheus metrics of one collector: reports accepted, duplicate and refused, and latencies.

Each app has its own registry (several apps can live in one test process). Metric labels
are registered metric names only; every unknown name shares one label, so a client cannot
blow up the number of time series.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
disable_created_metrics()


class Telemetry:
    """The collector's counters and histograms, with their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.accepted = Counter(
            "deniable_reports_accepted", "New reports stored", ["metric"], registry=self.registry
        )
        self.duplicates = Counter(
            "deniable_reports_duplicate",
            "Reports received again (same id), counted once",
            ["metric"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "deniable_reports_rejected",
            "Reports refused, by metric and reason",
            ["metric", "reason"],
            registry=self.registry,
        )
        self.batches_rejected = Counter(
            "deniable_batches_rejected",
            "Upload requests refused as a whole, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "deniable_request_duration_seconds",
            "HTTP request latency by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
