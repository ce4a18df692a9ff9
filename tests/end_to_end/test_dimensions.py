"""End to end for dimensions: SDK devices with a public context deliver to a real collector
(SQLite and PostgreSQL); the estimate by platform covers each slice's truth with intervals
simultaneous over every slice and category, a slice under the minimum shows no number, and
resending a device's reports changes nothing.

Seeded devices, 99.99% intervals (a miss has nominal probability 1e-4 per test).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from deniable.client import Client, MetricSpec, SeededRandomness
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    RunningCollector,
    loopback_url,
    make_reports,
    register,
    spare_port,
    unique_name,
)
from testkit.cli import run_cli
from testkit.documents import numbers_in

PLATFORMS = {"platform": ["ios", "android", "web"]}
CONFIDENCE = 0.9999
SLICES = {"ios": (600, 0.25), "android": (400, 0.7), "web": (40, 0.5)}
"""platform: (devices' reports, true share of dark mode); web is under the minimum (100)."""


def deliver(
    collector: RunningCollector,
    spec: MetricSpec,
    platform: str,
    values: list[Any],
    state: Path,
    seed: int,
    copy: Path | None = None,
    days_ago: int = 0,
) -> None:
    """Record ``values`` on one device whose context says ``platform``, offline, ``days_ago``
    days before the collector's today, and deliver (keeping a copy of its undelivered state at
    ``copy``, if given)."""
    now = collector.clock() - dt.timedelta(days=days_ago)
    offline = Client(
        loopback_url(spare_port()),
        state_dir=state,
        metrics=[spec],
        context={"platform": platform},
        max_reports_per_period=len(values),
        lifetime_epsilon=None,
        clock=lambda: now,
        randomness=SeededRandomness(seed),
        batch_size=500,
    )
    for value in values:
        assert offline.record(spec.name, value)
    offline.close(timeout=0.0)
    if copy is not None:
        shutil.copytree(state, copy)
    device = Client(collector.url, state_dir=state, metrics=[spec], ingest_key=INGEST_KEY)
    assert device.flush(timeout=60)
    device.close()


def breakdown(admin: httpx.Client, name: str, **params: Any) -> dict[str, Any]:
    response = admin.get(f"/v1/metrics/{name}/estimate", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_each_slice_covers_its_truth_and_small_slices_show_no_number(
    collector: RunningCollector, admin: httpx.Client, tmp_path: Path
) -> None:
    spec = register(
        admin, MetricSpec.boolean(unique_name("dark"), epsilon=2.0, dimensions=PLATFORMS)
    )
    rng = np.random.default_rng(5)
    copy = tmp_path / "resent"
    truths = {}
    for seed, (platform, (n, share)) in enumerate(SLICES.items()):
        values = (rng.random(n) < share).tolist()
        truths[platform] = sum(values) / n
        keep = copy if platform == "ios" else None
        deliver(collector, spec, platform, values, tmp_path / platform, seed, keep)
    today = collector.clock().date().isoformat()
    params = {"by": "platform", "confidence": CONFIDENCE, "start": today, "end": today}
    result = breakdown(admin, spec.name, **params)
    assert (result["by"], result["min_slice_reports"]) == (["platform"], 100)
    assert result["slice_confidence"] == 1 - (1 - CONFIDENCE) / 2
    rows = {row["values"]["platform"]: row for row in result["slices"]}
    assert list(rows) == ["ios", "android", "web", "other"]
    for platform in ("ios", "android"):
        shown = rows[platform]["estimate"]
        assert not rows[platform]["suppressed"]
        assert shown["n"] == SLICES[platform][0]
        true_row = shown["estimates"][1]
        assert true_row["category"] == "true"
        assert true_row["ci_low"] <= truths[platform] <= true_row["ci_high"], (platform, shown)
    for platform in ("web", "other"):
        assert rows[platform]["suppressed"]
        assert rows[platform]["note"] == "suppressed, fewer than 100 reports"
        assert numbers_in(rows[platform]) == []
    # every report sent again: counted once, the breakdown unchanged
    device = Client(collector.url, state_dir=copy, metrics=[spec], ingest_key=INGEST_KEY)
    assert device.flush(timeout=60)
    device.close()
    assert device.stats.duplicates == SLICES["ios"][0]
    assert breakdown(admin, spec.name, **params) == result
    compared = breakdown(admin, spec.name, compare="ios,android", **params)["comparison"]
    (dark,) = [row for row in compared["rows"] if row["category"] == "true"]
    assert dark["ci_low"] <= truths["ios"] - truths["android"] <= dark["ci_high"], dark
    assert dark["verdict"] == "lower"
    suppressed = admin.get(
        f"/v1/metrics/{spec.name}/estimate", params={**params, "compare": "ios,web"}
    )
    assert suppressed.status_code == 422 and "suppressed" in suppressed.text, suppressed.text
    assert not any(char.isdigit() for char in suppressed.json()["detail"].replace("100", ""))
    cli = ("--collector", collector.url, "--token", ADMIN_TOKEN, "estimate", spec.name)
    cli += ("--by", "platform", "--start", today, "--end", today)
    printed = run_cli(*cli, "--confidence", str(CONFIDENCE), "--format", "json")
    assert printed.exit_code == 0 and json.loads(printed.stdout) == result, printed.output
    table = run_cli(*cli)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    for platform in ("web", "other"):
        line = f"platform={platform}: suppressed, fewer than 100 reports"
        assert line in lines, table.stdout
        after = lines[lines.index(line) + 1 :]
        assert not after or not after[0].strip(), table.stdout
    assert "platform=ios" in lines and "platform=android" in lines, table.stdout
    filtered = breakdown(admin, spec.name, where="platform:android", start=today, end=today)
    assert filtered["where"] == {"platform": "android"}
    assert filtered["slices"][0]["estimate"]["n"] == SLICES["android"][0]


def test_a_numeric_metric_breaks_down_into_slice_means(
    collector: RunningCollector, admin: httpx.Client, tmp_path: Path
) -> None:
    spec = register(
        admin,
        MetricSpec.numeric(
            unique_name("load"), lower=0, upper=100, epsilon=2.0, dimensions=PLATFORMS
        ),
    )
    rng = np.random.default_rng(6)
    means = {"ios": 20.0, "android": 70.0}
    truths = {}
    for seed, (platform, mean) in enumerate(means.items()):
        values = np.clip(rng.normal(mean, 10, 500), 0, 100).tolist()
        truths[platform] = float(np.mean(values))
        deliver(collector, spec, platform, values, tmp_path / platform, seed + 10)
    result = breakdown(admin, spec.name, by="platform", confidence=CONFIDENCE)
    rows = {row["values"]["platform"]: row for row in result["slices"]}
    for platform, truth in truths.items():
        mean = rows[platform]["estimate"]["mean"]
        assert mean["ci_low"] <= truth <= mean["ci_high"], (platform, mean)
    assert rows["web"]["suppressed"] and rows["web"]["estimate"] is None


def test_bad_breakdowns_and_dims_are_refused_naming_the_problem(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin, MetricSpec.boolean(unique_name("dark"), epsilon=1.0, dimensions=PLATFORMS)
    )
    url = f"/v1/metrics/{spec.name}/estimate"
    for params, problem in (
        ({"by": "country"}, "has no dimension 'country'"),
        ({"where": "platform:tizen"}, "listed values or 'other'"),
        ({"where": "platform"}, "is not name:value"),
    ):
        response = admin.get(url, params=params)
        assert response.status_code == 422 and problem in response.text, response.text
    wide = admin.post(
        "/v1/metrics",
        json={
            "name": unique_name("wide"),
            "type": "boolean",
            "epsilon": 1.0,
            "dimensions": {"a": [str(i) for i in range(30)], "b": [str(i) for i in range(40)]},
        },
    )
    assert wide.status_code == 422 and "1,271 cells" in wide.text, wide.text
    period = collector.clock().date().isoformat()
    good, missing, unlisted = make_reports(spec, [1, 0, 1], period, seed=3)
    good["dims"] = {"platform": "other"}
    unlisted["dims"] = {"platform": "tizen"}
    response = uploader.post("/v1/reports", json={"reports": [good, missing, unlisted]})
    assert response.status_code == 422, response.text
    problems = {error["index"]: error["reason"] for error in response.json()["detail"]}
    assert set(problems) == {1, 2}, problems
    assert "need dims" in problems[1] and "listed values" in problems[2], problems


def test_a_period_comparison_finds_the_slice_that_changed_and_shows_no_number_for_small_ones(
    collector: RunningCollector, admin: httpx.Client, tmp_path: Path
) -> None:
    """Yesterday then today, per platform: ios's dark mode rose from 20% to 70%, android's
    stayed at 60%, web is under the minimum. Each slice's difference covers its truth."""
    spec = register(
        admin, MetricSpec.boolean(unique_name("dark"), epsilon=2.0, dimensions=PLATFORMS)
    )
    rng = np.random.default_rng(7)
    plan = {"ios": (500, 0.2, 0.7), "android": (400, 0.6, 0.6), "web": (40, 0.5, 0.5)}
    truths: dict[str, float] = {}
    seed = 20
    for platform, (n, before, after) in plan.items():
        shares = []
        for days_ago, share in ((1, before), (0, after)):
            values = (rng.random(n) < share).tolist()
            shares.append(sum(values) / n)
            state = tmp_path / f"{platform}-{days_ago}"
            deliver(collector, spec, platform, values, state, seed, days_ago=days_ago)
            seed += 1
        truths[platform] = shares[1] - shares[0]
    today = collector.clock().date()
    yesterday = (today - dt.timedelta(days=1)).isoformat()
    params = {"start": today.isoformat(), "end": today.isoformat(), "confidence": CONFIDENCE}
    result = breakdown(admin, spec.name, by="platform", compare_to="previous", **params)
    assert (result["baseline_start"], result["baseline_end"]) == (yesterday, yesterday)
    assert result["row_confidence"] == pytest.approx(1 - (1 - CONFIDENCE) / 4)
    assert "whatever devices report in both windows" in result["dependence"]
    rows = {row["values"]["platform"]: row for row in result["slices"]}
    for platform in ("ios", "android"):
        assert (rows[platform]["n"], rows[platform]["baseline_n"]) == (plan[platform][0],) * 2
        (dark,) = [row for row in rows[platform]["rows"] if row["category"] == "true"]
        assert dark["ci_low"] <= truths[platform] <= dark["ci_high"], (platform, dark)
        assert dark["difference"] == pytest.approx(dark["current"] - dark["baseline"])
    assert [r["verdict"] for r in rows["ios"]["rows"]] == ["lower", "higher"]
    assert rows["android"]["rows"][1]["verdict"] == "no detectable change at 99.99%"
    for platform in ("web", "other"):
        assert rows[platform]["suppressed"], rows[platform]
        assert rows[platform]["note"] == "suppressed, fewer than 100 reports in a window"
        assert numbers_in(rows[platform]) == []
    whole = breakdown(admin, spec.name, compare_to=f"{yesterday}..{yesterday}", **params)
    (everyone,) = whole["slices"]
    assert everyone["values"] == {} and everyone["n"] == sum(n for n, _, _ in plan.values())
    cli = ("--collector", collector.url, "--token", ADMIN_TOKEN, "estimate", spec.name)
    cli += ("--by", "platform", "--start", params["start"], "--end", params["end"])
    cli += ("--compare-to", "previous", "--confidence", str(CONFIDENCE))
    printed = run_cli(*cli, "--format", "json")
    assert printed.exit_code == 0 and json.loads(printed.stdout) == result, printed.output
    table = run_cli(*cli)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert "platform=web: suppressed, fewer than 100 reports in a window" in lines, table.stdout
    assert "higher" in table.stdout and "no detectable change at 99.99%" in table.stdout
    url = f"/v1/metrics/{spec.name}/estimate"
    for query, problem in (
        ({"compare_to": f"{yesterday}..{params['end']}"}, "shares periods with the range"),
        ({"compare_to": "last week"}, "give previous, or a window START..END"),
        ({"compare_to": "previous", "compare": "ios,android", "by": "platform"}, "leave out"),
    ):
        response = admin.get(url, params={**params, **query})
        assert response.status_code == 422 and problem in response.text, response.text
