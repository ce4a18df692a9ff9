"""A Prometheus exposition read back as samples, for the tests of the scrape, the Grafana
export and the alerting rules."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Samples by name and sorted labels."""


def parse_exposition(text: str) -> Samples:
    """Every sample of the exposition, by name and sorted labels (an AssertionError if one is
    there twice), read by prometheus_client's parser."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in samples, key
            samples[key] = sample.value
    return samples


def sample_value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly ``labels``, or None."""
    return samples.get((name, tuple(sorted(labels.items()))))
