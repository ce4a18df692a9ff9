"""End to end for text metrics with dimensions: SDK devices with a public context record strings
offline, deliver to a real collector (SQLite and PostgreSQL), and the estimate by platform
decodes each slice's heavy hitters from its own summed cell counts.

As in tests/end_to_end/test_text_population.py, one Client stands for a batch of PER_CLIENT
devices (its budget raised, memoization off) and pins one prefix level for all of them, so
each slice is split over many Clients. Seeds are fixed: the test is deterministic.

What must hold, per shown slice: every string whose share of the slice is at least the slice's
stated floor T95 is returned, none returned is absent from the slice, and the returned
intervals cover the slice's true shares; the slice under the minimum shows no number (API,
CLI table, CSV); resending reports changes nothing; the whole population's estimate is the sum
of the cells.
"""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
from pathlib import Path
from typing import Any

import httpx

from deniable.client import Client, MetricSpec, SeededRandomness
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    RunningCollector,
    loopback_url,
    register,
    spare_port,
    unique_name,
)
from testkit.cli import run_cli
from testkit.documents import numbers_in

PER_CLIENT = 40
MAX_LENGTH = 3
PLATFORMS = {"platform": ["ios", "android", "web"]}
SLICES = {
    "ios": (1_200, {"cat": 0.40, "dog": 0.20}),
    "android": (1_000, {"sun": 0.45, "cat": 0.10}),
    "web": (60, {"cat": 0.5}),
}
"""platform: (devices, share of each common string; the rest hold unique strings); web is
under the minimum of 100 reports."""


def population(devices: int, common: dict[str, float], rng: random.Random) -> list[str]:
    """``devices`` strings: each common one at its share, the rest distinct random ones."""
    values = [value for value, share in common.items() for _ in range(round(devices * share))]
    letters = "abcdefghijklmnopqrstuvwxyz"
    unique: set[str] = set()
    while len(values) + len(unique) < devices:
        word = "".join(rng.choice(letters) for _ in range(MAX_LENGTH))
        if word not in common:
            unique.add(word)
    values += sorted(unique)
    rng.shuffle(values)
    return values


def record(spec: MetricSpec, platform: str, values: list[str], root: Path, now: Any) -> list[Path]:
    """Record ``values`` on offline Clients of PER_CLIENT devices on ``platform``; their state."""
    folders = []
    for start in range(0, len(values), PER_CLIENT):
        folder = root / f"{platform}{start // PER_CLIENT:03d}"
        client = Client(
            loopback_url(spare_port()),
            state_dir=folder,
            metrics=[spec],
            context={"platform": platform},
            max_reports_per_period=PER_CLIENT,
            lifetime_epsilon=None,
            clock=lambda: now,
            randomness=SeededRandomness(10_000 * list(SLICES).index(platform) + start),
        )
        for value in values[start : start + PER_CLIENT]:
            assert client.record(spec.name, value)
        client.close(timeout=0.0)
        folders.append(folder)
    return folders


def deliver(collector: RunningCollector, spec: MetricSpec, folders: list[Path]) -> int:
    """Deliver every state dir; the duplicates the collector reported."""
    duplicates = 0
    for folder in folders:
        device = Client(collector.url, state_dir=folder, metrics=[spec], ingest_key=INGEST_KEY)
        assert device.flush(timeout=60)
        device.close()
        duplicates += device.stats.duplicates
    return duplicates


def test_each_slice_finds_its_strings_and_the_small_slice_shows_no_number(
    collector: RunningCollector, admin: httpx.Client, tmp_path: Path
) -> None:
    spec = register(
        admin,
        MetricSpec.text(
            unique_name("query"), max_length=MAX_LENGTH, epsilon=4, dimensions=PLATFORMS
        ),
    )
    now = collector.clock()
    rng = random.Random(27)
    truths: dict[str, list[str]] = {}
    folders: list[Path] = []
    for platform, (devices, common) in SLICES.items():
        truths[platform] = population(devices, common, rng)
        folders += record(spec, platform, truths[platform], tmp_path / "devices", now)
    copies = [folder.with_name(folder.name + "-copy") for folder in folders[:2]]
    for folder, copy in zip(folders, copies, strict=False):
        shutil.copytree(folder, copy)
    assert deliver(collector, spec, folders) == 0
    today = now.date().isoformat()
    params = {"by": "platform", "end": today}
    answer = admin.get(f"/v1/metrics/{spec.name}/estimate", params=params)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert (result["by"], result["min_slice_reports"]) == (["platform"], 100)
    assert (result["start"], result["end"]) == (today, today)
    assert result["slice_confidence"] == 1 - 0.05 / 2
    rows = {row["values"]["platform"]: row for row in result["slices"]}
    assert list(rows) == ["ios", "android", "web", "other"]
    for platform in ("ios", "android"):
        shown = rows[platform]["estimate"]
        assert not rows[platform]["suppressed"] and shown["mode"] == "discovery"
        assert shown["n"] == SLICES[platform][0] and not shown["cap_bound"]
        assert shown["confidence"] == result["slice_confidence"]
        values = truths[platform]
        truth = {value: values.count(value) / len(values) for value in set(values)}
        t95 = shown["floor"]["t95"]
        returned = {row["value"]: row for row in shown["strings"]}
        assert set(returned) <= set(truth), (platform, set(returned) - set(truth))
        above = {value for value, share in truth.items() if share >= t95}
        assert above and above <= set(returned), (platform, above, set(returned), t95)
        for value, row in returned.items():
            assert row["ci_low"] <= truth[value] <= row["ci_high"], (platform, value, row)
    assert "dog" not in {row["value"] for row in rows["android"]["estimate"]["strings"]}
    for platform in ("web", "other"):
        assert rows[platform]["suppressed"] and rows[platform]["estimate"] is None
        assert rows[platform]["note"] == "suppressed, fewer than 100 reports"
        assert numbers_in(rows[platform]) == []

    assert deliver(collector, spec, copies) == 2 * PER_CLIENT  # every one a resend
    again = admin.get(f"/v1/metrics/{spec.name}/estimate", params=params)
    assert again.json() == result
    whole = admin.get(f"/v1/metrics/{spec.name}/estimate", params={"end": today}).json()
    assert whole["n"] == sum(devices for devices, _ in SLICES.values())
    assert {"cat", "sun"} <= {row["value"] for row in whole["strings"]}

    filtered = admin.get(
        f"/v1/metrics/{spec.name}/estimate", params={"where": "platform:ios", "end": today}
    ).json()
    (only,) = filtered["slices"]
    assert filtered["where"] == {"platform": "ios"} and only["estimate"]["n"] == 1_200
    assert only["estimate"]["floor"]["t95"] < rows["ios"]["estimate"]["floor"]["t95"]
    scored = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={**params, "candidates": ["dog", "sun"]},
    ).json()
    ios = {row["value"]: row for row in scored["slices"][0]["estimate"]["strings"]}
    assert ios["dog"]["detected"] and not ios["sun"]["detected"]

    cli = ("--collector", collector.url, "--token", ADMIN_TOKEN, "estimate", spec.name)
    cli += ("--by", "platform", "--end", today)
    printed = run_cli(*cli, "--format", "json")
    assert printed.exit_code == 0 and json.loads(printed.stdout) == result, printed.output
    table = run_cli(*cli)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    for platform in ("web", "other"):
        line = f"platform={platform}: suppressed, fewer than 100 reports"
        assert line in lines, table.stdout
        after = lines[lines.index(line) + 1 :]
        assert not after or not after[0].strip(), table.stdout
    assert "platform=ios" in lines and "cat" in table.stdout, table.stdout
    written = run_cli(*cli, "--format", "csv")
    assert written.exit_code == 0, written.output
    csv_rows = list(csv.DictReader(io.StringIO(written.stdout)))
    assert {row["value"] for row in csv_rows if row["by.platform"] == "ios"} >= {"cat", "dog"}
    (web,) = [row for row in csv_rows if row["by.platform"] == "web"]
    assert web["note"] == "suppressed, fewer than 100 reports"
    numbers = (
        "slice_confidence",
        "reports",
        "floor_t95",
        "share",
        "ci_low",
        "ci_high",
        "level_reports",
    )
    assert all(web[key] == "" for key in numbers), web


def test_text_breakdowns_refuse_what_they_cannot_answer(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    spec = register(
        admin, MetricSpec.text(unique_name("query"), max_length=4, epsilon=4, dimensions=PLATFORMS)
    )
    today = collector.clock().date().isoformat()
    url = f"/v1/metrics/{spec.name}/estimate"
    for params, problem in (
        ({"by": "platform", "start": "2026-01-01", "end": today}, "covers one period"),
        ({"by": "platform", "compare": "ios,android"}, "compare is for shares and means"),
        ({"by": "country"}, "has no dimension 'country'"),
        ({"by": "platform", "method": "consistent"}, "method has no meaning"),
    ):
        answer = admin.get(url, params=params)
        assert answer.status_code == 422 and problem in answer.text, (params, answer.text)
    series = admin.get(f"/v1/metrics/{spec.name}/series", params={"by": "platform"})
    assert series.status_code == 422 and "not built" in series.text
    refused = admin.post(
        "/v1/metrics",
        json={
            "name": unique_name("wide"),
            "type": "text",
            "max_length": 8,
            "epsilon": 4,
            "dimensions": {"a": ["x", "y", "z"], "b": ["p", "q", "r"]},
        },
    )
    assert refused.status_code == 422 and "2,000,000 counts" in refused.text, refused.text
