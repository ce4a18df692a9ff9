"""`deniable demo`: a full round trip in under 30 s whose intervals hold the truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict

from click.testing import CliRunner
from deniable.cli.commands.demo import DEMO_TRUTH
from deniable.cli.main import cli
from deniable.client import MetricSpec, privacy_account

from tests.support import quantile_holds

SEED = 2026


def test_demo_finishes_in_time_and_every_truth_is_inside_its_interval() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
    started = time.monotonic()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "deniable.cli.main",
            "demo",
            "--seed",
            str(SEED),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert elapsed < 30, elapsed
    document = json.loads(out.stdout)
    assert document["clients"] == 20_000 and document["delivered"] == 4 * 20_000
    kinds = {m["spec"]["type"]: m for m in document["metrics"]}
    assert set(kinds) == {"boolean", "categorical", "numeric", "histogram"}
    assert all(m["all_inside"] for m in document["metrics"])
    load = kinds["numeric"]
    assert load["estimate"]["n"] == 20_000 and "estimates" not in load["estimate"]
    mean = load["estimate"]["mean"]
    assert mean["ci_low"] <= load["truth"] <= mean["ci_high"]
    buckets = kinds["histogram"]
    assert [q["q"] for q in buckets["estimate"]["quantiles"]] == [0.5, 0.9, 0.99]
    for entry in buckets["estimate"]["quantiles"]:
        assert quantile_holds(entry, buckets["truth"]["quantiles"][f"{entry['q']:g}"])
    specs = [MetricSpec.from_dict(m["spec"]) for m in document["metrics"]]
    assert document["privacy"]["total"] == asdict(privacy_account(specs).totals)
    for metric in (kinds["boolean"], kinds["categorical"]):
        estimate = metric["estimate"]
        assert estimate["n"] == 20_000
        assert estimate["simultaneous"] is True and estimate["confidence"] == 0.95
        truth = dict(
            zip(
                metric["spec"].get("categories") or ["false", "true"],
                DEMO_TRUTH[metric["spec"]["name"]],
                strict=True,
            )
        )
        assert metric["truth"] == truth
        for row in estimate["estimates"]:
            assert row["ci_low"] <= truth[row["category"]] <= row["ci_high"], (
                metric["spec"]["name"],
                row,
            )


def test_demo_table_prints_truth_beside_estimate() -> None:
    result = CliRunner().invoke(
        cli, ["demo", "--seed", "5", "--clients", "2000"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    rows = [ln for ln in result.stdout.splitlines() if ln.startswith("│")]
    assert len(rows) == 2 + 5 + 1 + 6 + 3
    assert "2,000 simulated devices sent 8,000 randomized reports" in result.stdout
    assert "(`deniable privacy` explains it and what lowers it)" in result.stdout
    assert all(("✓" in row) != ("✗" in row) for row in rows)
