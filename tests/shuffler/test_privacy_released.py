"""The privacy account reads what the shuffler released: a real collector and a real shuffler
(processes on loopback) carry SDK devices' reports, then ``GET /v1/privacy`` and
``deniable privacy`` show source ``released`` with the batches the collector recorded and, per
metric, the accountant's central eps for the smallest of them."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from click.testing import CliRunner

from deniable.cli.main import cli
from deniable.client import MetricSpec
from deniable.collector.storage import open_database, read_batches
from deniable.estimators.shuffling import central_guarantee
from testkit import ADMIN_TOKEN, unique_name
from testkit.shuffle_run import run_devices
from testkit.shuffler_process import Pipeline

DELTA = 0.1
"""The account's delta here: large enough that batches of a few devices are amplified."""


def test_the_account_shows_the_released_batches(tmp_path: Path) -> None:
    # k = 3 at eps 2: at the few devices of a test no valid bound amplifies at delta 1e-6 (an
    # exact pair of batches of 20 already needs 1.9999: docs/STATS.md section 14), so the
    # account is asked at delta 0.1, where a batch of 4 gives 1.80 (central eps < local)
    spec = MetricSpec.categorical(unique_name("acct"), ["a", "b", "c"], epsilon=2.0)
    url = f"sqlite:///{tmp_path}/collector.db"
    pipeline = Pipeline(url, tmp_path, min_batch=4).start([spec])
    try:
        result = run_devices(pipeline, [spec], tmp_path, devices=8, periods=2, seed=11)
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        answer = httpx.get(
            pipeline.collector.url + "/v1/privacy",
            params={"shuffle_delta": DELTA},
            headers=headers,
            trust_env=False,
            timeout=60,  # httpx's 5 s default is short for a loaded machine
        )
        cli_run = CliRunner().invoke(
            cli,
            [
                "--collector",
                pipeline.collector.url,
                "--token",
                ADMIN_TOKEN,
                "privacy",
                "--shuffle-delta",
                str(DELTA),
                "--format",
                "json",
            ],
        )
        table_run = CliRunner().invoke(
            cli,
            [
                *("--collector", pipeline.collector.url, "--token", ADMIN_TOKEN),
                *("privacy", "--shuffle-delta", str(DELTA)),
            ],
        )
    finally:
        pipeline.stop()
    assert result.batches and result.stored == sum(
        result.batches
    )  # how many: the shuffler's timing
    database = open_database(url)
    try:
        stored = read_batches(database, spec.name)
    finally:
        database.dispose()

    assert answer.status_code == 200, answer.text
    assert cli_run.exit_code == 0, cli_run.output
    for shuffled in (answer.json()["shuffled"], json.loads(cli_run.stdout)["shuffled"]):
        assert shuffled["source"] == "released"
        assert shuffled["batch_count"] == len(stored)
        assert [(r["batch"], r["n"]) for r in shuffled["batches"]] == [
            (b.batch, b.n) for b in stored
        ]
        for row in shuffled["batches"]:
            expected = central_guarantee(spec.randomizer, row["n"], DELTA)
            assert row["central_epsilon"] == expected.epsilon < spec.epsilon
            assert row["local_epsilon"] == spec.epsilon
        (weakest,) = shuffled["metrics"]
        smallest = min(b.n for b in stored)
        assert weakest["smallest_batch"] == smallest >= 4
        expected = central_guarantee(spec.randomizer, smallest, DELTA)
        assert weakest["central_epsilon"] == expected.epsilon
    assert table_run.exit_code == 0, table_run.output
    assert "through a shuffler" in table_run.output
