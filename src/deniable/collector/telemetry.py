"""Prometheus metrics of one collector: reports accepted, duplicate and refused, latencies and
the read cache's hits and misses.

Each app has its own registry (several apps can live in one test process). The ``metric``
label is ``all`` unless the operator opts in to per-metric labels
(``DENIABLE_PROMETHEUS_METRIC_LABELS=true``): ``/metrics`` needs no token, and per-metric
counts in real time tell anyone who can reach it which features are being used, and when.
With the opt-in, labels are registered metric names only; every unknown name shares one
label, so a client cannot blow up the number of time series.

Under ``deniable serve --workers N`` (N > 1) prometheus_client runs in multiprocess mode:
``serve`` sets ``PROMETHEUS_MULTIPROC_DIR`` before the workers start, every worker writes its
counters and histograms to memory-mapped files named by its pid in that directory, and
``render`` sums the files of all workers, so any worker answers a scrape with the totals.
A replaced worker (crash, health-check kill, SIGHUP) writes new files under its new pid
while the old ones stay and are still summed: totals never drop nor count twice.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
    values,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

CONTENT_TYPE = CONTENT_TYPE_LATEST
ALL_METRICS_LABEL = "all"
"""The ``metric`` label of every count unless per-metric labels are turned on."""
MULTIPROCESS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"
disable_created_metrics()


def multiprocess_mode() -> bool:
    """Whether metric values live in shared files (prometheus_client decides this at import)."""
    return bool(getattr(values.ValueClass, "_multiprocess", False))


class Telemetry:
    """The collector's counters and histograms, with their own registry."""

    def __init__(self, per_metric_labels: bool = False) -> None:
        self.per_metric_labels = per_metric_labels
        self.registry = CollectorRegistry()
        self.accepted = self._counter("deniable_reports_accepted", "New reports stored", "metric")
        self.duplicates = self._counter(
            "deniable_reports_duplicate", "Reports received again (same id), counted once", "metric"
        )
        self.rejected = self._counter(
            "deniable_reports_rejected", "Reports refused, by metric and reason", "metric", "reason"
        )
        self.batches_rejected = self._counter(
            "deniable_batches_rejected", "Upload requests refused as a whole, by reason", "reason"
        )
        self.read_cache_hits = self._counter(
            "deniable_read_cache_hits", "Estimate documents answered from the read cache"
        )
        self.read_cache_misses = self._counter(
            "deniable_read_cache_misses", "Estimate documents the read cache did not hold (made)"
        )
        self.latency = Histogram(
            "deniable_request_duration_seconds",
            "HTTP request latency by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.exposition = self.registry
        if multiprocess_mode():
            # A registry of its own: the metrics' registry would be exported twice.
            self.exposition = CollectorRegistry()
            MultiProcessCollector(self.exposition)

    def _counter(self, name: str, documentation: str, *labels: str) -> Counter:
        """A counter named ``name`` with these labels, in this telemetry's own registry."""
        return Counter(name, documentation, labels, registry=self.registry)

    def metric_label(self, metric: str) -> str:
        """The ``metric`` label value for counts of ``metric`` (``all`` unless opted in)."""
        return metric if self.per_metric_labels else ALL_METRICS_LABEL

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric (summed over workers if several)."""
        return generate_latest(self.exposition)
