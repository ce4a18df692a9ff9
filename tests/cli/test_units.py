"""A metric's unit, description and owner where people read them: ``deniable metrics create
--unit --description --owner``, ``metrics show`` and ``list`` (table and CSV), the estimate's
heading, and the dashboard's metric page. Against a real collector (uvicorn on loopback)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import click.testing
import pytest
from click.testing import CliRunner

from deniable.cli.main import cli
from testkit import (
    ADMIN_TOKEN,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    signed_in,
    viewer_collector,
)

KINDS = ("estimate", "series")
DESCRIPTION = "Time to first paint of the home page"
CREATE = (
    *("metrics", "create", "paint_ms", "--type", "numeric", "--lower", "0", "--upper", "5000"),
    *("--epsilon", "1", "--unit", "ms", "--description", DESCRIPTION, "--owner", "web-perf"),
)


@pytest.fixture(scope="module")
def server(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector with a viewer token, ``paint_ms`` registered through the CLI."""
    with viewer_collector(databases.new("sqlite")) as running:
        created = run(running, *CREATE, token=ADMIN_TOKEN)
        assert created.exit_code == 0, created.output
        yield running


def run(server: RunningCollector, *args: str, token: str = VIEWER_TOKEN) -> click.testing.Result:
    return CliRunner().invoke(cli, ["--collector", server.url, "--token", token, *args])


def test_show_list_and_estimate_say_the_unit_description_and_owner(
    server: RunningCollector,
) -> None:
    shown = run(server, "metrics", "show", "paint_ms")
    assert shown.exit_code == 0, shown.output
    cells = [[c.strip() for c in line.strip("│ ").split("│")] for line in shown.stdout.splitlines()]
    rows = {row[0]: row[1:] for row in cells if len(row) == 2}
    assert (rows["unit"], rows["description"], rows["owner"]) == (
        ["ms"],
        [DESCRIPTION],
        ["web-perf"],
    )

    listed = run(server, "metrics", "list", "--format", "csv")
    assert listed.exit_code == 0, listed.output
    (row,) = csv.DictReader(io.StringIO(listed.stdout))
    assert (row["unit"], row["description"], row["owner"]) == ("ms", DESCRIPTION, "web-perf")
    table = run(server, "metrics", "list")
    assert "web-perf" in table.stdout and f"paint_ms: {DESCRIPTION}" in table.stdout

    estimate = run(server, "estimate", "paint_ms")
    assert estimate.exit_code == 0, estimate.output
    assert "paint_ms (ms)" in estimate.stdout
    series = run(server, "series", "paint_ms")
    assert series.exit_code == 0, series.output
    assert "paint_ms (ms) · mean" in series.stdout


def test_a_unit_on_a_metric_without_values_is_a_usage_error(server: RunningCollector) -> None:
    args = ("metrics", "create", "flag", "--boolean", "--epsilon", "1", "--unit", "ms")
    result = run(server, *args, token=ADMIN_TOKEN)
    assert result.exit_code == 2 and "--unit goes with --type numeric" in result.stderr
    bad = run(server, *CREATE[:-2], "--owner", "web\x1bperf", token=ADMIN_TOKEN)
    assert bad.exit_code == 1 and "owner:" in bad.stderr and "control characters" in bad.stderr
    assert bad.stderr.strip().count("\n") == 0, "one line, no traceback"


def test_every_csv_of_a_number_names_its_unit(server: RunningCollector) -> None:
    """The CLI's CSVs and the dashboard's downloads (one schema): a numeric metric's rows and a
    histogram's quantile rows carry the unit; a bucket's share has none."""
    sizes = ("metrics", "create", "size_kb", "--type", "histogram", "--edges", "0,10,100,1000")
    created = run(server, *sizes, "--epsilon", "1", "--unit", "KB", token=ADMIN_TOKEN)
    assert created.exit_code == 0, created.output
    texts = {}
    for name in ("paint_ms", "size_kb"):
        for kind in KINDS:
            result = run(server, kind, name, "--format", "csv")
            assert result.exit_code == 0, result.output
            texts[name, kind] = result.stdout
    with signed_in(server) as browser:
        for kind in KINDS:
            download = browser.get(f"/dashboard/metrics/paint_ms/{kind}.csv")
            assert download.status_code == 200
            texts["dashboard", kind] = download.text
    for key in [(source, kind) for source in ("paint_ms", "dashboard") for kind in KINDS]:
        rows = list(csv.DictReader(io.StringIO(texts[key])))
        assert rows and {row["unit"] for row in rows} == {"ms"}, key
    rows = list(csv.DictReader(io.StringIO(texts["size_kb", "estimate"])))
    assert {row["unit"] for row in rows if row["quantile"]} == {"KB"}
    assert {row["unit"] for row in rows if row["category"]} == {""}


def test_the_metric_page_says_what_the_metric_is(server: RunningCollector) -> None:
    with signed_in(server) as browser:
        page = browser.get("/dashboard/metrics/paint_ms").text
    heading = page.split('<div class="heading">')[1].split("</div>")[0]
    assert f'<p id="description">{DESCRIPTION}</p>' in heading
    assert '<span id="unit">ms</span>' in heading and '<span id="owner">web-perf</span>' in heading
