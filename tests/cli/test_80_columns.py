"""Every table the CLI prints, at ``COLUMNS=80``, against a real collector holding the demo's
data (and a text metric's reports, and an archive): no line wider than 80 columns, and no
cell cut in the middle of a number, a name or a verdict (a cut cell ends in "…" right after
its text); plus issue 41's other CLI items (the level printed one way, "reports" for n, the
comparison's CSV, dimensions, --where's label, series --by's table, the archive's line, the
demo's coverage line)."""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deniable.cli.commands.demo import _run_demo
from deniable.cli.localcollector import LocalCollector
from deniable.client import MetricSpec, SeededRandomness
from testkit import DatabaseFactory
from testkit.cli import run_cli

from .test_from_archive import build_archive

WIDTH = 80
CUT = re.compile(r"[\w%.,)\]+-]…")
"""A cell rich cut short: its text runs straight into "…" (the CLI's own "…" stands between
spaces, as in "0 … 64.7%")."""
TABLE_LINES = ("│", "┃", "━", "─")
"""Characters that only a table's lines hold (its borders)."""
WORDS = ("dark", "font", "zoom")
"""The text metric's strings (shorter than its max_length, so none is marked as cut)."""


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, ...]]:
    """A collector holding the demo's metrics and reports (2,000 devices, today and the event
    metrics' week), a text metric with 3,000 reports today and an empty set metric; the
    global options that reach it with the admin token."""
    collector = LocalCollector()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            _run_demo(collector, 5, 2000, "json")
        admin = ("--collector", collector.url, "--token", collector.token)
        made = run_cli(
            *admin, "metrics", "create", "search_term", "--type", "text", "--max-length", "8",
            "--epsilon", "4",
        )  # fmt: skip
        assert made.exit_code == 0, made.output
        _upload_text(collector, MetricSpec.text("search_term", max_length=8, epsilon=4))
        made = run_cli(
            *admin, "metrics", "create", "features", "--categories", "search,share,export",
            "--max-items", "2", "--epsilon", "2",
        )  # fmt: skip
        assert made.exit_code == 0, made.output
        yield admin
    finally:
        collector.stop()


def _upload_text(collector: LocalCollector, spec: MetricSpec) -> None:
    """3,000 randomized reports of ``spec`` today: half "dark", the rest "font" and "zoom"."""
    sketch = spec.text_randomizer
    rng = SeededRandomness(41)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    reports = [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": today,
            "payload": sketch.randomize(
                sketch.encode(WORDS[0 if i % 2 else 1 + i % 4 // 2]), 1 + i % sketch.levels, rng
            ),
        }
        for i in range(3000)
    ]
    headers = {"Authorization": f"Bearer {collector.token}"}
    with httpx.Client(base_url=collector.url, headers=headers, timeout=30) as client:
        for start in range(0, len(reports), 1000):
            answer = client.post("/v1/reports", json={"reports": reports[start : start + 1000]})
            assert answer.status_code == 202, answer.text


@pytest.fixture(scope="module")
def archive(databases: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive of every kind's reports (:func:`build_archive`, on SQLite)."""
    return build_archive(databases.new("sqlite"), tmp_path_factory.mktemp("archive80"))[1]


def narrow(monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    """``deniable ARGS`` at 80 columns: its stdout, once it is checked to fit."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    result = run_cli(*args)
    assert result.exit_code == 0, (args, result.output)
    assert_fits(result.stdout, args)
    return result.stdout


def assert_fits(text: str, args: tuple[str, ...] = ()) -> None:
    """No line of a table in ``text`` is wider than :data:`WIDTH`, and no cell is cut short
    (a plain line, such as a command to copy, is left whole for the terminal to wrap)."""
    for line in text.splitlines():
        if any(border in line for border in TABLE_LINES):
            assert len(line) <= WIDTH, (args, line)
            assert not CUT.search(line), (args, line, text)


SERVED_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("metrics", "list"),
    ("metrics", "show", "dark_mode"),
    ("metrics", "show", "load_ms"),
    ("metrics", "show", "load_hist"),
    ("metrics", "show", "search_term"),
    ("metrics", "show", "features"),
    ("metrics", "show", "crashes"),
    ("estimate", "dark_mode"),
    ("estimate", "browser"),
    ("estimate", "browser", "--method", "unbiased", "--per-category"),
    ("estimate", "load_ms"),
    ("estimate", "load_hist"),
    ("estimate", "features"),
    ("estimate", "crashes", "--last", "3"),
    ("estimate", "search_used", "--last", "3"),
    ("estimate", "search_term"),
    ("estimate", "search_term", "--candidate", "dark", "--candidate", "nope"),
    ("estimate", "dark_mode", "--by", "platform"),
    ("estimate", "dark_mode", "--where", "platform:ios"),
    ("estimate", "dark_mode", "--compare-to", "previous"),
    ("estimate", "browser", "--compare-to", "previous"),
    ("estimate", "load_ms", "--compare-to", "previous"),
    ("estimate", "dark_mode", "--by", "platform", "--compare-to", "previous"),
    ("series", "dark_mode"),
    ("series", "browser"),
    ("series", "load_ms"),
    ("series", "load_hist", "--top", "3"),
    ("series", "search_term"),
    ("series", "dark_mode", "--by", "platform"),
    ("series", "dark_mode", "--where", "platform:web"),
    ("privacy",),
    ("privacy", "--memoize", "--lifetime-epsilon", "10"),
    ("privacy", "--shuffle-batch", "10000"),
    ("simulate", "--metric", "browser", "--clients", "200", "--seed", "1"),
    ("audit", "browser", "load_ms", "--samples", "2000"),
)
"""Every command that prints a table from the collector, in each of its table shapes."""

OFFLINE_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("plan", "--categories", "4", "--epsilon", "1", "--margin", "0.01"),
    ("plan", "--categories", "20", "--epsilon", "2", "--reports", "50000", "--per-category"),
    ("plan", "--numeric", "--lower", "0", "--upper", "5000", "--epsilon", "1", "--margin", "50"),
    ("plan", "--text", "--max-length", "16", "--epsilon", "4", "--floor", "0.01"),
    ("plan", "--aggregate", "any", "--epsilon", "1", "--reports", "20000"),
    ("plan", "--shuffled", "--categories", "10", "--central-epsilon", "0.2", "--batch", "100000"),
    ("audit", "--all-mechanisms", "--samples", "1000"),
)
"""The commands that print a table without a collector."""


@pytest.mark.parametrize("args", SERVED_COMMANDS, ids=" ".join)
def test_every_served_table_fits_80_columns(
    served: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    narrow(monkeypatch, *served, *args)


@pytest.mark.parametrize("args", OFFLINE_COMMANDS, ids=" ".join)
def test_every_offline_table_fits_80_columns(
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    narrow(monkeypatch, *args)


def test_metric_creation_tables_fit(
    served: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = narrow(
        monkeypatch, *served, "metrics", "create", "theme_by_platform", "--categories",
        "light,dark,system", "--epsilon", "2", "--dimension", "platform=ios,android,web",
        "--dimension", "region=eu,us",
    )  # fmt: skip
    assert "platform: ios, android, web (or other)" in shown
    assert "region: eu, us (or other)" in shown and "(or other); region" not in shown
    listed = narrow(monkeypatch, *served, "metrics", "list")
    assert "theme_by_platform: dimensions: platform: ios, android, web (or other); region:" in (
        " ".join(listed.split())
    )
    spec = json.loads(
        run_cli(*served, "metrics", "show", "theme_by_platform", "--format", "json").stdout
    )
    assert spec["dimensions"] == {"platform": ["ios", "android", "web"], "region": ["eu", "us"]}


def test_a_bad_dimension_option_is_a_usage_error(served: tuple[str, ...]) -> None:
    result = run_cli(*served, "metrics", "create", "x", "--boolean", "--epsilon", "1",
                     "--dimension", "platform")  # fmt: skip
    assert result.exit_code == 2 and "NAME=V1,V2" in result.output


def test_whole_numbers_names_and_verdicts_in_the_narrow_tables(
    served: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = narrow(monkeypatch, *served, "metrics", "list")
    specs = json.loads(run_cli(*served, "metrics", "list", "--format", "json").stdout)
    for spec in specs:
        assert spec["name"] in listed and spec["fingerprint"] in listed
    compared = narrow(monkeypatch, *served, "estimate", "browser", "--compare-to", "previous")
    flat = " ".join(compared.replace("│", " ").split())
    document = json.loads(
        run_cli(
            *served, "estimate", "browser", "--compare-to", "previous", "--format", "json"
        ).stdout
    )
    for row in document["slices"][0]["rows"]:
        assert f"{row['current'] * 100:.1f}%" in compared
        assert row["category"] in compared
    verdicts = {row["verdict"] for row in document["slices"][0]["rows"]}
    for verdict in verdicts:
        assert _joined(compared, verdict), (verdict, flat)
    account = narrow(monkeypatch, *served, "privacy")
    total = json.loads(run_cli(*served, "privacy", "--format", "json").stdout)["total"]
    assert f" {total['per_30_days']:g} " in account


def _joined(table: str, words: str) -> bool:
    """Whether ``words`` appear in ``table``'s last column, read down its wrapped lines."""
    cells = [line.split("│")[-2].strip() for line in table.splitlines() if line.count("│") > 2]
    return words in " ".join(" ".join(cells).split())


def test_compare_to_prints_csv(served: tuple[str, ...]) -> None:
    for by in ((), ("--by", "platform")):
        query = (*served, "estimate", "dark_mode", *by, "--compare-to", "previous")
        result = run_cli(*query, "--format", "csv")
        assert result.exit_code == 0, result.output
        rows = list(csv.DictReader(io.StringIO(result.stdout)))
        document = json.loads(run_cli(*query, "--format", "json").stdout)
        expected = sum(len(s["rows"] or [None]) for s in document["slices"])
        assert len(rows) == expected > 0
        for row, piece in zip(rows, document["slices"], strict=False):
            assert row["suppressed"] == ("true" if piece["suppressed"] else "false")
            assert row["baseline_start"] == document["baseline_start"]
            if by:
                assert row["by.platform"] == piece["values"]["platform"]
            if piece["suppressed"]:
                assert row["difference"] == row["ci_low"] == row["verdict"] == ""
                continue
            first = piece["rows"][0]
            assert row["category"] == first["category"] and row["verdict"] == first["verdict"]
            assert float(row["ci_low"]) == first["ci_low"] and int(row["reports"]) == piece["n"]


def test_the_level_is_printed_one_way(
    served: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    by = narrow(monkeypatch, *served, "estimate", "dark_mode", "--by", "platform")
    compared = narrow(monkeypatch, *served, "estimate", "browser", "--compare-to", "previous")
    for text in (by, compared):
        assert not re.search(r"\b0\.9\d*\b", text), text
        assert not re.search(r"\d\.\d{3,}%", text), text
    assert "98.33% interval" in by and "each slice at 98.33%" in by and "at once at 95%" in by
    assert "each at 99%" in compared


def test_n_is_said_in_reports(served: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    shown = narrow(monkeypatch, *served, "estimate", "browser")
    document = json.loads(run_cli(*served, "estimate", "browser", "--format", "json").stdout)
    assert f"{document['n']:,} reports" in shown and "n=" not in shown
    assert "est. reports" in shown and "est. count" not in shown
    series = narrow(monkeypatch, *served, "series", "load_ms")
    assert "reports" in series.splitlines()[2] and "┃ n " not in series
    yesterday = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()
    window = ("--start", yesterday, "--end", yesterday)
    events = narrow(monkeypatch, *served, "estimate", "search_used", *window)
    assert " devices · " in events.splitlines()[1] and "est. devices" in events


def test_where_labels_the_slice_by_its_filter(
    served: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = narrow(monkeypatch, *served, "estimate", "dark_mode", "--where", "platform:ios")
    lines = [line.strip() for line in shown.splitlines()]
    assert "platform=ios" in lines and "all" not in lines
    assert lines[0].startswith("dark_mode where platform=ios, ")


def test_series_by_prints_a_table(served: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    shown = narrow(monkeypatch, *served, "series", "dark_mode", "--by", "platform")
    document = json.loads(
        run_cli(*served, "series", "dark_mode", "--by", "platform", "--format", "json").stdout
    )
    today = document["series"][-1]
    for row in today["slices"]:
        if row["suppressed"]:
            continue
        true = next(r for r in row["estimate"]["estimates"] if r["category"] == "true")
        line = next(
            line for line in shown.splitlines()
            if today["period"] in line and f" {row['values']['platform']} " in line
        )  # fmt: skip
        assert f"{true['frequency'] * 100:.1f}%" in line and f"{row['estimate']['n']:,}" in line


def test_from_archive_says_so(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("arch_flag", "arch_hist", "arch_mean", "arch_text"):
        shown = narrow(monkeypatch, "estimate", name, "--from-archive", str(archive))
        assert shown.startswith(f"from the archive at {archive}"), shown
    json_output = run_cli(
        "estimate", "arch_flag", "--from-archive", str(archive), "--format", "json"
    )
    assert json.loads(json_output.stdout)["metric"] == "arch_flag"


def test_the_demo_fits_and_says_how_many_intervals_may_miss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = narrow(monkeypatch, "demo", "--clients", "600", "--seed", "3")
    flat = " ".join(shown.split())
    assert re.search(r"every interval holds its truth \(✓\) in \d+ of \d+ estimates", flat)
    assert "about 1 estimate in 20 is expected to miss somewhere (✗) by chance alone" in flat
