"""`deniable estimate` of a set metric against a real collector (`deniable serve` on loopback):
the JSON is the API's document, and the table says what a set's shares are (docs/STATS.md
section 16)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deniable.cli.localcollector import LocalCollector
from deniable.client import MetricSpec
from deniable.client.randomness import SeededRandomness
from deniable.client.sampling import randomized_reports
from deniable.sources.reportfile import SPEC_METADATA_KEY, frame_of
from testkit.cli import run_cli as run

INGEST_KEY = "cli-set-ingest-key"
FEATURES = ["search", "share", "export"]
GROUPS = [({"search", "share"}, 900), ({"search"}, 600), (set(), 300)]
TRUTH = {"search": 1500 / 1800, "share": 900 / 1800, "export": 0.0}


@pytest.fixture(scope="module")
def collector() -> Iterator[LocalCollector]:
    with LocalCollector(ingest_key=INGEST_KEY) as running:
        yield running


@pytest.fixture(scope="module")
def features(collector: LocalCollector) -> MetricSpec:
    """A set metric (L = 2) registered over HTTP and reported by 1,800 devices today."""
    spec = MetricSpec.set_of("features", FEATURES, max_items=2, epsilon=3.0)
    headers = {"Authorization": f"Bearer {collector.token}"}
    response = httpx.post(
        f"{collector.url}/v1/metrics", json=spec.fingerprint_fields(), headers=headers
    )
    assert response.status_code == 201, response.text
    now = dt.datetime.now(dt.UTC)
    for seed, (items, devices) in enumerate(GROUPS):
        body = randomized_reports(
            spec, items, devices, randomness=SeededRandomness(seed), clock=lambda: now
        )
        answer = httpx.post(
            f"{collector.url}/v1/reports",
            content=body,
            headers={"Authorization": f"Bearer {INGEST_KEY}", "Content-Type": "application/json"},
        )
        assert answer.status_code == 202, answer.text
    return spec


def test_the_json_is_the_api_document_and_covers_the_truth(
    collector: LocalCollector, features: MetricSpec
) -> None:
    admin = ("--collector", collector.url, "--token", collector.token)
    day = dt.datetime.now(dt.UTC).date().isoformat()
    args = ("estimate", "features", "--start", day, "--end", day, "--confidence", "0.9999")
    result = run(*admin, *args, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    direct = httpx.get(
        f"{collector.url}/v1/metrics/features/estimate",
        params={"start": day, "end": day, "confidence": 0.9999, "simultaneous": "true"},
        headers={"Authorization": f"Bearer {collector.token}"},
    ).json()
    assert document == direct
    assert (document["n"], document["max_items"], document["method"]) == (1800, 2, "unbiased")
    for row in document["estimates"]:
        assert row["ci_low"] <= TRUTH[row["category"]] <= row["ci_high"], row


def test_the_table_says_what_a_sets_shares_are(
    collector: LocalCollector, features: MetricSpec
) -> None:
    admin = ("--collector", collector.url, "--token", collector.token)
    result = run(*admin, "estimate", "features")
    assert result.exit_code == 0, result.output
    assert "share of devices holding each category" in result.stdout
    assert "padding-and-sampling through" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == len(FEATURES)
    refused = run(*admin, "estimate", "features", "--method", "consistent")
    assert refused.exit_code == 1 and "one estimator, unbiased" in refused.stderr


def test_metrics_create_show_and_list_a_set_metric(collector: LocalCollector) -> None:
    admin = ("--collector", collector.url, "--token", collector.token)
    create = ("metrics", "create", "tabs", "--categories", "home,feed,inbox,profile")
    made = run(*admin, *create, "--max-items", "2", "--epsilon", "2", "--format", "json")
    assert made.exit_code == 0, made.output
    stored = json.loads(made.stdout)
    assert (stored["type"], stored["max_items"], stored["categories"][0]) == ("set", 2, "home")
    margins = stored["expected_margin"]["by_reports"]
    assert all(0 < row["margin"] <= row["simultaneous_margin"] for row in margins)
    shown = run(*admin, "metrics", "show", "tabs")
    assert shown.exit_code == 0, shown.output
    assert "max_items" in shown.stdout and "sampled down" in shown.stdout
    listed = run(*admin, "metrics", "list")
    assert listed.exit_code == 0 and "tabs" in listed.stdout, listed.output
    wrong = run(*admin, "metrics", "create", "x", "--boolean", "--max-items", "2", "--epsilon", "1")
    assert wrong.exit_code == 2 and "--max-items goes with --categories" in wrong.output


def test_an_exported_file_is_estimated_offline(tmp_path: Path) -> None:
    """`--from-file` of a set metric's export: the estimate and the series, as the API's."""
    spec = MetricSpec.set_of("offline_features", FEATURES, max_items=2, epsilon=3.0)
    rng = SeededRandomness(7)
    days = ["2026-11-20", "2026-11-21"]
    rows = [
        (str(uuid.uuid4()), day, spec.set_randomizer.randomize(spec.items_of(items), rng))
        for day in days
        for items, devices in GROUPS
        for _ in range(devices)
    ]
    path = tmp_path / "features.parquet"
    frame_of(spec, rows).write_parquet(
        path, metadata={SPEC_METADATA_KEY: json.dumps(spec.to_dict())}
    )
    args = ("estimate", "offline_features", "--from-file", str(path), "--confidence", "0.9999")
    result = run(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["n"], document["periods"], document["max_items"]) == (3600, 2, 2)
    for row in document["estimates"]:
        assert row["ci_low"] <= TRUTH[row["category"]] <= row["ci_high"], row
    table = run(*args)
    assert "share of devices holding each category" in table.stdout
    series = run("series", "offline_features", "--from-file", str(path), "--format", "json")
    assert series.exit_code == 0, series.output
    assert [p["n"] for p in json.loads(series.stdout)["series"]] == [1800, 1800]
    for fmt in ("table", "csv"):
        printed = run("series", "offline_features", "--from-file", str(path), "--format", fmt)
        assert printed.exit_code == 0 and "search" in printed.stdout, printed.output


def test_simulate_refuses_a_set_metric_in_one_line(
    collector: LocalCollector, features: MetricSpec
) -> None:
    admin = ("--collector", collector.url, "--token", collector.token)
    result = run(*admin, "simulate", "--metric", "features", "--clients", "10")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: features is a set metric")
