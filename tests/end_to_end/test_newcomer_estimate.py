"""The estimate part of the newcomer session: a real collector, a k = 200 metric, the CLI.

Issue 14: at k = 200, `deniable estimate` showed 96 of 200 estimates outside their own
interval and three intervals [0.0%, 0.0%] where the true share was 0.19%. Every output
(table, JSON, CSV) must now show each point within its interval, and no interval that reads
as certainty.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from deniable.cli.main import cli
from deniable.client import MetricSpec
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    RunningCollector,
    collector_settings,
    make_reports,
    register,
)
from testkit.clock import TEST_NOW
from testkit.http_clients import authorized_client

K = 200
REPORTS = 3_100
TODAY = TEST_NOW.date().isoformat()
"""The test collectors' clock says it is this day."""
PERCENT = re.compile(r"(-?\d+(?:\.\d+)?)%")


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCollector]:
    """A real collector on a fresh SQLite file, holding REPORTS seeded oue reports of k = 200."""
    directory: Path = tmp_path_factory.mktemp("newcomer")
    running = RunningCollector(collector_settings(f"sqlite:///{directory}/collector.db")).start()
    spec = MetricSpec.categorical(
        "screen", [f"s{v:03d}" for v in range(K)], epsilon=1.0, mechanism="oue"
    )
    with authorized_client(running.url, ADMIN_TOKEN) as admin:
        register(admin, spec)
    truth = 1 / np.arange(1, K + 1)
    values = np.random.default_rng(14).choice(K, size=REPORTS, p=truth / truth.sum())
    reports = make_reports(spec, [int(v) for v in values], TODAY, seed=14)
    with authorized_client(running.url, INGEST_KEY) as uploader:
        for start in range(0, REPORTS, 1000):
            answer = uploader.post("/v1/reports", json={"reports": reports[start : start + 1000]})
            assert answer.status_code == 202, answer.text
    yield running
    running.stop()


def deniable(collector: RunningCollector, *args: str) -> str:
    """Run `deniable estimate screen ARGS` against the collector; its standard output."""
    result = CliRunner().invoke(
        cli,
        [
            *("--collector", collector.url, "--token", ADMIN_TOKEN, "estimate", "screen"),
            *("--start", TODAY, "--end", TODAY, *args),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def assert_shown_honestly(rows: list[dict]) -> None:
    """Every point within its interval, and no interval of zero width."""
    assert len(rows) == K
    for row in rows:
        assert row["ci_low"] <= row["frequency"] <= row["ci_high"], row
        assert row["ci_high"] > row["ci_low"], row


OPTIONS = [(), ("--method", "unbiased"), ("--per-category",), ("--method", "mle", "--per-category")]


@pytest.mark.parametrize("options", OPTIONS, ids=" ".join)
def test_json_and_csv_show_every_point_within_a_real_interval(
    collector: RunningCollector, options: tuple[str, ...]
) -> None:
    document = json.loads(deniable(collector, *options, "--format", "json"))
    assert document["n"] == REPORTS
    assert_shown_honestly(document["estimates"])
    assert document["margin_exceeds_most_shares"]  # ±13 points against shares under 1%
    table = list(csv.DictReader(io.StringIO(deniable(collector, *options, "--format", "csv"))))
    rows = [{key: float(row[key]) for key in ("frequency", "ci_low", "ci_high")} for row in table]
    assert_shown_honestly(rows)
    assert {(row["metric"], row["reports"]) for row in table} == {("screen", str(REPORTS))}


@pytest.mark.parametrize("options", OPTIONS, ids=" ".join)
def test_the_table_shows_every_point_within_a_real_interval(
    collector: RunningCollector, options: tuple[str, ...]
) -> None:
    out = deniable(collector, *options)
    lines = [line for line in out.splitlines() if line.startswith("│")]
    assert len(lines) == K
    for line in lines:
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        point = float(PERCENT.search(cells[1]).group(1))
        low, high = (float(v) for v in PERCENT.findall(cells[2]))
        assert low <= point <= high and low < high, line
    if "--per-category" not in options:
        assert "simultaneous intervals" in out
    assert "exceeds" in out  # the margin's note under the table
    if options == ("--method", "unbiased"):
        assert "▼" in out and "below 0" in out  # the marker and its legend
