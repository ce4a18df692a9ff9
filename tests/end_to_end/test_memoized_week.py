"""End to end over a week: memoizing SDK devices report on 7 past days to a real collector.

Each simulated device is its own :class:`deniable.client.Client` with its own ``state_dir``,
because the memo (RAPPOR's permanent randomized response) lives per device: sharing one Client
among several devices would give them one shared memoized answer per category, which is not
the situation under test. A Client per device costs about 35 ms of wall time (most of it
httpx building an SSL context, then an SQLite outbox, two threads and one upload), so the
population is 400 devices, run 4 at a time, rather than thousands; to keep the test's power at
that size the metric uses krr with k = 3 and eps = 2.5, for which the 99% half-width over the
week is about 0.07-0.08 (the shares are 0.5 / 0.3 / 0.2), against about 0.03 for
``independent``.

Each device's injected clock walks through the 7 days before the server's current date (inside
the retention window, never hard-coded), recording its fixed true value once per day, and one
``flush()`` delivers its 7 reports. The truth is the devices' own shares, which the default
(``overlap-safe``) 99% interval over the week must contain. ``independent`` pools the 2,800
reports as if they came from 2,800 devices and is about sqrt(7) times narrower; that is why it
is not the default (docs/multi-period.md: with memoizing devices it covers about 54% at a
nominal 95%). The devices send their permanent answers as is (``instantaneous_ratio=None``):
every day then repeats the same answers, the most correlated reports can be, which is the case
the pooling must survive (the fresh layer of the SDK's default only makes days less alike).
One backend (SQLite) keeps the test within its time budget.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from deniable.client import Client, MetricSpec, SeededRandomness
from deniable.client.spec import period_label
from deniable.collector.storage.tables import reports as reports_table
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    register,
    unique_name,
)

DEVICES = 400
DAYS = 7
WORKERS = 4
"""Devices run in a few threads at once (each still its own Client); uploads overlap I/O."""
CATEGORIES = ("light", "dark", "auto")
SHARES = (0.5, 0.3, 0.2)
CONFIDENCE = 0.99
EPSILON = 2.5


class DeviceClock:
    """A device's settable clock: noon UTC of the day being simulated."""

    def __init__(self) -> None:
        self.now = dt.datetime(2000, 1, 1, 12, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now


def true_values() -> list[str]:
    """Exactly round(DEVICES * share) devices per category (the last takes the remainder)."""
    values: list[str] = []
    for category, share in zip(CATEGORIES[:-1], SHARES[:-1], strict=True):
        values += [category] * round(DEVICES * share)
    return values + [CATEGORIES[-1]] * (DEVICES - len(values))


def run_device(
    collector: RunningCollector,
    spec: MetricSpec,
    state_dir: Path,
    value: str,
    days: list[dt.date],
    seed: int,
) -> tuple[int, int, float]:
    """One device records ``value`` on each day and delivers.

    Returns (admitted, delivered, lifetime eps the device's ledger says it revealed).
    """
    clock = DeviceClock()
    with Client(
        collector.url,
        state_dir=state_dir,
        ingest_key=INGEST_KEY,
        metrics=[spec],
        memoize=True,
        instantaneous_ratio=None,
        clock=clock,
        randomness=SeededRandomness(seed),
        flush_interval=60.0,
    ) as device:
        for day in days:
            clock.now = dt.datetime.combine(day, dt.time(12), tzinfo=dt.UTC)
            assert device.record(spec.name, value)
        assert device.flush(timeout=20)
        stats = device.stats
        revealed = device.privacy_spent()[spec.name].per_value_epsilon
    return stats.admitted, stats.delivered, revealed


def stored_payloads(collector: RunningCollector, metric: str) -> dict[str, collections.Counter]:
    """Per period, the multiset of payloads the collector stored for ``metric`` (raw data)."""
    query = select(reports_table.c.period, reports_table.c.payload).where(
        reports_table.c.metric == metric
    )
    per_period: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    with collector.app_state().database.reader.connect() as connection:
        for period, payload in connection.execute(query):
            per_period[period][payload] += 1
    return per_period


@pytest.fixture(scope="module")
def sqlite_collector(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector of its own on an SQLite file (one backend keeps the test within budget)."""
    server = RunningCollector(collector_settings(databases.new("sqlite"))).start()
    yield server
    server.stop()


def test_a_memoized_week_from_sdk_devices_is_estimated_overlap_safe(
    sqlite_collector: RunningCollector, tmp_path: Path
) -> None:
    collector = sqlite_collector
    with collector.client(ADMIN_TOKEN) as admin:
        check_week(collector, admin, tmp_path)


def check_week(collector: RunningCollector, admin: httpx.Client, tmp_path: Path) -> None:
    """The body of the test: simulate the week, then check storage and both poolings."""
    spec = register(
        admin,
        MetricSpec.categorical(unique_name("theme"), CATEGORIES, epsilon=EPSILON, mechanism="krr"),
    )
    today = collector.app_state().today()
    days = [today - dt.timedelta(days=back) for back in range(DAYS, 0, -1)]
    labels = [period_label("day", dt.datetime.combine(d, dt.time(12), tzinfo=dt.UTC)) for d in days]
    values = true_values()

    def device(i: int) -> tuple[int, int, float]:
        return run_device(collector, spec, tmp_path / f"device{i:04d}", values[i], days, seed=i)

    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(device, range(DEVICES)))
    # Memoization, per device: its ledger counts eps once per distinct memoized answer, so a
    # per-value figure of exactly eps after 7 reports means one answer was drawn and sent 7
    # times.
    assert outcomes == [(DAYS, DAYS, EPSILON)] * DEVICES

    # Memoization, as the collector sees it: it stores no device ids (by design), so what it
    # can show is that every day holds exactly the same multiset of answers. With fresh noise
    # each day, 400 krr answers per day would differ between days almost surely.
    stored = stored_payloads(collector, spec.name)
    assert sorted(stored) == labels
    assert all(sum(counter.values()) == DEVICES for counter in stored.values())
    assert all(stored[label] == stored[labels[0]] for label in labels)

    params = {"start": labels[0], "end": labels[-1], "confidence": CONFIDENCE}
    safe = admin.get(f"/v1/metrics/{spec.name}/estimate", params=params)
    assert safe.status_code == 200, safe.text
    safe_doc = safe.json()
    assert (safe_doc["n"], safe_doc["periods"], safe_doc["pooling"]) == (
        DEVICES * DAYS,
        DAYS,
        "overlap-safe",
    )
    assert [row["category"] for row in safe_doc["estimates"]] == list(CATEGORIES)
    for category, row in zip(CATEGORIES, safe_doc["estimates"], strict=True):
        truth = values.count(category) / DEVICES
        assert row["ci_low"] <= truth <= row["ci_high"], (category, truth, row)

    independent = admin.get(
        f"/v1/metrics/{spec.name}/estimate", params={**params, "pooling": "independent"}
    ).json()
    assert (independent["n"], independent["periods"], independent["pooling"]) == (
        DEVICES * DAYS,
        DAYS,
        "independent",
    )
    for safe_row, naive_row in zip(safe_doc["estimates"], independent["estimates"], strict=True):
        assert naive_row["frequency"] == safe_row["frequency"]
        safe_width = safe_row["ci_high"] - safe_row["ci_low"]
        # 7 identical days pooled as 7x the devices: about sqrt(7) = 2.6 times narrower.
        assert naive_row["ci_high"] - naive_row["ci_low"] < safe_width / 2
