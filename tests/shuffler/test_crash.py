"""Three real processes on loopback (SDK devices here, ``deniable shuffle``, ``deniable serve``)
on SQLite and PostgreSQL: both servers SIGKILLed at seeded random moments while devices record
and resend. Every report the shuffler acknowledged is stored exactly once by the collector or
still waits at the shuffler for a batch; none is lost or doubled; no batch below min_batch
reaches the collector."""

from __future__ import annotations

from pathlib import Path

import pytest

from deniable.client import MetricSpec
from testkit import DatabaseFactory, unique_name
from testkit.shuffle_run import run_devices
from testkit.shuffler_process import Pipeline

DEVICES = 12
PERIODS = 15
MIN_BATCH = 6


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_no_acknowledged_report_is_lost_or_doubled_across_kills(
    databases: DatabaseFactory, backend: str, tmp_path: Path
) -> None:
    specs = [
        MetricSpec.categorical(
            unique_name("crash"), ["a", "b", "c", "d"], epsilon=2.0, mechanism="krr"
        ),
        MetricSpec.boolean(unique_name("crash"), epsilon=1.0),
    ]
    pipeline = Pipeline(databases.new(backend), tmp_path, min_batch=MIN_BATCH).start(specs)
    try:
        result = run_devices(
            pipeline,
            specs,
            tmp_path,
            devices=DEVICES,
            periods=PERIODS,
            seed=29,
            kills=6,
            period_pause=0.1,
        )
    finally:
        pipeline.stop()
    assert result.recorded == DEVICES * PERIODS * len(specs)
    assert sorted(result.kills) == ["collector"] * 3 + ["shuffler"] * 3
    assert result.batched == 0
    assert result.stored + result.waiting == result.recorded, result  # none lost, none doubled
    assert result.counted == result.stored  # each stored report counted once
    assert result.max_per_period <= DEVICES  # one report per device per period
    assert result.batches and min(result.batches) >= MIN_BATCH, result.batches
    assert sum(result.batches) == result.stored
    assert result.stored >= result.recorded // 2  # most went through
