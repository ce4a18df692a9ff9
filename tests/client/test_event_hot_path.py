"""The event hot path's shortcuts keep its behaviour: the system clock's cached day, and a
numeric median's bin computed inline as :func:`~deniable.client.events.median_bin` does."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deniable.client import Client, MetricSpec
from deniable.client.events import MEDIAN_BINS, median_bin

LOWER, UPPER = -3.0, 5000.0
SPECS = [
    MetricSpec.numeric("load_ms", lower=LOWER, upper=UPPER, epsilon=1.0).with_events("median"),
    MetricSpec.histogram("crashes", (0, 1, 2, 5), epsilon=1.0).with_events("count"),
]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    device = Client("http://127.0.0.1:9", state_dir=tmp_path, metrics=SPECS, timeout=0.2)
    yield device
    device.close(timeout=0.1)


def test_a_numeric_median_bins_each_value_as_median_bin_does(client: Client) -> None:
    rng = random.Random(3)
    width = (UPPER - LOWER) / MEDIAN_BINS
    values = [LOWER - 1.0, LOWER, UPPER, UPPER + 7.0, 0, 812]  # clamped, ends, ints
    values += [LOWER + i * width for i in range(MEDIAN_BINS + 1)]  # every bin edge
    values += [rng.uniform(LOWER, UPPER) for _ in range(5000)]
    expected: dict[int, int] = {}
    for value in values:
        assert client.observe("load_ms", value)
        index = median_bin(float(value), LOWER, UPPER)
        expected[index] = expected.get(index, 0) + 1
    (state,) = [s for name, s in client._recorder._events.items() if name == "load_ms"]
    assert state.aggregate.bins == expected
    assert state.aggregate.n == len(values)


def test_events_on_the_system_clock_count_on_today(client: Client) -> None:
    before = int(time.time() // 86400)
    for _ in range(1000):
        assert client.event("crashes")
    state = client._recorder._events["crashes"]
    assert before <= state.day <= int(time.time() // 86400)  # a midnight may pass
    assert state.aggregate.n == 1000
    with pytest.raises(ValueError):
        client.observe("load_ms", float("nan"))
