"""Stored row order says nothing of which reports came from one device (issue 24, item 8).

Whoever reads the reports table (a ``SELECT`` without ``ORDER BY``, a ``pg_dump``, the
physical order by ``ctid``) must not find a device's reports next to each other more often
than chance would put them there, whenever one write holds several devices' reports: one
upload relayed for many devices, or the writer's group commit of many devices' uploads.
Reports carry no device in storage; the test knows which device sent what because it made
the reports itself.

The statistic is the number of neighbouring rows from one device. Under the null (the rows a
uniformly random permutation of the devices' reports) its mean and variance are exact
(:func:`neighbour_moments`); a test fails only past the mean plus 4.9 standard deviations
(STATS §8's Bonferroni level): 8.85 for 30 devices of 3 reports (mean 2, sd 1.40). The
count is small and discrete, so its real tail past that limit is about 2e-4 (200,000 seeded
permutations), not a normal's 5e-7; ids and payloads are seeded, so each run stores the same
rows and the test never fails by chance. Rows stored in the order devices sent them give 60.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from deniable.collector.storage import migrate, open_database
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import register_spec
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    post_reports,
    register,
)
from testkit.row_order import (
    DEVICES,
    METRICS,
    boolean_specs,
    chance_limit,
    device_reports,
    ids_of,
    neighbour_moments,
    same_device_neighbours,
    stored_orders,
)


def assert_at_chance(url: str, reports: list[list[dict[str, Any]]]) -> None:
    """Every order a reader sees holds each report once and no more same-device neighbours
    than chance allows, while the order the devices sent them in would hold many more."""
    device_of = {r["id"]: d for d, batch in enumerate(reports) for r in batch}
    orders = stored_orders(url)
    for name, order in orders.items():
        assert sorted(ids_of(order)) == sorted(device_of), name
        count = same_device_neighbours(ids_of(order), device_of)
        assert count <= chance_limit(), (
            f"{name} order: {count} of {len(order) - 1} neighbours from one device"
        )
    sent_order = [r["id"] for batch in reports for r in batch]
    assert same_device_neighbours(sent_order, device_of) > chance_limit()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_one_upload_of_many_devices_is_stored_in_no_device_order(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            specs = [register(admin, spec) for spec in boolean_specs("relayed")]
        reports = device_reports(specs, seed=8)
        with server.client(INGEST_KEY) as uploader:
            answer = post_reports(uploader, [r for batch in reports for r in batch])
        assert answer.status_code == 202, answer.text
    finally:
        server.stop()
    assert_at_chance(url, reports)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_group_commit_of_many_devices_is_stored_in_no_device_order(
    databases: DatabaseFactory, backend: str
) -> None:
    """The writer's group commit: each device's upload a batch, all in one transaction."""
    url = databases.new(backend)
    migrate(url)
    database = open_database(url)
    try:
        specs = boolean_specs("grouped")
        for spec in specs:
            register_spec(database, spec, TEST_NOW)
        by_name = {spec.name: spec for spec in specs}
        reports = device_reports(specs, seed=9)
        batches = [
            prepare_batch(
                [ValidReport(r["id"], r["metric"], r["period"], r["payload"]) for r in batch],
                by_name,
                TEST_NOW.date(),
                dialect=database.dialect,
            )
            for batch in reports
        ]
        stored = store_batches(database, batches)
        assert sum(result.accepted for result in stored) == DEVICES * METRICS
    finally:
        database.dispose()
    assert_at_chance(url, reports)


def test_the_chance_moments_match_enumeration() -> None:
    """The exact moments agree with every arrangement of 3 devices' 2 rows each (90 orders
    of the multiset) and 2 devices' 3 rows (20)."""
    for devices, per_device in ((3, 2), (2, 3)):
        rows = [d for d in range(devices) for _ in range(per_device)]
        counts = [
            sum(a == b for a, b in itertools.pairwise(order))
            for order in set(itertools.permutations(rows))
        ]
        mean = sum(counts) / len(counts)
        variance = sum((c - mean) ** 2 for c in counts) / len(counts)
        expected_mean, expected_variance = neighbour_moments(devices, per_device)
        assert mean == pytest.approx(expected_mean, rel=1e-12)
        assert variance == pytest.approx(expected_variance, rel=1e-12)
