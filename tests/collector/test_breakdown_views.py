"""Breakdowns where people read them, against a real collector: the series by slice
(``/series?where=``, ``?by=``), the dashboard's breakdown page and its CSV, and the CLI's
breakdown CSV. A suppressed slice shows no number anywhere: not its estimate, not its count.

Reports are made by the real mechanism (seeded) and posted with their public dims; intervals
at 99.99% (a miss has nominal probability 1e-4 per check).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deniable.client import MetricSpec
from testkit import (
    ADMIN_TOKEN,
    TEST_NOW,
    DatabaseFactory,
    RunningCollector,
    make_numeric_reports,
    make_reports,
    register,
    signed_in,
    unique_name,
    viewer_collector,
)
from testkit.cli import run_cli

PLATFORMS = {"platform": ["ios", "android", "web"], "channel": ["beta", "stable"]}
TODAY = TEST_NOW.date().isoformat()
CONFIDENCE = 0.9999
SLICES = {"ios": (400, 0.2), "android": (300, 0.7), "web": (37, 0.5)}
"""platform: (reports today, true share of true); web is under the minimum (100)."""


def post(uploader: httpx.Client, reports: list[dict[str, Any]], dims: dict[str, str]) -> None:
    for start in range(0, len(reports), 500):
        batch = [
            {**report, "dims": {"channel": "stable", **dims}}
            for report in reports[start : start + 500]
        ]
        response = uploader.post("/v1/reports", json={"reports": batch})
        assert response.status_code == 202, response.text


def seed_boolean(admin: httpx.Client, uploader: httpx.Client, period: str = TODAY) -> MetricSpec:
    """A boolean with two dimensions, each platform's reports of known truth in ``period``."""
    spec = register(
        admin, MetricSpec.boolean(unique_name("dark"), epsilon=2.0, dimensions=PLATFORMS)
    )
    for seed, (platform, (n, share)) in enumerate(SLICES.items()):
        values = [1 if i < round(n * share) else 0 for i in range(n)]
        post(uploader, make_reports(spec, values, period, seed), {"platform": platform})
    return spec


@pytest.fixture(scope="module")
def collector(backend: str, databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector with the viewer token (so the dashboard signs in), on each backend."""
    with viewer_collector(databases.new(backend)) as server:
        yield server


def suppressed_numbers(text: str) -> list[str]:
    """Every number in ``text`` other than the minimum the note names (100)."""
    return [match for match in re.findall(r"\d+(?:[.,]\d+)*", text) if match != "100"]


def test_a_slice_series_gives_each_period_its_own_breakdown(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = seed_boolean(admin, uploader)
    url = f"/v1/metrics/{spec.name}/series"
    filtered = admin.get(url, params={"where": "platform:ios", "confidence": CONFIDENCE})
    assert filtered.status_code == 200, filtered.text
    document = filtered.json()
    assert (document["by"], document["where"]) == ([], {"platform": "ios"})
    assert document["end"] == TODAY and len(document["series"]) == 7
    *earlier, today = document["series"]
    for point in earlier:
        (empty,) = point["slices"]
        assert empty["suppressed"] and empty["estimate"] is None
    (ios,) = today["slices"]
    assert ios["estimate"]["n"] == SLICES["ios"][0]
    true_row = ios["estimate"]["estimates"][1]
    assert true_row["ci_low"] <= SLICES["ios"][1] <= true_row["ci_high"]
    split = admin.get(url, params={"by": "platform", "start": TODAY, "end": TODAY}).json()
    (point,) = split["series"]
    rows = {row["values"]["platform"]: row for row in point["slices"]}
    assert list(rows) == ["ios", "android", "web", "other"]
    assert point["slice_confidence"] == pytest.approx(1 - 0.05 / 2)
    assert rows["web"]["note"] == "suppressed, fewer than 100 reports"
    assert rows["web"]["estimate"] is None and rows["android"]["estimate"]["n"] == 300
    # the same numbers as the range estimate over that one period
    estimate = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={"by": "platform", "start": TODAY, "end": TODAY},
    ).json()
    assert [row["estimate"] for row in estimate["slices"]] == [
        row["estimate"] for row in point["slices"]
    ]


def test_a_slice_series_is_bounded_and_refuses_bad_slices(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.categorical(
            unique_name("screen"), [f"s{i}" for i in range(30)], epsilon=1.0, dimensions=PLATFORMS
        ),
    )
    url = f"/v1/metrics/{spec.name}/series"
    for params, problem in (
        ({"by": "country"}, "has no dimension 'country'"),
        ({"where": "platform:tizen"}, "listed values or 'other'"),
        ({"by": "platform", "q": "0.5"}, "not quantiles"),
        ({"by": ["platform", "channel"], "start": "2026-01-01"}, "DENIABLE_MAX_SERIES_CELLS"),
    ):
        response = admin.get(url, params=params)
        assert response.status_code == 422 and problem in response.text, response.text


def test_the_dashboard_breakdown_shows_slice_bars_and_never_a_suppressed_number(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = seed_boolean(admin, uploader)
    with signed_in(collector) as viewer:
        metric_page = viewer.get(f"/dashboard/metrics/{spec.name}")
        assert metric_page.status_code == 200
        assert 'id="breakdown-picker"' in metric_page.text
        page = viewer.get(
            f"/dashboard/metrics/{spec.name}/breakdown",
            params={"by": "platform", "start": TODAY, "end": TODAY},
        )
        assert page.status_code == 200, page.text
        chart = page.text.split('id="slices-chart"', 1)[1].split("</svg>", 1)[0]
        figures = re.findall(
            r'<g class="slice" data-slice="([^"]+)">(.*?)<line class="rule"', chart, flags=re.S
        )
        assert [name for name, _ in figures] == ["ios", "android"]
        for name, inner in figures:
            (whisker,) = re.findall(r'class="whisker"[^>]*data-low="([^"]+)"', inner)
            assert 0 <= float(whisker) <= 1
            assert f"n = {SLICES[name][0]:,} reports" in inner
        note = re.search(r'<p class="suppressed-note" id="suppressed-slices">(.*?)</p>', page.text)
        assert note is not None
        assert re.findall(r'data-slice="(\w+)"', note.group(1)) == ["web", "other"]
        said = re.sub(r"<[^>]+>", "", note.group(1))
        assert said == "Suppressed, fewer than 100 reports: web, other."
        rows = re.findall(r'<tr class="suppressed" data-slice="(\w+)">(.*?)</tr>', page.text)
        assert [name for name, _ in rows] == ["web", "other"]
        for _, inner in rows:
            assert suppressed_numbers(re.sub(r"<[^>]+>", " ", inner)) == []
        link = re.search(r'id="breakdown-csv" class="csv" href="([^"]+)"', page.text)
        assert link is not None
        download = viewer.get(link.group(1).replace("&amp;", "&"))
        assert download.status_code == 200
        assert download.headers["content-type"].startswith("text/csv")
        check_csv(download.text)
        wide = register(
            admin,
            MetricSpec.categorical(
                unique_name("wide"),
                [f"c{i}" for i in range(200)],
                epsilon=1.0,
                dimensions=PLATFORMS,
            ),
        )
        refused = viewer.get(
            f"/dashboard/metrics/{wide.name}/breakdown",
            params={"by": ["platform", "channel"], "start": "2023-12-01"},
        )
        assert refused.status_code == 422 and "DENIABLE_MAX_ESTIMATE_CELLS" in refused.text
        unknown = viewer.get(f"/dashboard/metrics/{spec.name}/breakdown", params={"by": "os"})
        assert unknown.status_code == 422 and "has no dimension" in unknown.text
        stranger = httpx.get(f"{collector.url}/dashboard/metrics/{spec.name}/breakdown")
        assert stranger.status_code == 303


def check_csv(text: str) -> list[dict[str, str]]:
    """The breakdown CSV: a row per shown slice and category, one empty row per suppressed
    slice (no number in any cell but the note's minimum)."""
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and "by.platform" in rows[0] and "slice_confidence" in rows[0]
    shown = [row for row in rows if row["suppressed"] == "false"]
    assert {row["by.platform"] for row in shown} == {"ios", "android"}
    assert {row["category"] for row in shown} == {"false", "true"}
    hidden = [row for row in rows if row["suppressed"] == "true"]
    assert [row["by.platform"] for row in hidden] == ["web", "other"]
    for row in hidden:
        assert row["note"] == "suppressed, fewer than 100 reports"
        said = {"metric", "start", "end", "where", "confidence", "suppressed", "note"}
        filled = [
            key for key, value in row.items() if key not in said and not key.startswith("by.")
        ]
        assert [key for key in filled if row[key]] == []
    return rows


def test_the_cli_writes_the_same_breakdown_csv_as_the_dashboard(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = seed_boolean(admin, uploader)
    cli = ("--collector", collector.url, "--token", ADMIN_TOKEN, "estimate", spec.name)
    printed = run_cli(*cli, "--by", "platform", "--start", TODAY, "--end", TODAY, "--format", "csv")
    assert printed.exit_code == 0, printed.output
    check_csv(printed.stdout)
    with signed_in(collector) as viewer:
        download = viewer.get(
            f"/dashboard/metrics/{spec.name}/breakdown.csv",
            params={"by": "platform", "start": TODAY, "end": TODAY},
        )
    assert download.text.splitlines() == printed.stdout.splitlines()


def test_a_numeric_breakdown_page_draws_slice_means(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.numeric(
            unique_name("load"), lower=0, upper=100, epsilon=2.0, dimensions=PLATFORMS
        ),
    )
    for seed, (platform, value) in enumerate((("ios", 20.0), ("android", 70.0))):
        post(
            uploader, make_numeric_reports(spec, [value] * 300, TODAY, seed), {"platform": platform}
        )
    with signed_in(collector) as viewer:
        page = viewer.get(
            f"/dashboard/metrics/{spec.name}/breakdown",
            params={"by": "platform", "where": "channel:stable", "start": TODAY, "end": TODAY},
        )
        csv_text = viewer.get(
            f"/dashboard/metrics/{spec.name}/breakdown.csv",
            params={"by": "platform", "start": TODAY, "end": TODAY},
        ).text
    assert page.status_code == 200, page.text
    wide = page.text.split('id="slices-chart"', 1)[1].split("</svg>", 1)[0]
    dots = re.findall(r'<circle class="dot" data-estimate="([^"]+)"', wide)
    assert len(dots) == 2
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert [row["by.platform"] for row in rows] == ["ios", "android", "web", "other"]
    assert "mean" in rows[0] and rows[2]["mean"] == "" and rows[2]["reports"] == ""


def test_the_breakdown_page_compares_two_slices_and_draws_each_slice_over_time(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = seed_boolean(admin, uploader)
    yesterday = (TEST_NOW.date() - dt.timedelta(days=1)).isoformat()
    post(uploader, make_reports(spec, [1] * 150 + [0] * 50, yesterday, 9), {"platform": "ios"})
    base = {"by": "platform", "start": yesterday, "end": TODAY}
    path = f"/dashboard/metrics/{spec.name}/breakdown"
    with signed_in(collector) as viewer:
        page = viewer.get(path, params={**base, "first": "ios", "second": "android"})
        refused = viewer.get(path, params={**base, "first": "ios", "second": "web"})
        half = viewer.get(path, params={**base, "first": "ios"})
    assert page.status_code == 200, page.text
    with collector.client(ADMIN_TOKEN) as reader:
        api = reader.get(
            f"/v1/metrics/{spec.name}/estimate", params={**base, "compare": "ios,android"}
        ).json()["comparison"]
    (true_row,) = [row for row in api["rows"] if row["category"] == "true"]
    assert true_row["verdict"] == "lower"
    row = re.search(r'<tr data-category="true">(.*?)</tr>', page.text)
    assert row is not None and "ios lower than android" in row.group(1)
    whisker = re.search(
        r'<line class="whisker" data-category="true" data-low="([^"]+)" data-high="([^"]+)"',
        page.text.split('id="difference-chart"')[1],
    )
    assert whisker is not None
    assert (float(whisker.group(1)), float(whisker.group(2))) == (
        true_row["ci_low"],
        true_row["ci_high"],
    )
    # each slice over time: ios in both periods, android today only, web and other never
    trend = page.text.split('id="slice-trend"')[1]
    points = re.findall(r'<circle class="point" data-category="(\w+)" data-period="([^"]+)"', trend)
    assert sorted(points) == sorted([("ios", yesterday), ("ios", TODAY), ("android", TODAY)]), (
        points
    )
    assert "Suppressed in every period (fewer than 100 reports each): web, other." in trend
    # a suppressed slice cannot be compared: the page says so, with no number of it
    assert refused.status_code == 200
    problem = re.search(r'<p class="error" role="alert">(.*?)</p>', refused.text)
    assert problem is not None and "suppressed" in problem.group(1)
    assert suppressed_numbers(re.sub(r"\{[^}]*\}", "", problem.group(1))) == []
    assert half.status_code == 422 and "choose two slices" in half.text


def test_the_cli_writes_a_slice_series_as_json_or_csv(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = seed_boolean(admin, uploader)
    cli = ("--collector", collector.url, "--token", ADMIN_TOKEN, "series", spec.name)
    span = ("--start", TODAY, "--end", TODAY, "--by", "platform")
    printed = run_cli(*cli, *span, "--format", "json")
    assert printed.exit_code == 0, printed.output
    api = admin.get(
        f"/v1/metrics/{spec.name}/series", params={"by": "platform", "start": TODAY, "end": TODAY}
    ).json()
    assert json.loads(printed.stdout) == api
    written = run_cli(*cli, *span, "--format", "csv")
    assert written.exit_code == 0, written.output
    rows = list(csv.DictReader(io.StringIO(written.stdout)))
    assert {row["period"] for row in rows} == {TODAY}
    shown = [row for row in rows if row["suppressed"] == "false"]
    assert [(row["by.platform"], row["category"]) for row in shown] == [
        ("ios", "false"),
        ("ios", "true"),
        ("android", "false"),
        ("android", "true"),
    ]
    hidden = [row for row in rows if row["suppressed"] == "true"]
    assert [row["by.platform"] for row in hidden] == ["web", "other"]
    assert all(
        row["reports"] == row["frequency"] == row["slice_confidence"] == "" for row in hidden
    )
    table = run_cli(*cli, *span)
    assert table.exit_code == 0, table.output
    drawn = [line.split("│") for line in table.stdout.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in line[1:-1]] for line in drawn]
    assert [(row[1], row[2]) for row in cells if row[2]] == [("ios", "true"), ("android", "true")]
    assert [row[1] for row in cells if row[4] == "suppressed"] == ["web", "other"]
    picked = run_cli(*cli, *span, "--top", "1")
    assert picked.exit_code != 0 and "leave out --category and --top" in picked.stderr
