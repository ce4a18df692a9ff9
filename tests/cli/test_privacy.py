"""``deniable privacy`` and the registration warnings of ``deniable metrics create``, against a
real collector (uvicorn on loopback, in a thread) driven through the click command."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import click.testing
import pytest
from click.testing import CliRunner

from deniable.cli.main import cli
from deniable.client import WARNING_LEVEL_30_DAYS, MetricSpec, privacy_account
from deniable.collector.sealingkeys import generate
from deniable.estimators.privacy import eps_text
from testkit import (
    ADMIN_TOKEN,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    register_all,
    unique_name,
    viewer_collector,
)
from testkit.metrics import register
from testkit.shuffler_process import SHUFFLER_TOKEN
from tests.shuffler.test_collector_routes import forward, part, sealed_reports

SPECS = (
    MetricSpec.boolean("dark_mode", epsilon=1.0),
    MetricSpec.categorical("browser", ["chrome", "safari", "edge", "other"], epsilon=3.0),
    MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=1.0, period="week"),
)
"""Demo-like metrics: together above the warning level with the SDK defaults."""


@pytest.fixture(scope="module")
def server(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector with a viewer token holding SPECS."""
    with viewer_collector(databases.new("sqlite")) as running:
        register_all(running.url, SPECS)
        yield running


def run(server: RunningCollector, *args: str, token: str = VIEWER_TOKEN) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--collector", server.url, "--token", token, *args])


def api_document(server: RunningCollector, **params: str | int | float) -> dict:
    with server.client(VIEWER_TOKEN) as viewer:
        response = viewer.get("/v1/privacy", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def table_row(stdout: str, first: str) -> list[str]:
    """The cells of the table row starting with ``first``."""
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{stdout}")


def test_the_table_shows_each_metric_the_totals_and_the_statement(
    server: RunningCollector,
) -> None:
    result = run(server, "privacy")
    assert result.exit_code == 0, result.output
    account = privacy_account(SPECS)
    for metric in account.metrics:
        cells = table_row(result.stdout, metric.metric)
        assert cells[1:4] == [f"{metric.epsilon:g}", metric.period, "no"]
        assert cells[4:8] == [
            f"{getattr(metric, w):g}"
            for w in ("per_period", "per_day", "per_7_days", "per_30_days")
        ]
    totals = table_row(result.stdout, "total")
    assert totals[-1] == f"{account.totals.per_30_days:g}"
    document = api_document(server)
    flat = " ".join(result.stdout.split())
    assert "over a lifetime every metric's ε is unbounded (no cap, no memoization)" in flat
    assert "over a lifetime (worst case)" not in flat
    assert document["statement"] in flat
    assert "the SDK defaults" in flat
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [f"warning: {w}" for w in document["warnings"]] and warnings
    assert f"ε {account.totals.per_30_days:g} over 30 days" in warnings[0]


def test_settings_reach_the_account(server: RunningCollector) -> None:
    result = run(server, "privacy", "--memoize", "--lifetime-epsilon", "10", "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == api_document(server, memoize="true", lifetime_epsilon=10)
    assert document["settings"] == {
        "max_reports_per_period": 1,
        "memoize": True,
        "lifetime_epsilon": 10.0,
        "sdk_defaults": False,
        "instantaneous_ratio": 2.0,
    }
    table = run(server, "privacy", "--memoize-metric", "load_ms", "--memoize-metric", "browser")
    assert table.exit_code == 0, table.output
    assert table_row(table.stdout, "browser")[3] == "yes"
    assert table_row(table.stdout, "dark_mode")[3] == "no"
    capped = run(server, "privacy", "--memoize", "--lifetime-epsilon", "10")
    assert capped.exit_code == 0, capped.output
    lifetime = capped.stdout.split("over a lifetime (worst case)")[1]
    assert table_row(lifetime, "total")[1] == eps_text(document["total"]["lifetime"])
    assert "memoized: browser, load_ms with a fresh layer at 2 × ε" in " ".join(
        table.stdout.split()
    )
    args = ("privacy", "--memoize", "--instantaneous-ratio", "none", "--format", "json")
    permanent_only = run(server, *args)
    assert permanent_only.exit_code == 0, permanent_only.output
    document = json.loads(permanent_only.stdout)
    assert document == api_document(server, memoize="true", instantaneous_ratio="none")
    assert document["settings"]["instantaneous_ratio"] is None
    assert document["total"]["per_30_days"] is None


@pytest.mark.parametrize("token", [VIEWER_TOKEN, ADMIN_TOKEN])
def test_json_is_the_api_document(server: RunningCollector, token: str) -> None:
    result = run(
        server, "privacy", "--max-reports-per-period", "3", "--format", "json", token=token
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == api_document(server, max_reports_per_period=3)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--max-reports-per-period", "0"), "--max-reports-per-period"),
        (("--max-reports-per-period", "many"), "--max-reports-per-period"),
        (("--lifetime-epsilon", "-1"), "--lifetime-epsilon"),
        (("--lifetime-epsilon", "1e300"), "--lifetime-epsilon"),
        (("--max-reports-per-period", "2000000"), "max_reports_per_period must be a whole"),
        (("--memoize", "--memoize-metric", "browser"), "not both"),
        (("--memoize-metric", "no_such_metric"), "no_such_metric is not a registered metric"),
        (("--format", "csv"), "--format"),
        (("--instantaneous-ratio", "1"), "instantaneous_ratio"),
    ],
)
def test_bad_options_end_in_one_line_without_a_traceback(
    server: RunningCollector, args: tuple[str, ...], says: str
) -> None:
    result = run(server, "privacy", *args)
    assert result.exit_code != 0
    assert "Traceback" not in result.output + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(("error: ", "Error: ")) and says in last, result.stderr
    assert result.stdout == ""


def test_a_refused_token_is_one_line(server: RunningCollector) -> None:
    result = run(server, "privacy", token="not-a-token-of-this-collector")
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0 and result.stderr.startswith("error: ")


def test_metrics_create_prints_the_warning_for_each_metric_that_raises_the_total(
    databases: DatabaseFactory,
) -> None:
    """The registration that takes the total across the level prints its warning, and so does
    another metric that raises it further; creating one again prints none."""
    below = [spec for spec in SPECS if spec.name != "browser"]
    with viewer_collector(databases.new("sqlite")) as server:
        register_all(server.url, below)
        args = ("metrics", "create", "font", "--categories", "serif,sans,mono", "--epsilon", "4")
        results = [run(server, *args, token=ADMIN_TOKEN) for _ in range(2)]
        other = ("metrics", "create", "tablet", "--boolean", "--epsilon", "1")
        results.append(run(server, *other, token=ADMIN_TOKEN))
    assert all(result.exit_code == 0 for result in results), [r.output for r in results]
    font = MetricSpec.categorical("font", ["serif", "sans", "mono"], epsilon=4.0)
    assert privacy_account(below).totals.per_30_days <= WARNING_LEVEL_30_DAYS
    total = privacy_account([*below, font]).totals.per_30_days
    assert total > WARNING_LEVEL_30_DAYS
    warnings = [
        [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
        for result in results
    ]
    assert [len(w) for w in warnings] == [1, 0, 1]
    assert "with tablet (4 metrics in all)" in warnings[2][0]
    assert "above the level already" in warnings[2][0]
    assert "with font (3 metrics in all) and the SDK defaults" in warnings[0][0]
    assert f"ε {total:g} over 30 days" in warnings[0][0]
    assert "registered font" in results[0].stdout
    assert "already registered (identical)" in results[1].stdout


def test_the_shuffled_section_is_printed_beside_the_local_account(server: RunningCollector) -> None:
    """``--shuffle-batch`` adds each metric's central eps against an analyst, the local eps
    against the shuffler beside it, and the words saying which is which."""
    result = run(server, "privacy", "--shuffle-batch", "100000")
    assert result.exit_code == 0, result.output
    document = api_document(server, shuffle_batch=100_000)
    for row in document["shuffled"]["batches"]:
        cells = table_row(result.stdout, row["metric"])
        if "100,000" in cells:
            assert f"{row['central_epsilon']:.4g}" in cells
    assert "central ε against an analyst" in result.stdout
    assert "Against the shuffler itself" in " ".join(result.stdout.split())
    as_json = run(server, "privacy", "--shuffle-batch", "100000", "--format", "json")
    assert json.loads(as_json.stdout)["shuffled"] == document["shuffled"]


def test_without_a_shuffler_the_cli_says_so(server: RunningCollector) -> None:
    result = run(server, "privacy")
    assert result.exit_code == 0, result.output
    assert "No shuffled batches" in result.stdout


@pytest.mark.parametrize("args", [["--shuffle-batch", "1"], ["--shuffle-delta", "0.5"]])
def test_bad_shuffle_options_are_one_line_errors(server: RunningCollector, args: list[str]):
    result = run(server, "privacy", *args)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "shuffle" in result.output


def test_one_released_batch_is_worded_as_the_dashboard_words_it(tmp_path: Path) -> None:
    """Issue 41: ``deniable privacy`` says "1 batch of 7 devices", as the dashboard does, not
    "(1 batches, the smallest of 7 devices)"; two batches keep "the smallest of"."""
    keys = tmp_path / "keys.json"
    generate(keys, dt.datetime.now(dt.UTC))
    settings = collector_settings(
        f"sqlite:///{tmp_path}/collector.db",
        shuffler_token=SHUFFLER_TOKEN,
        sealing_keys_file=keys,
        shuffle_min_batch=3,
        viewer_token=VIEWER_TOKEN,
    )
    server = RunningCollector(settings).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            one, two = (
                register(admin, MetricSpec.categorical(unique_name(n), ["a", "b", "c"], epsilon=2))
                for n in ("one", "two")
            )
        for spec, sizes in ((one, (7,)), (two, (5, 4))):
            for size in sizes:
                answer = forward(server, part(spec, sealed_reports(server, spec, size)[1]))
                assert answer.status_code == 202, answer.text
        result = run(server, "privacy")
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "1 batches" not in text
    assert f"{one.name}: central ε ≤" in text and "(1 batch of 7 devices)" in text, text
    assert "(2 batches, the smallest of 4 devices)" in text, text
