"""`deniable estimate --from-archive` of a set metric, on every oracle: its reports archived
and dropped, then re-analysed from Parquet on DuckDB, give the collector's online shares of
devices to 1e-12 (as tests/cli/test_from_archive.py checks for the other kinds)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest

from deniable.client import MetricSpec, SeededRandomness
from deniable.collector import migrate
from deniable.collector.storage import count_reports, open_database
from deniable.collector.storage.archive import Archive
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import register_spec
from deniable.collector.storage.retention import retain
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from testkit import ADMIN_TOKEN, DatabaseFactory, RunningCollector, collector_settings
from testkit.cli import run_cli
from tests.cli.test_from_archive import assert_same

PERIODS = ["2026-06-01", "2026-06-02"]
SETS = [(0, 1), (0,), (), (2, 3), (0, 1, 2, 3)]
"""The sets devices hold in turn (the last above L = 3)."""


@pytest.mark.parametrize("oracle", ["krr", "oue", "olh"])
def test_the_archive_gives_the_online_shares(
    databases: DatabaseFactory, tmp_path: Path, oracle: str
) -> None:
    spec = MetricSpec.set_of(
        f"arch_set_{oracle}", ["a", "b", "c", "d"], max_items=3, epsilon=2.0, mechanism=oracle
    )
    url = databases.new("sqlite")
    migrate(url)
    database = open_database(url)
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        for p, period in enumerate(PERIODS):
            rng = SeededRandomness(11 + p)
            batch = [
                ValidReport(
                    str(uuid.uuid4()),
                    spec.name,
                    period,
                    spec.set_randomizer.randomize(SETS[i % len(SETS)], rng),
                )
                for i in range(600)
            ]
            store_batches(database, [prepare_batch(batch, {spec.name: spec}, dt.date(2026, 6, 2))])
        server = RunningCollector(collector_settings(url)).start()
        try:
            with server.client(ADMIN_TOKEN) as admin:
                bounds = {"start": PERIODS[0], "end": PERIODS[-1]}
                response = admin.get(f"/v1/metrics/{spec.name}/estimate", params=bounds)
                assert response.status_code == 200, response.text
                online = response.json()
        finally:
            server.stop()
        retain(database, [spec], dt.date(2026, 7, 1), archive=Archive(str(tmp_path)))
        assert count_reports(database, spec.name, start=None, end=None) == 0
    finally:
        database.dispose()
    args = ("estimate", spec.name, "--start", PERIODS[0], "--end", PERIODS[-1])
    result = run_cli(*args, "--from-archive", str(tmp_path), "--format", "json")
    assert result.exit_code == 0, result.output
    offline = json.loads(result.stdout)
    assert offline["max_items"] == 3 and offline["n"] == 1200
    assert_same(online, offline)
