"""The `deniable` command with numeric and histogram metrics against a real collector
(`LocalCollector`, real HTTP): create, simulate, estimate (table, JSON, CSV, offline from an
export), series, plan, and one-line errors for bad input.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from deniable.cli.localcollector import LocalCollector
from testkit.cli import run_cli as run
from testkit.cli import simulated_truths
from testkit.metrics import quantile_holds

DEVICES = 1500
EDGES = "0,100,250,500,1000,2000,5000"


def one_line_error(result: click.testing.Result) -> str:
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.output + result.stderr
    return lines[-1]


@pytest.fixture(scope="module")
def collector() -> Iterator[LocalCollector]:
    with LocalCollector() as running:
        yield running


@pytest.fixture(scope="module")
def truth(collector: LocalCollector) -> dict[str, Any]:
    """load_ms (numeric) and load_hist (histogram), created and simulated through the CLI."""
    admin = ("--collector", collector.url, "--token", collector.token)
    made = run(
        *admin,
        "metrics",
        "create",
        "load_ms",
        "--type",
        "numeric",
        "--lower",
        "0",
        "--upper",
        "5000",
        "--epsilon",
        "2",
    )
    assert made.exit_code == 0, made.output
    assert "±" in made.stdout and "registered load_ms" in made.stdout
    made = run(
        *admin,
        "metrics",
        "create",
        "load_hist",
        "--type",
        "histogram",
        "--edges",
        EDGES,
        "--epsilon",
        "2",
    )
    assert made.exit_code == 0, made.output
    return simulated_truths(admin, {"load_ms": 3, "load_hist": 4}, DEVICES)


def admin(collector: LocalCollector) -> tuple[str, ...]:
    return ("--collector", collector.url, "--token", collector.token)


def test_estimate_prints_the_mean_with_its_interval(
    collector: LocalCollector, truth: dict[str, Any]
) -> None:
    result = run(
        *admin(collector), "estimate", "load_ms", "--confidence", "0.9999", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["n"] == DEVICES and (document["lower"], document["upper"]) == (0, 5000)
    mean = document["mean"]
    assert mean["ci_low"] <= truth["load_ms"]["mean"] <= mean["ci_high"]
    table = run(*admin(collector), "estimate", "load_ms")
    assert table.exit_code == 0, table.output
    assert "mean" in table.stdout and "±" in table.stdout and "0 … 5,000" in table.stdout
    rows = list(
        csv.DictReader(
            io.StringIO(run(*admin(collector), "estimate", "load_ms", "--format", "csv").stdout)
        )
    )
    assert len(rows) == 1 and float(rows[0]["ci_low"]) <= float(rows[0]["mean"])
    assert float(rows[0]["margin"]) > 0


def test_a_histogram_estimate_shows_its_quantiles(
    collector: LocalCollector, truth: dict[str, Any]
) -> None:
    result = run(
        *admin(collector),
        "estimate",
        "load_hist",
        "-q",
        "0.5",
        "-q",
        "0.9",
        "--confidence",
        "0.9999",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [entry["q"] for entry in document["quantiles"]] == [0.5, 0.9]
    for entry in document["quantiles"]:
        assert quantile_holds(entry, truth["load_hist"]["quantiles"][f"{entry['q']:g}"])
    table = run(*admin(collector), "estimate", "load_hist")
    assert "quantiles" in table.stdout and "p99" in table.stdout
    assert table.stdout.index("[0, 100)") < table.stdout.index("[2000, 5000]")


QUANTILE_NOTES = (
    "at least, at most: the bucket edges each quantile lies between",
    "a wider interval: the data cannot place the quantile closer",
    "none: the quantile may lie in an end bucket (values beyond the outer edges)",
)


def test_the_quantile_table_reads_in_whole_phrases_at_80_columns_and_in_the_csv(
    collector: LocalCollector, truth: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: the title and caption wrapped mid-phrase at 80 columns; ``-q`` with
    ``--format csv`` left the quantiles out."""
    monkeypatch.setenv("COLUMNS", "80")
    table = run(*admin(collector), "estimate", "load_hist", "-q", "0.5", "-q", "0.9").stdout
    lines = [line.strip() for line in table.splitlines()]
    assert all(len(line) <= 80 for line in table.splitlines()), table
    assert "quantiles · 95% intervals, all at once" in lines
    assert not [line for line in lines if line.endswith("·") or line.startswith("·")]
    for note in QUANTILE_NOTES:
        assert note in lines, note
    text = run(*admin(collector), "estimate", "load_hist", "-q", "0.5", "-q", "0.9",
               "--format", "csv").stdout  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(text)))
    quantiles = [row for row in rows if row["quantile"]]
    assert [float(row["quantile"]) for row in quantiles] == [0.5, 0.9]
    for row in quantiles:
        entry = {"low": row["quantile_low"] or None, "high": row["quantile_high"] or None}
        bounds = {k: None if v is None else float(v) for k, v in entry.items()}
        assert quantile_holds(
            bounds, truth["load_hist"]["quantiles"][f"{float(row['quantile']):g}"]
        )


def test_series_draws_the_mean_per_period(collector: LocalCollector, truth: dict[str, Any]) -> None:
    result = run(*admin(collector), "series", "load_ms", "--last", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("no reports") == 2 and "● mean" in result.stdout
    rows = list(
        csv.DictReader(
            io.StringIO(
                run(*admin(collector), "series", "load_ms", "--last", "2", "--format", "csv").stdout
            )
        )
    )
    assert [int(row["reports"]) for row in rows] == [0, DEVICES]


def test_offline_estimates_from_an_export_equal_the_apis(
    collector: LocalCollector, truth: dict[str, Any], tmp_path: Path
) -> None:
    for name, extra in (("load_ms", ()), ("load_hist", ("-q", "0.75"))):
        path = tmp_path / f"{name}.parquet"
        exported = run(*admin(collector), "export", name, "--output", str(path))
        assert exported.exit_code == 0, exported.output
        offline = json.loads(
            run("estimate", name, "--from-file", str(path), *extra, "--format", "json").stdout
        )
        same = ("--start", offline["start"], "--end", offline["end"])  # offline: the file's
        online = json.loads(
            run(*admin(collector), "estimate", name, *same, *extra, "--format", "json").stdout
        )
        if name == "load_ms":
            for key in ("estimate", "std_error", "ci_low", "ci_high"):
                assert offline["mean"][key] == pytest.approx(online["mean"][key], rel=1e-9)
            offline["mean"] = online["mean"]
        assert offline == online


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("estimate", "load_ms", "--method", "mle"), "leave out --method"),
        (("estimate", "load_ms", "-q", "0.5"), "--quantile is for histogram metrics"),
        (("series", "load_ms", "--top", "2"), "no categories"),
        (
            (
                "metrics",
                "create",
                "bad",
                "--type",
                "histogram",
                "--edges",
                "0,5,1",
                "--epsilon",
                "1",
            ),
            "strictly increasing",
        ),
        (
            (
                "metrics",
                "create",
                "bad",
                "--type",
                "histogram",
                "--edges",
                "0,x,9",
                "--epsilon",
                "1",
            ),
            "'x' is not a number",
        ),
        (
            ("metrics", "create", "bad", "--type", "numeric", "--lower", "5", "--epsilon", "1"),
            "needs --lower and --upper",
        ),
        (
            (
                "metrics",
                "create",
                "bad",
                "--type",
                "numeric",
                "--lower",
                "5",
                "--upper",
                "1",
                "--epsilon",
                "1",
            ),
            "lower",
        ),
        (
            ("simulate", "--metric", "load_ms", "--clients", "5", "--distribution", "uniform"),
            "lognormal",
        ),
    ],
)
def test_bad_input_is_one_line_on_stderr(
    collector: LocalCollector, truth: dict[str, Any], args: tuple[str, ...], says: str
) -> None:
    assert says in one_line_error(run(*admin(collector), *args))


def test_estimate_from_a_bad_quantile_is_a_usage_error(collector: LocalCollector) -> None:
    assert "0<x<1" in one_line_error(run(*admin(collector), "estimate", "load_hist", "-q", "1"))


def test_plan_for_a_mean_marks_the_fewest_reports_and_names_autos_pick() -> None:
    """At eps 1 hybrid has the least noise per report (auto's pick), but with half the
    values at each end (the worst case the plan states) duchi needs fewer reports."""
    result = run(
        "plan",
        "--numeric",
        "--lower",
        "0",
        "--upper",
        "5000",
        "--epsilon",
        "1",
        "--margin",
        "50",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    needed = {row["mechanism"]: row["reports_needed"] for row in document["mechanisms"]}
    assert set(needed) == {"duchi", "pm", "hybrid"}
    assert document["advised"] == min(needed, key=needed.__getitem__) == "duchi"
    assert document["auto"] == "hybrid"
    table = run(
        "plan", "--numeric", "--lower", "0", "--upper", "5000", "--epsilon", "1", "--margin", "50"
    )
    marked = next(line for line in table.stdout.splitlines() if "fewest reports" in line)
    assert "duchi" in marked and f"{needed['duchi']:,}" in marked
    assert "auto resolves to hybrid" in table.stdout.replace("\n", " ")
    assert "needs --lower and --upper" in one_line_error(
        run("plan", "--numeric", "--epsilon", "1", "--margin", "50")
    )
    assert "below 1" in one_line_error(
        run("plan", "--categories", "3", "--epsilon", "1", "--margin", "50")
    )
