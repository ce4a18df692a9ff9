"""``compare_to`` on the estimate route (collector/queries/changes.py): a numeric metric's mean
in value units, the whole population of a metric without dimensions, the explicit window
form, and every refusal a 422 naming its problem, the work bounded before it starts.

The mean's change is checked against the estimators' own mean_change on the same stored sums
(one source of truth), and covers the true change at 99.99%.
"""

from __future__ import annotations

import datetime as dt

import httpx
import numpy as np
import pytest

from deniable.client import MetricSpec
from deniable.estimators import PeriodSums
from deniable.estimators.differences import mean_change
from testkit import (
    ADMIN_TOKEN,
    RunningCollector,
    make_numeric_reports,
    make_reports,
    register,
    unique_name,
)
from testkit.cli import run_cli


def _days(collector: RunningCollector, count: int) -> list[str]:
    today = collector.clock().date()
    return [(today - dt.timedelta(days=back)).isoformat() for back in range(count - 1, -1, -1)]


def _sums(spec: MetricSpec, reports: list[dict]) -> PeriodSums:
    payloads = np.array([report["payload"] for report in reports], dtype=np.float64)
    return PeriodSums(reports[0]["period"], len(payloads), payloads.sum(), (payloads**2).sum())


def test_a_mean_compared_with_the_day_before_in_value_units(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin, MetricSpec.numeric(unique_name("load"), lower=0, upper=1000, epsilon=2.0)
    )
    yesterday, today = _days(collector, 2)
    rng = np.random.default_rng(11)
    before, after = rng.uniform(100, 300, 800), rng.uniform(400, 600, 800)
    sent = {}
    for day, values, seed in ((yesterday, before, 1), (today, after, 2)):
        sent[day] = make_numeric_reports(spec, values.tolist(), day, seed=seed)
        assert uploader.post("/v1/reports", json={"reports": sent[day]}).status_code == 202
    params = {"start": today, "end": today, "confidence": 0.9999}
    response = admin.get(
        f"/v1/metrics/{spec.name}/estimate", params={**params, "compare_to": "previous"}
    )
    assert response.status_code == 200, response.text
    document = response.json()
    assert (document["baseline_start"], document["method"]) == (yesterday, "unbiased")
    assert (document["lower"], document["upper"], document["min_slice_reports"]) == (0, 1000, None)
    (whole,) = document["slices"]
    assert (whole["values"], whole["n"], whole["baseline_n"]) == ({}, 800, 800)
    (row,) = whole["rows"]
    expected = mean_change(
        spec.numeric_randomizer,
        0.0,
        1000.0,
        [_sums(spec, sent[today])],
        [_sums(spec, sent[yesterday])],
        confidence=0.9999,
    )
    assert (row["category"], row["verdict"]) == ("mean", "higher")
    for key in ("current", "baseline", "difference", "ci_low", "ci_high"):  # sums in another order
        assert row[key] == pytest.approx(getattr(expected, key), rel=1e-9), key
    truth = float(np.mean(after) - np.mean(before))
    assert row["ci_low"] <= truth <= row["ci_high"], (truth, row)
    cli = ("--collector", collector.url, "--token", ADMIN_TOKEN, "estimate", spec.name)
    cli += ("--start", today, "--end", today, "--confidence", "0.9999", "--compare-to", "previous")
    table = run_cli(*cli)
    assert table.exit_code == 0, table.output
    (line,) = [text for text in table.stdout.splitlines() if "mean" in text and "higher" in text]
    assert f"{row['difference']:+,.0f}" in line or f"{row['difference']:+,.1f}" in line, line
    assert run_cli(*cli, "--format", "json").stdout.strip() != ""
    offline = run_cli(*cli, "--from-file", "nowhere.parquet")
    assert offline.exit_code != 0 and "Traceback" not in offline.output, offline.output
    assert "leave out --from-file" in offline.output, offline.output
    explicit = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={**params, "compare_to": f"{yesterday}..{yesterday}"},
    )
    assert explicit.json() == document


def test_shares_of_a_metric_without_dimensions_and_an_empty_baseline(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin, MetricSpec.categorical(unique_name("color"), ["a", "b", "c"], epsilon=1.0)
    )
    days = _days(collector, 3)
    reports = make_reports(spec, [0, 1, 2, 0] * 50, days[-1], seed=4)
    assert uploader.post("/v1/reports", json={"reports": reports}).status_code == 202
    response = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={"start": days[-1], "end": days[-1], "compare_to": f"{days[0]}..{days[1]}"},
    )
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["row_confidence"] == 1 - 0.05 / 3
    (whole,) = document["slices"]
    assert (whole["n"], whole["baseline_n"]) == (200, 0)
    for row in whole["rows"]:
        assert row["difference"] is None and row["baseline"] is None
        assert (row["ci_low"], row["ci_high"]) == (-1.0, 1.0)
        assert row["verdict"] == "no detectable change at 95%"


def test_bad_comparisons_are_refused_naming_the_problem(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.categorical(
            unique_name("wide"), [f"c{i}" for i in range(10_000)], epsilon=1.0, mechanism="oue"
        ),
    )
    text = register(admin, MetricSpec.text(unique_name("term"), max_length=4, epsilon=4.0))
    days = _days(collector, 2)
    url = f"/v1/metrics/{spec.name}/estimate"
    limit = collector.settings.max_estimate_cells
    periods = limit // (2 * 10_000) + 1  # both windows together pass the limit
    for params, problem in (
        ({"compare_to": "previous", "start": days[0], "end": days[1]}, ""),
        ({"compare_to": f"{days[0]}..{days[1]}"}, "shares periods with the range"),
        ({"compare_to": f"{days[1]}..{days[0]}"}, "is after end"),
        ({"compare_to": "yesterday"}, "give previous, or a window START..END"),
        ({"compare_to": "previous", "q": 0.5}, "leave out compare (slices) and q"),
        ({"compare_to": "previous", "by": "platform"}, "has no dimension 'platform'"),
        ({"compare_to": "x" * 81}, "at most 80 characters"),
        (
            {"compare_to": "previous", "start": "0001-01-01", "end": "0001-01-01"},
            "there is no window of 1 periods before 0001-01-01",
        ),
    ):
        response = admin.get(url, params=params)
        if not problem:
            assert response.status_code == 200, response.text
            continue
        assert response.status_code == 422 and problem in response.text, (params, response.text)
    first = (collector.clock().date() - dt.timedelta(days=periods - 1)).isoformat()
    wide = admin.get(url, params={"compare_to": "previous", "start": first})
    assert wide.status_code == 422 and "DENIABLE_MAX_ESTIMATE_CELLS" in wide.text, wide.text
    refused = admin.get(f"/v1/metrics/{text.name}/estimate", params={"compare_to": "previous"})
    assert refused.status_code == 422 and "text metric" in refused.text, refused.text


def test_a_default_range_before_the_first_day_of_the_calendar_is_refused(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    """Was a 500: the 7 periods ending at 0001-01-02 start before year 1."""
    spec = register(admin, MetricSpec.boolean(unique_name("early"), epsilon=1.0))
    for route in ("estimate", "series"):
        response = admin.get(f"/v1/metrics/{spec.name}/{route}", params={"end": "0001-01-02"})
        assert response.status_code == 422 and "give start" in response.text, response.text
