"""The CLI, the API and the dashboard answer the same question the same way (issue 23).

Asked about a metric with no options, each surface answers with the one default: consistent
shares, intervals for all categories at once, the 7 periods ending at the current one. One
real collector (in a thread, real SQLite file, real HTTP) holds reports in the current period,
one 3 days before (inside the default range) and one 11 days before (outside it).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

import pytest

from deniable.client.spec import MetricSpec
from deniable.estimators.documents import CLIPPED_MARKS
from testkit import (
    ADMIN_TOKEN,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    make_numeric_reports,
    make_reports,
    post_reports,
    register,
    signed_in,
    viewer_collector,
)
from testkit.cli import run_cli

DAYS = {"2026-11-21": 120, "2026-11-18": 80, "2026-11-10": 200}
"""Reports per period: today (the test clock's), 3 days before, 11 days before."""


@pytest.fixture(scope="module")
def server(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    with viewer_collector(databases.new("sqlite")) as running:
        with running.client(ADMIN_TOKEN) as admin:
            shares = register(
                admin, MetricSpec.categorical("same_browser", ["a", "b", "c", "d"], epsilon=1.0)
            )
            mean = register(
                admin, MetricSpec.numeric("same_load", lower=0, upper=1000, epsilon=1.0)
            )
            buckets = register(
                admin, MetricSpec.histogram("same_hist", [0, 100, 250, 500, 1000], epsilon=2.0)
            )
            for seed, (day, n) in enumerate(DAYS.items(), start=4):  # 4: c and d fall below 0
                values = [0 if i % 3 else 1 for i in range(n)]  # c and d: no one
                assert (
                    post_reports(admin, make_reports(shares, values, day, seed)).status_code == 202
                )
                numbers = [100.0 + 7 * (i % 50) for i in range(n)]
                assert post_reports(
                    admin, make_numeric_reports(mean, numbers, day, seed)
                ).status_code
                spread = [i % 4 for i in range(n)]
                assert (
                    post_reports(admin, make_reports(buckets, spread, day, seed)).status_code == 202
                )
        yield running


def cli_document(server: RunningCollector, name: str) -> dict:
    result = run_cli("--collector", server.url, "--token", ADMIN_TOKEN, "estimate", name,
                     "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_shares_are_the_same_on_every_surface(server: RunningCollector) -> None:
    cli = cli_document(server, "same_browser")
    with server.client(VIEWER_TOKEN) as viewer:
        api = viewer.get("/v1/metrics/same_browser/estimate").json()
    assert cli == api
    assert (api["start"], api["end"], api["n"], api["periods"]) == ("2026-11-15", "2026-11-21",
                                                                    200, 2)  # fmt: skip
    assert (api["method"], api["simultaneous"], api["pooling"]) == ("consistent", True,
                                                                    "overlap-safe")  # fmt: skip
    with signed_in(server) as browser:
        text = browser.get("/dashboard/metrics/same_browser/estimate.csv").text
        page = browser.get("/dashboard/metrics/same_browser").text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["start"], r["end"], r["reports"], r["method"], r["simultaneous"]) for r in rows] == [
        ("2026-11-15", "2026-11-21", "200", "consistent", "true")
    ] * 4
    for row, expected in zip(rows, api["estimates"], strict=True):
        assert row["category"] == expected["category"]
        for key in ("frequency", "ci_low", "ci_high", "unbiased"):
            assert float(row[key]) == expected[key], (row["category"], key)
    clipped = [r for r in api["estimates"] if r["clipped"]]
    assert clipped, "the data should push an unbiased share of nobody below 0"
    for row in clipped:  # one decimal where the interval is ±1 point or wider (issue 41)
        places = 1 if (row["ci_high"] - row["ci_low"]) / 2 >= 0.01 else 2
        shown = f"{row['frequency'] * 100:.{places}f}%{CLIPPED_MARKS['below']}"
        assert shown in page, shown
    assert 'id="estimate-clipped"' in page


def test_a_mean_is_the_same_on_every_surface(server: RunningCollector) -> None:
    cli = cli_document(server, "same_load")
    with server.client(VIEWER_TOKEN) as viewer:
        api = viewer.get("/v1/metrics/same_load/estimate").json()
    assert cli == api
    assert (api["start"], api["end"], api["n"]) == ("2026-11-15", "2026-11-21", 200)
    with signed_in(server) as browser:
        text = browser.get("/dashboard/metrics/same_load/estimate.csv").text
    (row,) = list(csv.DictReader(io.StringIO(text)))
    assert (row["start"], row["end"], row["reports"]) == ("2026-11-15", "2026-11-21", "200")
    for key in ("estimate", "ci_low", "ci_high"):
        assert float(row["mean" if key == "estimate" else key]) == api["mean"][key]


@pytest.mark.parametrize("name", ["same_browser", "same_load", "same_hist"])
@pytest.mark.parametrize("document", ["estimate", "series"])
def test_the_cli_and_the_dashboard_write_the_same_csv(
    server: RunningCollector, name: str, document: str
) -> None:
    """One CSV schema per document (issue 25): the CLI's ``--format csv`` and the dashboard's
    download are the same text, booleans as ``true``/``false``, a histogram's quantiles in it."""
    result = run_cli("--collector", server.url, "--token", ADMIN_TOKEN, document, name,
                     "--format", "csv")  # fmt: skip
    assert result.exit_code == 0, result.output
    with signed_in(server) as browser:
        downloaded = browser.get(f"/dashboard/metrics/{name}/{document}.csv").text
    assert result.stdout_bytes.decode() == downloaded
    rows = list(csv.DictReader(io.StringIO(downloaded)))
    assert rows and "True" not in downloaded and "False" not in downloaded
    if name != "same_load":
        assert {row["simultaneous"] for row in rows} == {"true"}
        assert "estimated_reports" in rows[0] and "count" not in rows[0]
    if name == "same_hist" and document == "estimate":
        quantiles = [row for row in rows if row["quantile"]]
        assert [float(row["quantile"]) for row in quantiles] == [0.5, 0.9, 0.99]
        assert all(row["category"] == "" for row in quantiles)


def test_the_plan_and_the_plan_page_say_what_v_star_is(server: RunningCollector) -> None:
    """Issue 25: "V* per report" was never explained, on the CLI or the dashboard."""
    out = run_cli("plan", "--categories", "5", "--epsilon", "1", "--margin", "0.02").stdout
    with signed_in(server) as browser:
        page = browser.get("/dashboard/plan", params={"k": "5", "epsilon": "1", "margin": "0.02"})
    sentence = "V* is the noise one report carries: with n reports"
    assert sentence in out
    assert f'<p class="meta" id="v-star">{sentence}' in page.text
