"""The `deniable` command without a collector: help, plan, offline estimates, error paths."""

from __future__ import annotations

import http.server
import json
import math
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import click
import polars as pl
import pytest
from scipy.stats import norm

from deniable.cli.main import cli
from deniable.client import MetricSpec, SeededRandomness
from deniable.estimators import estimate_reports
from deniable.sources.reportfile import SPEC_METADATA_KEY, frame_of
from testkit import spare_port
from testkit.cli import run_cli as run
from testkit.ports import listen_port

CATEGORIES = ["a", "b", "c", "d"]
TRUTH = [0.5, 0.3, 0.2, 0.0]
DAYS = ["2026-11-19", "2026-11-20", "2026-11-21"]
PER_DAY = 4000


def assert_one_line_error(result: click.testing.Result, code: int = 1) -> str:
    """The failure is one line on stderr, with no traceback, and the right exit status."""
    assert result.exit_code == code, (result.exit_code, result.output)
    message = result.stderr.strip()
    assert message.startswith("error: "), message
    assert "\n" not in message and "Traceback" not in message
    return message


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = []
    for name, command in group.commands.items():
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths.extend(all_commands(command, (*prefix, name)))
    return paths


def write_reports(
    path: Path, mechanism: str, *, embed_spec: bool = True, seed: int = 7
) -> MetricSpec:
    """Exported reports of devices whose true shares are TRUTH, each reporting on every day."""
    spec = MetricSpec.categorical("browser", CATEGORIES, epsilon=1.0, mechanism=mechanism)
    rng = SeededRandomness(seed)
    rows = []
    for day in DAYS:
        bounds = [round(PER_DAY * sum(TRUTH[: i + 1])) for i in range(len(TRUTH))]
        for device in range(PER_DAY):
            value = next(i for i, b in enumerate(bounds) if device < b)
            rows.append((str(uuid.uuid4()), day, spec.randomizer.randomize(value, rng)))
    frame = frame_of(spec, rows)
    metadata = {SPEC_METADATA_KEY: json.dumps(spec.to_dict())} if embed_spec else None
    frame.write_parquet(path, metadata=metadata)
    return spec


def test_every_command_has_help_with_an_example() -> None:
    commands = all_commands(cli)
    assert {
        "serve",
        "metrics",
        "estimate",
        "series",
        "plan",
        "simulate",
        "demo",
        "export",
        "retention",
    } <= {c[0] for c in commands}
    for path in [(), *commands]:
        result = run(*path, "--help")
        assert result.exit_code == 0, path
        assert "Example" in result.output, path


def test_plan_margin_matches_the_brr_formula() -> None:
    """The Wilson interval of STATS.md section 1 at the worst count n/2, mapped through
    tanh(eps/2): z sqrt(n/4 + z^2/4) / ((n + z^2) tanh(eps/2)), z at the Bonferroni level of
    both categories at once (the default) or of each alone."""
    for flag, level in (("--simultaneous", 0.05 / 2), ("--per-category", 0.05)):
        result = run(
            "plan",
            "--categories",
            "2",
            "--epsilon",
            "1",
            "--reports",
            "10000",
            flag,
            "--format",
            "json",
        )
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        brr = next(m for m in document["mechanisms"] if m["mechanism"] == "brr")
        z, n = norm.isf(level / 2), 10_000
        expected = z * math.sqrt(n / 4 + z * z / 4) / ((n + z * z) * math.tanh(0.5))
        assert brr["margin"] == pytest.approx(expected, rel=1e-9)
    assert document["advised"] == "brr"


def test_plan_reports_needed_is_the_smallest_n_meeting_the_margin() -> None:
    result = run(
        "plan", "--categories", "8", "--epsilon", "2", "--margin", "0.02", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    for row in json.loads(result.stdout)["mechanisms"]:
        n = row["reports_needed"]
        for reports, meets in ((n, True), (n - 1, False)):
            back = run(
                "plan",
                "--categories",
                "8",
                "--epsilon",
                "2",
                "--reports",
                str(reports),
                "--format",
                "json",
            )
            margin = next(
                m
                for m in json.loads(back.stdout)["mechanisms"]
                if m["mechanism"] == row["mechanism"]
            )["margin"]
            assert (margin <= 0.02) is meets, (row["mechanism"], reports, margin)


def test_plan_advisor_follows_the_grr_rule() -> None:
    """STATS.md section 3: GRR beats OUE/OLH iff k < 3e^eps + 2."""
    small = json.loads(
        run(
            "plan", "--categories", "5", "--epsilon", "1", "--margin", "0.05", "--format", "json"
        ).stdout
    )
    large = json.loads(
        run(
            "plan", "--categories", "50", "--epsilon", "1", "--margin", "0.05", "--format", "json"
        ).stdout
    )
    assert small["advised"] == "krr"
    assert large["advised"] in ("oue", "olh")
    table = run("plan", "--categories", "50", "--epsilon", "1", "--margin", "0.05")
    assert "← fewest reports" in table.stdout and "reports needed" in table.stdout


def test_plan_needs_exactly_one_of_margin_and_reports() -> None:
    result = run("plan", "--categories", "4", "--epsilon", "1")
    assert result.exit_code == 2
    assert "exactly one of --margin or --reports" in result.stderr


@pytest.mark.parametrize(
    ("epsilon", "margin", "code", "needle"),
    [
        ("1e-12", "0.001", 2, "Invalid value for '--epsilon': epsilon must be at least 0.001"),
        ("1e-320", "0.01", 2, "Invalid value for '--epsilon': epsilon must be at least 0.001"),
        ("21", "0.01", 2, "Invalid value for '--epsilon': epsilon must be at most 20"),
        ("1", "1e-300", 1, "error: a margin of ±1e-300 at ε=1 needs more than 1e+15 reports"),
    ],
)
def test_plan_out_of_range_answers_at_once_in_one_line(
    epsilon: str, margin: str, code: int, needle: str
) -> None:
    """Hopeless inputs (which used to spin, overflow or divide by zero) get one clear line."""
    result = run("plan", "--categories", "3", "--epsilon", epsilon, "--margin", margin)
    assert result.exit_code == code, result.output
    assert needle in result.stderr and result.stdout == ""
    if code == 1:
        assert_one_line_error(result)


@pytest.mark.parametrize("epsilon", ["0", "0.0005", "20.5", "nan"])
def test_metrics_create_refuses_an_epsilon_outside_the_bounds_before_any_request(
    epsilon: str,
) -> None:
    """The shared --epsilon option checks the mechanisms' bounds; nothing reaches a collector."""
    result = run(
        "--collector", "http://127.0.0.1:9", "metrics", "create", "x", "--boolean",
        "--epsilon", epsilon,
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--epsilon'" in result.stderr
    assert "cannot reach" not in result.stderr


def test_plan_marks_mechanisms_past_the_largest_answer() -> None:
    """At the smallest eps, krr needs more than 10^15 reports for 1000 categories, oue does not."""
    args = ("plan", "--categories", "1000", "--epsilon", "0.001", "--margin", "0.001")
    document = json.loads(run(*args, "--format", "json").stdout)
    rows = {row["mechanism"]: row for row in document["mechanisms"]}
    assert rows["krr"]["reports_needed"] is None and "more than 1e+15" in rows["krr"]["reason"]
    assert 10**13 < rows["oue"]["reports_needed"] < 10**15
    assert "more than 1e+15" in run(*args).stdout
    too_many = run("plan", "--categories", "3", "--epsilon", "1", "--reports", str(10**15 + 1))
    assert too_many.exit_code == 2 and "at most 1e+15 reports" in too_many.stderr


@pytest.mark.parametrize("mechanism", ["krr", "oue", "olh"])
def test_offline_estimate_covers_the_truth(tmp_path: Path, mechanism: str) -> None:
    path = tmp_path / "reports.parquet"
    write_reports(path, mechanism)
    result = run(
        "estimate",
        "browser",
        "--from-file",
        str(path),
        "--simultaneous",
        "--confidence",
        "0.999",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["metric"] == "browser" and document["mechanism"] == mechanism
    assert document["n"] == PER_DAY * len(DAYS) and document["periods"] == len(DAYS)
    assert (document["start"], document["end"]) == (DAYS[0], DAYS[-1])
    for row, truth in zip(document["estimates"], TRUTH, strict=True):
        assert row["ci_low"] <= truth <= row["ci_high"], row


def test_offline_estimate_passes_every_option_through(tmp_path: Path) -> None:
    path = tmp_path / "reports.parquet"
    spec = write_reports(path, "oue")
    result = run(
        "estimate",
        "browser",
        "--from-file",
        str(path),
        "--start",
        DAYS[1],
        "--end",
        DAYS[2],
        "--method",
        "consistent",
        "--pooling",
        "independent",
        "--confidence",
        "0.9",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(path).filter(pl.col("period") >= DAYS[1])
    direct = estimate_reports(
        spec.randomizer,
        spec.categories,
        frame,
        confidence=0.9,
        method="consistent",
        pooling="independent",
        simultaneous=True,
    ).to_dict()
    document = json.loads(result.stdout)
    assert document["n"] == 2 * PER_DAY
    assert {k: document[k] for k in direct} == direct


def test_offline_estimate_table_is_sorted_and_draws_whiskers(tmp_path: Path) -> None:
    path = tmp_path / "reports.parquet"
    write_reports(path, "krr")
    result = run("estimate", "browser", "--from-file", str(path))
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("│")]
    assert [ln.split("│")[1].strip() for ln in lines] == ["a", "b", "c", "d"]
    assert all("┤" in ln or "┼" in ln for ln in lines)
    csv_out = run(
        "estimate", "browser", "--from-file", str(path), "--format", "csv"
    ).stdout.splitlines()
    assert csv_out[0] == (
        "metric,start,end,reports,periods,pooling,method,confidence,simultaneous,"
        "category,frequency,std_error,ci_low,ci_high,estimated_reports,unbiased,clipped"
    )
    assert [line.split(",")[9] for line in csv_out[1:]] == CATEGORIES
    assert {tuple(line.split(",")[:9]) for line in csv_out[1:]} == {
        (
            "browser",
            DAYS[0],
            DAYS[-1],
            str(PER_DAY * len(DAYS)),
            str(len(DAYS)),
            "overlap-safe",
            "consistent",
            "0.95",
            "true",
        )
    }


def test_offline_estimate_with_a_separate_spec(tmp_path: Path) -> None:
    path = tmp_path / "bare.parquet"
    spec = write_reports(path, "krr", embed_spec=False)
    missing = run("estimate", "browser", "--from-file", str(path))
    assert "--spec" in assert_one_line_error(missing)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    result = run(
        "estimate",
        "browser",
        "--from-file",
        str(path),
        "--spec",
        str(spec_file),
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n"] == PER_DAY * len(DAYS)


def test_offline_estimate_refuses_reports_of_another_spec(tmp_path: Path) -> None:
    path = tmp_path / "reports.parquet"
    write_reports(path, "krr")
    other = MetricSpec.categorical("browser", CATEGORIES, epsilon=2.0, mechanism="krr")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(other.to_dict()))
    message = assert_one_line_error(
        run("estimate", "browser", "--from-file", str(path), "--spec", str(spec_file))
    )
    assert "refusing to mix" in message


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b"this is not parquet at all", "not a readable Parquet"), (b"", "not a readable Parquet")],
)
def test_malformed_file_is_one_line(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(content)
    assert needle in assert_one_line_error(run("estimate", "browser", "--from-file", str(path)))


def test_missing_file_and_wrong_metric(tmp_path: Path) -> None:
    assert "no such file" in assert_one_line_error(
        run("estimate", "browser", "--from-file", str(tmp_path / "nope.parquet"))
    )
    path = tmp_path / "reports.parquet"
    write_reports(path, "krr")
    assert "not 'os'" in assert_one_line_error(run("estimate", "os", "--from-file", str(path)))


def test_bad_dates_are_usage_errors_or_one_line(tmp_path: Path) -> None:
    path = tmp_path / "reports.parquet"
    write_reports(path, "krr")
    for bad in ("2026-13-01", "yesterday", "2026-02-30", "2026-W60"):
        result = run("estimate", "browser", "--from-file", str(path), "--start", bad)
        assert result.exit_code == 2, bad
        assert "Invalid value for '--start'" in result.stderr
        assert "Traceback" not in result.output
    week = run("estimate", "browser", "--from-file", str(path), "--start", "2026-W47")
    assert "is reported per day" in assert_one_line_error(week)
    assert run("retention", "--before", "someday", "--yes").exit_code == 2


def test_unreachable_collector_is_one_line() -> None:
    url = f"http://127.0.0.1:{spare_port()}"
    for args in (
        ("metrics", "list"),
        ("estimate", "browser"),
        ("series", "browser"),
        ("metrics", "show", "x"),
    ):
        message = assert_one_line_error(run("--collector", url, *args))
        assert f"cannot reach the collector at {url}" in message


def test_subprocess_error_has_exit_1_and_one_line(tmp_path: Path) -> None:
    """Through a real process: the entry point, the exit status, and stderr as the user sees it."""
    path = tmp_path / "broken.parquet"
    path.write_text("garbage")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "deniable.cli.main",
            "estimate",
            "browser",
            "--from-file",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ")
    usage = subprocess.run(
        [
            sys.executable,
            "-m",
            "deniable.cli.main",
            "plan",
            "--categories",
            "1",
            "--epsilon",
            "1",
            "--margin",
            "0.1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_offline_series_gives_each_period_its_own_estimate(tmp_path: Path) -> None:
    path = tmp_path / "reports.parquet"
    write_reports(path, "olh")
    result = run(
        "series", "browser", "--from-file", str(path), "--start", "2026-11-18", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [p["period"] for p in document["series"]] == ["2026-11-18", *DAYS]
    assert [p["n"] for p in document["series"]] == [0, PER_DAY, PER_DAY, PER_DAY]
    assert all(r["frequency"] is None for r in document["series"][0]["estimates"])
    one_day = json.loads(
        run(
            "estimate",
            "browser",
            "--from-file",
            str(path),
            "--start",
            DAYS[1],
            "--end",
            DAYS[1],
            "--format",
            "json",
        ).stdout
    )
    assert document["series"][2]["estimates"] == one_day["estimates"]
    chart = run("series", "browser", "--from-file", str(path), "--category", "b")
    rows = [ln for ln in chart.stdout.splitlines() if ln.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == DAYS
    assert all("●" in r and "├" in r for r in rows)
    assert "no category named 'z'" in assert_one_line_error(
        run("series", "browser", "--from-file", str(path), "--category", "z")
    )


def test_offline_estimate_of_an_empty_range_says_so(tmp_path: Path) -> None:
    path = tmp_path / "reports.parquet"
    write_reports(path, "krr")
    result = run(
        "estimate", "browser", "--from-file", str(path), "--start", "2026-12-01", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["n"] == 0
    assert all(
        (r["frequency"], r["ci_low"], r["ci_high"]) == (None, 0.0, 1.0)
        for r in document["estimates"]
    )
    table = run("estimate", "browser", "--from-file", str(path), "--start", "2026-12-01")
    assert "no reports in this range" in table.stdout
    backwards = run(
        "estimate", "browser", "--from-file", str(path), "--start", DAYS[2], "--end", DAYS[0]
    )
    assert "is after end" in assert_one_line_error(backwards)


def test_migrate_creates_the_schema_and_reports_a_bad_database_in_one_line(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "fresh.db"
    result = run("migrate", "--database", f"sqlite:///{path}")
    assert result.exit_code == 0, result.output
    with sqlite3.connect(path) as db:
        tables = {
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    assert {"metrics", "reports", "period_counts", "support_counts"} <= tables
    port = spare_port()
    message = assert_one_line_error(
        run("migrate", "--database", f"postgresql://postgres@127.0.0.1:{port}/x")
    )
    assert message.startswith("error: database error:")


class _Canned(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the status and body the test put on the server."""

    def do_GET(self) -> None:
        status, content_type, body = self.server.canned  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.mark.parametrize(
    ("canned", "needle"),
    [
        (
            (200, "text/html", b"<html>hello</html>"),
            "something other than JSON; is it a deniable collector?",
        ),
        ((500, "application/json", b'{"detail": "boom"}'), "the collector failed (500): boom"),
        (
            (503, "text/plain", b"down for\nmaintenance"),
            "the collector failed (503): down for maintenance",
        ),
        (
            (
                422,
                "application/json",
                b'{"detail": [{"loc": ["query", "start"], "msg": "bad"}, {"msg": "x"}]}',
            ),
            "refused the request (422): start: bad; x",
        ),
    ],
)
def test_odd_answers_from_a_server_are_one_line(
    canned: tuple[int, str, bytes], needle: str
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", listen_port()), _Canned)
    server.canned = canned  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert needle in assert_one_line_error(
            run("--collector", url, "--token", "t", "estimate", "browser")
        )
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("kind", "end"),
    [
        ("day", "2026-03-01"),
        ("day", "2024-03-01"),
        ("week", "2026-W02"),
        ("week", "2021-W01"),
        ("month", "2026-02"),
    ],
)
@pytest.mark.parametrize("count", [1, 2, 7, 14, 60])
def test_last_n_periods_hold_exactly_n_periods(kind: str, end: str, count: int) -> None:
    from deniable.cli.periods import periods_back
    from deniable.client.spec import period_range

    assert len(period_range(kind, periods_back(kind, end, count), end)) == count


def test_last_offline(tmp_path: Path) -> None:
    path = tmp_path / "reports.parquet"
    write_reports(path, "krr")
    result = run(
        "series",
        "browser",
        "--from-file",
        str(path),
        "--last",
        "3",
        "--end",
        DAYS[-1],
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    assert [p["period"] for p in json.loads(result.stdout)["series"]] == DAYS
    both = run("estimate", "browser", "--from-file", str(path), "--last", "3", "--start", DAYS[0])
    assert "not both" in assert_one_line_error(both)


def test_offline_series_refuses_more_periods_than_the_collector(tmp_path: Path) -> None:
    """The collector's default range cap holds offline too: no 46,000-period series."""
    from deniable.collector.settings import Settings

    path = tmp_path / "reports.parquet"
    write_reports(path, "krr")
    limit = Settings.model_fields["max_range_periods"].default
    result = run("series", "browser", "--from-file", str(path), "--start", "1900-01-01")
    message = assert_one_line_error(result)
    assert f"more than the {limit:,} a range may hold" in message


@pytest.mark.parametrize(
    ("kind", "start", "end"),
    [
        ("day", "2022-12-30", "2026-03-01"),
        ("week", "2020-W50", "2026-W02"),
        ("month", "1990-11", "2026-02"),
    ],
)
def test_range_size_is_counted_exactly(kind: str, start: str, end: str) -> None:
    from deniable.cli.periods import check_range_size
    from deniable.client.errors import InvalidInput
    from deniable.client.spec import period_count, period_range
    from deniable.collector.settings import MAX_RANGE_PERIODS

    labels = period_range(kind, start, end)
    assert period_count(kind, start, end) == len(labels)
    limit = MAX_RANGE_PERIODS
    check_range_size(kind, labels[0], labels[min(limit, len(labels)) - 1])
    if len(labels) > limit:
        with pytest.raises(InvalidInput, match="more than"):
            check_range_size(kind, labels[0], labels[limit])


def test_offline_quantile_past_the_top_edge_has_no_upper_bound(tmp_path: Path) -> None:
    """3,000 oue reports, eps 4, edges 0..200: 5% of the values lie above 200 (counted in the
    top bucket), so the p99 may lie past 200: null in JSON, "may be above 200" in the table."""
    spec = MetricSpec.histogram("latency", [0, 50, 100, 150, 200], epsilon=4.0, mechanism="oue")
    rng = SeededRandomness(23)
    values = [10.0] * 1_000 + [120.0] * 1_850 + [400.0] * 150
    rows = [
        (str(uuid.uuid4()), DAYS[0], spec.randomizer.randomize(spec.bucket_of(v), rng))
        for v in values
    ]
    path = tmp_path / "latency.parquet"
    frame_of(spec, rows).write_parquet(
        path, metadata={SPEC_METADATA_KEY: json.dumps(spec.to_dict())}
    )
    result = run("estimate", "latency", "--from-file", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["edges"] == [0.0, 50.0, 100.0, 150.0, 200.0]
    p99 = next(entry for entry in document["quantiles"] if entry["q"] == 0.99)
    assert p99["high"] is None and p99["low"] in (50.0, 100.0, 150.0)
    median = next(entry for entry in document["quantiles"] if entry["q"] == 0.5)
    assert median["low"] is not None and median["high"] is not None
    table = run("estimate", "latency", "--from-file", str(path))
    assert table.exit_code == 0, table.output
    assert "none: may be above 200" in table.stdout
