"""The read cache (collector/readcache.py): a cached estimate equals a fresh one after every
kind of write, whichever process wrote (two collectors on one database, real HTTP, SQLite and
PostgreSQL), and the cache stays within its bound in bytes however many distinct requests."""

from __future__ import annotations

import random
import tracemalloc
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
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
    make_reports,
    post_reports,
    register,
    unique_name,
)

PERIOD = TEST_NOW.date().isoformat()


@pytest.fixture
def pair(databases: DatabaseFactory, backend: str) -> Iterator[tuple[RunningCollector, ...]]:
    """Two collectors on one new database and one clock: ``cached`` keeps documents, ``fresh``
    keeps none (``read_cache_bytes`` 0), so its answers are what a read sees now."""
    url, clock = databases.new(backend), Clock()
    cached = RunningCollector(collector_settings(url), clock).start()
    fresh = RunningCollector(
        collector_settings(url, read_cache_bytes=0, migrate_on_start=False), clock
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


def test_a_cached_answer_equals_a_fresh_one_after_every_kind_of_write(
    pair: tuple[RunningCollector, RunningCollector],
) -> None:
    cached, fresh = pair
    with (
        cached.client(ADMIN_TOKEN) as admin_a,
        fresh.client(ADMIN_TOKEN) as admin_b,
        cached.client(INGEST_KEY) as upload_a,
        fresh.client(INGEST_KEY) as upload_b,
    ):
        spec = MetricSpec.categorical(
            unique_name("cache"), ["a", "b", "c"], epsilon=1.0, mechanism="krr"
        )
        krr = register(admin_a, spec)
        text = register(admin_a, MetricSpec.text(unique_name("cache"), max_length=3, epsilon=4))
        reads = [
            f"/v1/metrics/{krr.name}/estimate?start={PERIOD}&end={PERIOD}",
            f"/v1/metrics/{krr.name}/estimate?start={PERIOD}&end={PERIOD}&confidence=0.9",
            f"/v1/metrics/{krr.name}/series?start={PERIOD}&end={PERIOD}",
            f"/v1/metrics/{text.name}/estimate?end={PERIOD}",
        ]
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

        def agree() -> list[Any]:
            """Each read from both collectors: the caching one's answer equals the fresh one's."""
            answers = []
            for path in reads:
                ours, theirs = admin_a.get(path), admin_b.get(path)
                assert ours.status_code == theirs.status_code == 200, ours.text
                assert ours.json() == theirs.json(), path
                answers.append(ours.json())
            return answers

        reports = make_reports(krr, [0, 1, 2, 0, 0], PERIOD, seed=1)
        words = _text_reports(text, ["cat"] * 40, seed=2)
        before = primed()
        assert post_reports(upload_a, reports + words).status_code == 202  # ingest, here
        after = agree()
        assert after[0]["n"] == before[0]["n"] + 5 and after[3]["n"] == before[3]["n"] + 40

        primed()
        more = make_reports(krr, [2, 2], PERIOD, seed=3)
        assert post_reports(upload_b, more).status_code == 202  # ingest, by another process
        assert agree()[0]["n"] == after[0]["n"] + 2

        primed()
        resent = post_reports(upload_b, reports[:3] + more)  # resend: duplicates only
        assert resent.json() == {"accepted": 0, "duplicates": 5}
        agree()

        primed()
        described = spec.fingerprint_fields() | {"description": "what the cache must not hide"}
        assert admin_b.post("/v1/metrics", json=described).status_code == 200  # re-registration
        assert agree()[0]["description"] == "what the cache must not hide"

        primed()
        assert admin_b.post(f"/v1/metrics/{krr.name}/archive").status_code == 200  # archive
        agree()

        primed()
        assert admin_b.post("/v1/admin/retention").status_code == 200  # retention, nothing due
        agree()
        days = cached.settings.retention_days + 2
        cached.clock.advance(days)  # now the period's raw reports are due
        primed()
        purged = admin_b.post("/v1/admin/retention")
        assert purged.status_code == 200 and purged.json()["deleted"] > 0, purged.text
        agree()


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
