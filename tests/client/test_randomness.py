"""The client's fast random helpers: bulk uuid4 text and the lock-free buffered CSPRNG."""

from __future__ import annotations

import uuid
from collections import Counter

from deniable.client.randomness import LocalRandomness, ReportIds, SeededRandomness, uuid4_texts


def test_uuid4_texts_are_canonical_random_version_4_uuids() -> None:
    texts = uuid4_texts(20_000)
    assert len(texts) == 20_000 == len(set(texts))
    for text in texts:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    assert uuid4_texts(0) == []


def test_uuid4_texts_use_every_free_bit() -> None:
    texts = uuid4_texts(4000)
    for position in range(36):
        seen = {t[position] for t in texts}
        if position in (8, 13, 18, 23):
            assert seen == {"-"}
        elif position == 14:
            assert seen == {"4"}
        elif position == 19:
            assert seen == set("89ab")
        else:
            assert seen == set("0123456789abcdef")


def test_uuid4_texts_follow_the_injected_source() -> None:
    assert uuid4_texts(5, SeededRandomness(3)) == uuid4_texts(5, SeededRandomness(3))


def test_local_randomness_draws_in_range_and_covers_the_range() -> None:
    rng = LocalRandomness()
    floats = [rng.random() for _ in range(10_000)]
    assert all(0.0 <= x < 1.0 for x in floats)
    assert min(floats) < 0.01 and max(floats) > 0.99
    counts = Counter(rng.randbelow(5) for _ in range(10_000))
    assert set(counts) == {0, 1, 2, 3, 4}
    # each count is Binomial(10000, 0.2): sd 40, so 6 sd is 240
    assert all(abs(n - 2000) < 240 for n in counts.values())
    assert len(rng.token_bytes(100_000)) == 100_000
    assert rng.randbelow(1 << 70) < 1 << 70


def test_report_ids_are_fresh_uuid4_texts_across_blocks() -> None:
    ids = ReportIds(block=7)
    drawn = [ids.take() for _ in range(50)]
    assert len(set(drawn)) == 50
    assert all(uuid.UUID(i).version == 4 for i in drawn)
