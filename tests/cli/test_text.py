"""The CLI for text metrics: ``deniable plan --text`` states the discovery floor (and the
reports a floor needs); ``deniable metrics create --type text`` is not needed to register one
(the API does); ``deniable estimate`` prints the strings found with intervals and the floor,
``--candidate`` scores listed strings, and options with no meaning for text are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from deniable.client import MetricSpec
from deniable.estimators.heavyhitters import floor
from testkit import ADMIN_TOKEN, RunningCollector, register, unique_name
from testkit.cli import run_cli


def test_plan_text_states_the_floor_per_batch_size_and_the_reports_a_floor_needs() -> None:
    result = run_cli(
        "plan",
        "--text",
        "--max-length",
        "8",
        "--epsilon",
        "4",
        "--floor",
        "0.01",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    by_n = {row["reports"]: row["t95"] for row in document["floors"]}
    assert abs(by_n[1_000_000] / 0.0059 - 1) < 0.1
    needed = document["reports_needed"]
    assert 300_000 < needed < 400_000
    table = run_cli("plan", "--text", "--max-length", "8", "--epsilon", "4", "--floor", "0.01")
    assert "0.59%" in table.stdout and f"{needed:,} reports" in table.stdout
    missing = run_cli("plan", "--text", "--epsilon", "4")
    assert missing.exit_code != 0 and "--max-length" in missing.output


def test_estimate_prints_the_strings_found_and_the_floor(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client, tmp_path: Path
) -> None:
    spec = register(admin, MetricSpec.text(unique_name("search"), max_length=4, epsilon=4))
    sketch = spec.text_randomizer
    today = collector.clock().date().isoformat()
    import uuid

    from deniable.client import SeededRandomness

    rng = SeededRandomness(11)
    reports = []
    for i in range(1600):
        value = "dark" if i % 2 else f"{i:04d}"
        reports.append(
            {
                "id": str(uuid.uuid4()),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": today,
                "payload": sketch.randomize(sketch.encode(value), 1 + (i // 2) % 4, rng),
            }
        )
    for start in range(0, len(reports), 1000):
        answer = uploader.post("/v1/reports", json={"reports": reports[start : start + 1000]})
        assert answer.status_code == 202, answer.text
    base = ("--collector", collector.url, "--token", ADMIN_TOKEN)
    result = run_cli(*base, "estimate", spec.name, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [row["value"] for row in document["strings"]] == ["dark"]
    stated = document["floor"]
    assert stated["t95"] == floor(sketch, 1600, collision=stated["collision_variance"]).t95
    table = run_cli(*base, "estimate", spec.name)
    assert "dark…" in table.stdout and "floor T95" in table.stdout
    scored = run_cli(*base, "estimate", spec.name, "--candidate", "dark", "--candidate", "nope")
    assert scored.exit_code == 0, scored.output
    assert "nope" in scored.stdout and "not detected" in scored.stdout
    series = run_cli(*base, "series", spec.name)
    assert series.exit_code == 0, series.output
    assert "one discovery per period" in series.stdout and "dark…" not in series.stdout
    assert f"{today}  1,600 reports" in series.stdout and "dark" in series.stdout
    shown = run_cli(*base, "metrics", "show", spec.name, "--format", "json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["floor"]["max_length"] == 4
    exported = tmp_path / "search.csv"
    written = run_cli(*base, "export", spec.name, "-o", str(exported))
    assert written.exit_code == 0, written.output
    lines = exported.read_text().splitlines()
    assert lines[0] == "id,metric,fingerprint,period,b,l,r" and len(lines) == 1601
    wrong = run_cli(*base, "estimate", spec.name, "--method", "mle")
    assert wrong.exit_code != 0 and "text metric" in wrong.output
    assert len(wrong.output.strip().splitlines()) == 1


READS = ("estimate", "series")
"""The documents of a metric, each of which carries its description and owner."""


def test_metrics_create_registers_a_text_metric_and_refuses_a_useless_floor(
    collector: RunningCollector,
) -> None:
    base = ("--collector", collector.url, "--token", ADMIN_TOKEN)
    name = unique_name("terms")
    create = ("metrics", "create", name, "--type", "text", "--max-length", "8", "--epsilon", "4")
    made = run_cli(*base, *create, "--description", "What people search for", "--owner", "web")
    assert made.exit_code == 0, made.output
    assert "registered" in made.stdout and "0.59%" in made.stdout
    with collector.client(ADMIN_TOKEN) as admin:
        about = admin.get(f"/v1/metrics/{name}").json()
        documents = [admin.get(f"/v1/metrics/{name}/{route}").json() for route in READS]
    for document in (about, *documents):
        assert (document["description"], document["owner"]) == ("What people search for", "web")
    unit = run_cli(*base, *create, "--unit", "ms")
    assert unit.exit_code != 0 and "--unit goes with" in unit.output
    weak = unique_name("urls")
    args = ("metrics", "create", weak, "--type", "text", "--max-length", "64", "--epsilon", "1")
    refused = run_cli(*base, *args)
    assert refused.exit_code != 0 and "not registered" in refused.output
    assert "discovery floor at 100,000" in refused.output
    accepted = run_cli(*base, *args, "--accept-weak", "--format", "json")
    assert accepted.exit_code == 0, accepted.output
    assert json.loads(accepted.stdout)["max_length"] == 64
    wrong = run_cli(
        *base, "metrics", "create", unique_name("t"), "--type", "text", "--epsilon", "1"
    )
    assert wrong.exit_code != 0 and "--max-length" in wrong.output
