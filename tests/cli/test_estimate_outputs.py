"""How `deniable estimate`, `series` and `export` present their results (issue 14): the
defaults, the markers and notes, the CSV's self-describing columns, --top and export's range."""

from __future__ import annotations

import csv
import io
import json
import uuid
from pathlib import Path

import numpy as np
import polars as pl

from deniable.client import MetricSpec, SeededRandomness
from deniable.sources.reportfile import SPEC_METADATA_KEY, frame_of
from testkit.cli import run_cli as run

DAYS = ["2026-11-20", "2026-11-21"]
K = 30


def write_export(path: Path, mechanism: str = "oue", k: int = K, per_day: int = 600) -> None:
    """An exported Parquet file of ``per_day`` reports a day of a Zipf-shared metric."""
    spec = MetricSpec.categorical(
        "screen", [f"s{v:02d}" for v in range(k)], epsilon=1.0, mechanism=mechanism
    )
    rng = SeededRandomness(5)
    f = 1 / np.arange(1, k + 1)
    values = np.random.default_rng(5).choice(k, size=per_day * len(DAYS), p=f / f.sum())
    rows = [
        (str(uuid.uuid4()), DAYS[i % len(DAYS)], spec.randomizer.randomize(int(v), rng))
        for i, v in enumerate(values)
    ]
    frame_of(spec, rows).write_parquet(
        path, metadata={SPEC_METADATA_KEY: json.dumps(spec.to_dict())}
    )


def test_the_defaults_are_consistent_and_simultaneous_and_the_header_says_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "screen.parquet"
    write_export(path)
    document = json.loads(
        run("estimate", "screen", "--from-file", str(path), "--format", "json").stdout
    )
    assert (document["method"], document["simultaneous"]) == ("consistent", True)
    table = run("estimate", "screen", "--from-file", str(path)).stdout
    assert "simultaneous intervals (all at once)" in table
    assert "est. reports" in table
    per_category = run("estimate", "screen", "--from-file", str(path), "--per-category").stdout
    assert "per-category intervals" in per_category


def test_unbiased_estimates_below_zero_are_marked_and_explained(tmp_path: Path) -> None:
    path = tmp_path / "screen.parquet"
    write_export(path)
    out = run("estimate", "screen", "--from-file", str(path), "--method", "unbiased").stdout
    rows = [line for line in out.splitlines() if line.startswith("│")]
    marked = [line for line in rows if "▼" in line]
    assert marked and all("0.0%▼" in line for line in marked)
    assert "fell below 0" in out and "exceeds" in out


def test_the_csv_says_which_metric_range_n_and_method_each_row_is_from(tmp_path: Path) -> None:
    path = tmp_path / "screen.parquet"
    write_export(path)
    text = run("estimate", "screen", "--from-file", str(path), "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == K
    assert {(r["metric"], r["start"], r["end"], r["reports"], r["method"]) for r in rows} == {
        ("screen", DAYS[0], DAYS[-1], "1200", "consistent")
    }
    assert "estimated_reports" in rows[0] and "count" not in rows[0]
    for row in rows:
        assert float(row["ci_low"]) <= float(row["frequency"]) <= float(row["ci_high"])


def test_series_charts_the_top_categories_on_one_axis(tmp_path: Path) -> None:
    path = tmp_path / "screen.parquet"
    write_export(path)
    out = run("series", "screen", "--from-file", str(path)).stdout
    titles = [line for line in out.splitlines() if line.startswith("screen · ")]
    assert len(titles) == 10 and "the 10 largest of 30 categories" in out
    axes = {line.split("┃")[-2].strip() for line in out.splitlines() if "0 … " in line}
    assert len(axes) == 1  # one shared axis
    three = run("series", "screen", "--from-file", str(path), "--top", "3").stdout
    assert sum(line.startswith("screen · ") for line in three.splitlines()) == 3
    assert "s00" in three
    text = run("series", "screen", "--from-file", str(path), "--top", "3", "--format", "csv").stdout
    assert len(list(csv.DictReader(io.StringIO(text)))) == 3 * len(DAYS)


def test_export_help_gives_the_default_it_applies() -> None:
    text = " ".join(run("export", "--help").output.split())
    assert "default: the first stored report" in text
    assert "current period" not in text.split("--last")[0]


def test_a_krr_export_names_the_randomized_category(tmp_path: Path) -> None:
    spec = MetricSpec.categorical("b", ["chrome", "safari"], epsilon=1.0, mechanism="krr")
    frame = frame_of(spec, [("1", DAYS[0], 1), ("2", DAYS[0], 0)])
    assert frame["reported_category"].to_list() == ["safari", "chrome"]
    path = tmp_path / "b.csv"
    frame.write_csv(path)
    assert pl.read_csv(path)["reported_category"].to_list() == ["safari", "chrome"]


def test_the_series_legend_explains_the_clipped_mark_only_when_one_is_shown(
    tmp_path: Path,
) -> None:
    """Issue 25: "▼ below 0" in the legend of charts where nothing is clipped."""
    plain = tmp_path / "plain.parquet"
    write_export(plain, k=2, per_day=2000)  # shares 2/3 and 1/3: never pushed past 0 or 1
    out = run("series", "screen", "--from-file", str(plain), "--category", "s01").stdout
    assert "● estimate" in out
    assert "▼" not in out and "below 0" not in out and "▲" not in out
    skewed = tmp_path / "skewed.parquet"
    write_export(skewed)
    marked = run("series", "screen", "--from-file", str(skewed), "--top", "30").stdout
    assert "%▼" in marked and "▼ unbiased estimate below 0" in marked
