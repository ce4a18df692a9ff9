"""Category labels that a spreadsheet would run as formulas, or that would split a row, come
out of the CLI's ``--format csv`` and the dashboard's CSV downloads neutralized and whole.

One real collector (in a thread, SQLite file) holds a metric whose labels are OWASP's CSV
injection examples and a bare CR; ``deniable estimate`` and ``deniable series`` read it through
the real CLI over HTTP, and a signed-in viewer downloads the dashboard's two CSVs. Each file is
parsed back with the csv module: one row per category (and period), every row as wide as the
header, and each hostile label present behind a ``'`` (docs/security.md).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
from collections.abc import Iterator

import pytest

from deniable.client import MetricSpec
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    DatabaseFactory,
    RunningCollector,
    make_reports,
    post_reports,
    register,
    signed_in,
    viewer_collector,
)
from testkit.cli import run_cli

LABELS = ["=cmd|' /C calc'!A0", "+1+2", "-2+3", "@SUM(1+1)", "\tlead", "bare\rcr", "plain"]
"""The hostile labels, a CR inside one, and a harmless one."""

SHOWN = ["'=cmd|' /C calc'!A0", "'+1+2", "'-2+3", "'@SUM(1+1)", "'\tlead", "bare\rcr", "plain"]
"""How each must read back from the CSV."""

DAYS = tuple((TEST_NOW.date() - dt.timedelta(days=back)).isoformat() for back in (2, 1, 0))


@pytest.fixture(scope="module")
def hostile(databases: DatabaseFactory) -> Iterator[tuple[RunningCollector, str]]:
    """A collector with the hostile metric and three days of its reports."""
    with viewer_collector(databases.new("sqlite")) as server:
        with server.client(ADMIN_TOKEN) as admin:
            spec = register(admin, MetricSpec.categorical("formulas", LABELS, epsilon=2.0))
        with server.client(INGEST_KEY) as device:
            for i, day in enumerate(DAYS):
                values = [v for v in range(len(LABELS)) for _ in range(20 + 5 * v)]
                response = post_reports(device, make_reports(spec, values, day, 40 + i))
                assert response.status_code == 202, response.text
        yield server, spec.name


def parsed(text: str) -> list[dict[str, str]]:
    """The CSV's rows by header, each checked to be exactly as wide as the header."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows and all(len(row) == len(rows[0]) for row in rows), rows
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def numbers_stay_numbers(rows: list[dict[str, str]]) -> None:
    """Every estimate column reads as a number (negative ones too), never behind a quote; an
    empty cell is a value the method does not give."""
    for row in rows:
        assert row["frequency"], row
        for key in ("frequency", "ci_low", "ci_high", "std_error"):
            assert row[key] == "" or math.isfinite(float(row[key])), row


def test_the_cli_estimate_and_series_csv_neutralize_every_label(
    hostile: tuple[RunningCollector, str],
) -> None:
    server, name = hostile
    at = ("--collector", server.url, "--token", ADMIN_TOKEN)
    span = ("--start", DAYS[0], "--end", DAYS[-1], "--format", "csv")
    estimate = run_cli(*at, "estimate", name, *span)
    assert estimate.exit_code == 0, estimate.output
    rows = parsed(estimate.stdout)
    assert [row["category"] for row in rows] == SHOWN
    numbers_stay_numbers(rows)
    series = run_cli(*at, "series", name, "--top", str(len(LABELS)), *span)
    assert series.exit_code == 0, series.output
    rows = parsed(series.stdout)
    assert len(rows) == len(DAYS) * len(LABELS)
    assert {row["category"] for row in rows} == set(SHOWN)
    assert [row["period"] for row in rows[:: len(LABELS)]] == list(DAYS)
    numbers_stay_numbers(rows)


def test_the_dashboard_csvs_neutralize_every_label(hostile: tuple[RunningCollector, str]) -> None:
    server, name = hostile
    with signed_in(server) as browser:
        params = {"start": DAYS[0], "end": DAYS[-1]}
        estimate = browser.get(f"/dashboard/metrics/{name}/estimate.csv", params=params)
        series = browser.get(f"/dashboard/metrics/{name}/series.csv", params=params)
    assert estimate.status_code == 200 and series.status_code == 200
    rows = parsed(estimate.text)
    assert sorted(row["category"] for row in rows) == sorted(SHOWN)
    numbers_stay_numbers(rows)
    rows = parsed(series.text)
    assert {row["category"] for row in rows} == set(SHOWN)
    assert len(rows) == len(DAYS) * len(LABELS)
    numbers_stay_numbers(rows)


def test_the_breakdown_csvs_neutralize_every_label(hostile: tuple[RunningCollector, str]) -> None:
    server, _ = hostile
    dims = {"platform": ["ios", "android"]}
    with server.client(ADMIN_TOKEN) as admin:
        spec = register(
            admin,
            MetricSpec.categorical("formulas_by_platform", LABELS, epsilon=2.0, dimensions=dims),
        )
    values = [v for v in range(len(LABELS)) for _ in range(20 + 5 * v)]
    reports = [{**r, "dims": {"platform": "ios"}} for r in make_reports(spec, values, DAYS[-1], 50)]
    with server.client(INGEST_KEY) as device:
        response = post_reports(device, reports)
        assert response.status_code == 202, response.text
    span = ("--start", DAYS[-1], "--end", DAYS[-1])
    printed = run_cli(
        "--collector", server.url, "--token", ADMIN_TOKEN, "estimate", spec.name,
        "--by", "platform", *span, "--format", "csv",
    )  # fmt: skip
    assert printed.exit_code == 0, printed.output
    with signed_in(server) as browser:
        params = {"by": "platform", "start": DAYS[-1], "end": DAYS[-1]}
        download = browser.get(f"/dashboard/metrics/{spec.name}/breakdown.csv", params=params)
        page = browser.get(
            f"/dashboard/metrics/{spec.name}/breakdown", params={**params, "top": len(LABELS)}
        )
    assert download.status_code == 200 and page.status_code == 200
    for text in (printed.stdout, download.text):
        rows = parsed(text)
        shown = [row for row in rows if row["suppressed"] == "false"]
        assert [row["category"] for row in shown] == SHOWN
        assert {row["by.platform"] for row in shown} == {"ios"}
        numbers_stay_numbers(shown)
        hidden = [row for row in rows if row["suppressed"] == "true"]
        assert [row["by.platform"] for row in hidden] == ["android", "other"]
        assert all(row["frequency"] == row["reports"] == "" for row in hidden)
    assert "=cmd|' /C" not in page.text and "=cmd|&#39; /C calc&#39;!A0" in page.text
