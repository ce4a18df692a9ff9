"""The read cache (collector/readcache.py): a cached estimate equals a fresh one after every
kind of write, whichever process wrote (two collectors on one database, real HTTP, SQLite and
PostgreSQL), and the cache stays within its bound in bytes however many distinct requests."""

from __future__ import annotations

import datetime as dt
import random
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from deniable.cli.commands.retention import archive_expired
from deniable.client import MetricSpec, SeededRandomness
from deniable.collector.readcache import ReadCache
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    Clock,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_numeric_reports,
    make_reports,
    post_reports,
    register,
    unique_name,
)

PERIOD = TEST_NOW.date().isoformat()
EARLIER = (TEST_NOW.date() - dt.timedelta(days=1)).isoformat()
NEXT = TEST_NOW.date() + dt.timedelta(days=1)
"""The ``--before`` of the archive step: its check is against the real date (today minus the
one-day window it is given), which is past ``TEST_NOW``."""


@pytest.fixture
def pair(databases: DatabaseFactory, backend: str) -> Iterator[tuple[RunningCollector, ...]]:
    """Two collectors on one new database and one clock: ``cached`` keeps documents, ``fresh``
    keeps none (``read_cache_bytes`` 0), so its answers are what a read sees now. Slices of
    one report are shown, so a breakdown's counts change with every report."""
    url, clock = databases.new(backend), Clock()
    cached = RunningCollector(collector_settings(url, min_slice_reports=1), clock).start()
    fresh = RunningCollector(
        collector_settings(url, read_cache_bytes=0, migrate_on_start=False, min_slice_reports=1),
        clock,
    ).start()
    try:
        yield cached, fresh
    finally:
        fresh.stop()
        cached.stop()


def _text_reports(spec: MetricSpec, words: list[str], seed: int) -> list[dict[str, Any]]:
    """Reports of ``words`` by the text metric's real randomizer (seeded; fresh ids)."""
    sketch, rng = spec.text_randomizer, SeededRandomness(seed)
    return [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": PERIOD,
            "payload": sketch.randomize(sketch.encode(word), 1 + i % sketch.levels, rng),
        }
        for i, word in enumerate(words)
    ]


def _reported(document: dict[str, Any]) -> int:
    """The reports a document counts: its ``n``, or a breakdown's slices' together."""
    if "slices" in document:
        return sum(s["estimate"]["n"] for s in document["slices"] if not s["suppressed"])
    return document["n"]


class Metrics:
    """One metric of each kind of read the cache keeps, and reports for them all."""

    def __init__(self, admin: httpx.Client) -> None:
        spec = MetricSpec.categorical(
            unique_name("cache"), ["a", "b", "c"], epsilon=1.0, mechanism="krr"
        )
        self.spec = spec
        self.krr = register(admin, spec)
        self.text = register(admin, MetricSpec.text(unique_name("cache"), max_length=3, epsilon=4))
        self.numeric = register(
            admin, MetricSpec.numeric(unique_name("cache"), lower=0, upper=100, epsilon=2.0)
        )
        self.histogram = register(
            admin, MetricSpec.histogram(unique_name("cache"), edges=[0, 10, 100], epsilon=1.0)
        )
        self.sliced = register(
            admin,
            MetricSpec.boolean(
                unique_name("cache"), epsilon=2.0, dimensions={"platform": ["ios", "web"]}
            ),
        )
        span = f"start={EARLIER}&end={PERIOD}"
        self.reads = [
            f"/v1/metrics/{self.krr.name}/estimate?{span}",
            f"/v1/metrics/{self.krr.name}/estimate?{span}&confidence=0.9",
            f"/v1/metrics/{self.krr.name}/series?{span}",
            f"/v1/metrics/{self.text.name}/estimate?end={PERIOD}",
            f"/v1/metrics/{self.numeric.name}/estimate?{span}",
            f"/v1/metrics/{self.histogram.name}/estimate?{span}",
            f"/v1/metrics/{self.sliced.name}/estimate?{span}&by=platform",
        ]
        self.counting = (self.krr, self.numeric, self.histogram, self.sliced)
        """The metrics :meth:`reports` reports for."""
        self.counted = [0, 4, 5, 6]
        """The reads whose documents count reports (:func:`_reported`): krr, numeric,
        histogram, breakdown."""

    def reports(self, size: int, period: str, seed: int) -> list[dict[str, Any]]:
        """``size`` reports of the krr, numeric, histogram and sliced metrics each."""
        values = [i % 3 for i in range(size)]
        sliced = make_reports(self.sliced, [v % 2 for v in values], period, seed + 3)
        for i, report in enumerate(sliced):
            report["dims"] = {"platform": ("ios", "web", "other")[i % 3]}
        return (
            make_reports(self.krr, values, period, seed)
            + make_numeric_reports(self.numeric, [10.0 * v for v in values], period, seed + 1)
            + make_reports(self.histogram, [v % 2 for v in values], period, seed + 2)
            + sliced
        )


def test_a_cached_answer_equals_a_fresh_one_after_every_kind_of_write(
    pair: tuple[RunningCollector, RunningCollector], tmp_path: Path
) -> None:
    """After each write (ingest here and by another process, a resend, re-registration,
    archiving a metric, retention by the API and with ``--archive-to`` a directory) every read
    kept before it is made again (a miss, never a hit of the old document) and equals what a
    collector without a cache answers; an ingest also changes each count read."""
    cached, fresh = pair
    with (
        cached.client(ADMIN_TOKEN) as admin_a,
        fresh.client(ADMIN_TOKEN) as admin_b,
        cached.client(INGEST_KEY) as upload_a,
        fresh.client(INGEST_KEY) as upload_b,
    ):
        metrics = Metrics(admin_a)
        reads, krr, text = metrics.reads, metrics.krr, metrics.text
        state = cached.app_state()

        def primed() -> list[Any]:
            """Each read from the caching collector, twice: the second is answered from the
            cache (counted as a hit), and equals the first."""
            answers = []
            for path in reads:
                first = admin_a.get(path)
                hits = state.read_cache.hits
                second = admin_a.get(path)
                assert first.status_code == second.status_code == 200, first.text
                assert state.read_cache.hits == hits + 1 and first.json() == second.json()
                answers.append(first.json())
            return answers

        def agree(changed: set[str] | None = None) -> list[Any]:
            """Each read from both collectors: the caching one's answer equals the fresh one's,
            and is made anew for a metric the write ``changed`` (None: every metric)."""
            answers = []
            for path in reads:
                hits = state.read_cache.hits
                ours, theirs = admin_a.get(path), admin_b.get(path)
                assert ours.status_code == theirs.status_code == 200, ours.text
                if changed is None or path.split("/")[3] in changed:
                    assert state.read_cache.hits == hits, f"{path} was kept across the write"
                assert ours.json() == theirs.json(), path
                answers.append(ours.json())
            return answers

        def grew(before: list[Any], after: list[Any], by: int) -> None:
            """Every count read went up by ``by``."""
            for i in metrics.counted:
                assert _reported(after[i]) == _reported(before[i]) + by, reads[i]

        reports = metrics.reports(6, PERIOD, seed=1) + metrics.reports(3, EARLIER, seed=5)
        words = _text_reports(text, ["cat"] * 40, seed=2)
        before = primed()
        assert post_reports(upload_a, reports + words).status_code == 202  # ingest, here
        after = agree()
        grew(before, after, 9)
        assert after[3]["n"] == before[3]["n"] + 40

        before = primed()
        more = metrics.reports(2, PERIOD, seed=3)
        assert post_reports(upload_b, more).status_code == 202  # ingest, by another process
        grew(before, agree({m.name for m in metrics.counting}), 2)

        before = primed()
        resent = post_reports(upload_b, reports[:3] + more)  # resend: duplicates only
        assert resent.json() == {"accepted": 0, "duplicates": 3 + len(more)}
        grew(before, agree(set()), 0)

        primed()
        described = metrics.spec.fingerprint_fields() | {
            "description": "what the cache must not hide"
        }
        assert admin_b.post("/v1/metrics", json=described).status_code == 200  # re-registration
        assert agree({krr.name})[0]["description"] == "what the cache must not hide"

        primed()
        assert admin_b.post(f"/v1/metrics/{krr.name}/archive").status_code == 200  # archive
        agree({krr.name})

        before = primed()
        assert admin_b.post("/v1/admin/retention").status_code == 200  # retention, nothing due
        grew(before, agree(set()), 0)
        days = cached.settings.retention_days + 2
        cached.clock.advance(days)  # now the periods' raw reports are due
        before = primed()
        purged = admin_b.post("/v1/admin/retention", params={"before": PERIOD})  # EARLIER's
        assert purged.status_code == 200 and purged.json()["deleted"] == 3 * 4, purged.text
        grew(before, agree({m.name for m in metrics.counting}), 0)  # the counts stay

        before = primed()
        target = tmp_path / "archive"
        run = archive_expired(  # retention --archive-to a directory, by another process
            cached.settings.database_url, str(target), NEXT, 1, "json"
        )
        assert run["deleted"] == 8 * 4 + 40, run
        assert {p["metric"] for p in run["archived"]} == {
            m.name for m in (krr, text, metrics.numeric, metrics.histogram, metrics.sliced)
        }
        assert list(target.rglob("*.parquet")), "the archive wrote no file"
        grew(before, agree(), 0)


def test_the_cache_stays_within_its_bound_under_10000_distinct_requests() -> None:
    """10,000 distinct keys with documents of estimate sizes: the counted size never passes
    the bound, and the memory the cache really holds (tracemalloc) is within what it counts."""
    limit = 1 << 20
    rng = random.Random(38)
    cache = ReadCache(limit)
    tracemalloc.start()
    try:
        for i in range(10_000):
            key = orjson.dumps(["estimate", PERIOD, [i, i], {"read": {"name": f"m{i}"}}])
            shares = [rng.random() for _ in range(rng.randrange(1, 120))]
            cache.put(key, orjson.dumps({"metric": f"m{i}", "n": i, "shares": shares}))
            assert cache.size <= limit
        counted, kept = cache.size, len(cache)
        holding = tracemalloc.get_traced_memory()[0]
        del cache, key, shares
        held = holding - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert counted > limit * 0.9 and 100 < kept < 10_000
    assert held <= counted, (held, counted)
    small = ReadCache(1000)
    small.put(b"k", b"x" * 200)  # past an eighth of the bound: answered, never kept
    assert not len(small)


def test_the_collectors_cache_holds_its_bound_over_http(databases: DatabaseFactory) -> None:
    """Distinct estimates over real HTTP into a small cache: its size stays within the bound
    the setting names, and the newest answers are the ones kept."""
    limit = 16_384
    server = RunningCollector(
        collector_settings(databases.new("sqlite"), read_cache_bytes=limit)
    ).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            krr = register(
                admin, MetricSpec.categorical(unique_name("bound"), ["a", "b"], epsilon=1.0)
            )
            cache = server.app_state().read_cache
            for i in range(150):
                level = f"{0.5 + i / 1000:.3f}"
                answer = admin.get(f"/v1/metrics/{krr.name}/estimate", params={"confidence": level})
                assert answer.status_code == 200, answer.text
                assert cache.size <= limit
            hits = cache.hits
            assert (
                admin.get(
                    f"/v1/metrics/{krr.name}/estimate", params={"confidence": level}
                ).status_code
                == 200
            )
            assert cache.hits == hits + 1 and 0 < len(cache) < 150
            exported = _samples(admin.get("/metrics").text)
            assert exported["deniable_read_cache_hits_total"] == cache.hits == 1
            assert exported["deniable_read_cache_misses_total"] == cache.misses == 150
    finally:
        server.stop()


def _samples(exposition: str) -> dict[str, float]:
    """The unlabelled samples of a Prometheus text exposition by name."""
    return {
        name: float(value)
        for name, _, value in (line.partition(" ") for line in exposition.splitlines())
        if name and not name.startswith("#") and "{" not in name
    }
