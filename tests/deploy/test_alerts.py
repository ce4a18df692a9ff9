"""The alerting rules in deploy/prometheus-alerts.yaml, checked and fired by promtool on
scrapes recorded from a real collector.

A collector in a thread of this process is scraped as Prometheus would scrape it: its
estimates (``GET /v1/estimates/metrics``) at the end of a week and again at the end of the
next, in which one metric changed and another did not; and its ``/metrics`` every 5 minutes
while two metrics receive reports and one of them stops. The scrapes become the input series
of promtool's unit-test format (``promtool test rules``), and promtool checks which alerts
fire and with what labels and annotations. The tests skip without promtool unless
``DENIABLE_REQUIRE_PROMTOOL`` is set (CI sets it).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from deniable.client import MetricSpec
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    VIEWER_TOKEN,
    Clock,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_numeric_reports,
    make_reports,
    post_reports,
    register,
)
from testkit.exposition import Samples, parse_exposition
from testkit.promtool import promtool, require_promtool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus-alerts.yaml"
SCRAPE_CONFIG = ROOT / "deploy" / "grafana-prometheus-scrape.yaml"

FIRST_WEEK_END = dt.datetime(2026, 11, 14, 12, 0, tzinfo=dt.UTC)
"""The server clock of the first estimates scrape (a week of reports, 11-08 to 11-14)."""
DAILY = 400
"""Reports per metric and day."""
STEP = 5
"""Minutes between samples and between rule evaluations in the promtool tests."""
WEEK = 7 * 24 * 60 // STEP
"""Samples in a week."""
AFTER = 2 * 24 * 60 // STEP
"""Samples of the second week's estimate (two days of it)."""
TICKS = 72
"""Scrapes of /metrics in the ingestion recording (6 hours, every 5 minutes)."""
STOPS_AFTER = 24
"""The tick after which the stopping metric receives no more reports (2 hours in)."""
UPLOAD = 10
"""Reports per metric and upload in the ingestion recording."""

ESTIMATES = {"job": "deniable-estimates", "instance": "telemetry.example.com:443"}
OPERATOR = {"job": "deniable-collector", "instance": "10.0.0.7:8000"}
"""The target labels Prometheus adds (the jobs of deploy/grafana-prometheus-scrape.yaml)."""


@dataclass(frozen=True)
class Recorded:
    """The scrapes recorded from the collector."""

    before: Samples
    """Estimates at the end of the first week."""
    after: Samples
    """Estimates at the end of the second week."""
    operator: list[Samples]
    """``/metrics`` at each tick of the ingestion recording."""


def days(end: dt.datetime) -> list[str]:
    """The 7 days ending at ``end``'s, oldest first."""
    return [(end.date() - dt.timedelta(days=back)).isoformat() for back in range(6, -1, -1)]


@pytest.fixture(scope="module")
def recorded(databases: DatabaseFactory) -> Iterator[Recorded]:
    """Scrapes of a real collector: dark mode goes from 20% to 50% of devices and the mean
    load from 100 to 600 between two weeks while the platform shares stay put; then dark
    mode's reports stop 2 hours into a 6-hour recording of /metrics while the platform's go on."""
    require_promtool()
    clock = Clock(FIRST_WEEK_END)
    settings = collector_settings(
        databases.new("sqlite"), viewer_token=VIEWER_TOKEN, prometheus_metric_labels=True
    )
    server = RunningCollector(settings, clock).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            dark = register(admin, MetricSpec.boolean("alert_dark", epsilon=2))
            os_ = register(admin, MetricSpec.categorical("alert_os", ["ios", "android"], epsilon=2))
            load = register(admin, MetricSpec.numeric("alert_load", lower=0, upper=1000, epsilon=2))
        scrapes = []
        with server.client(INGEST_KEY) as device, server.client(VIEWER_TOKEN) as viewer:
            for week, (dark_share, mean) in enumerate(((0.2, 100.0), (0.5, 600.0))):
                for i, day in enumerate(days(clock.now)):
                    seed = 100 * week + 10 * i
                    dark_true = round(DAILY * dark_share)
                    batch = (
                        make_reports(dark, [1] * dark_true + [0] * (DAILY - dark_true), day, seed)
                        + make_reports(
                            os_, [0] * (DAILY * 3 // 4) + [1] * (DAILY // 4), day, seed + 1
                        )
                        + make_numeric_reports(load, [mean] * DAILY, day, seed + 2)
                    )
                    for start in range(0, len(batch), 1000):
                        response = post_reports(device, batch[start : start + 1000])
                        assert response.status_code == 202, response.text
                scrape = viewer.get("/v1/estimates/metrics")
                assert scrape.status_code == 200, scrape.text
                scrapes.append(parse_exposition(scrape.text))
                clock.advance(7)
            clock.now = FIRST_WEEK_END + dt.timedelta(days=7)
            today = clock.now.date().isoformat()
            operator = []
            with server.client() as prometheus:
                for tick in range(TICKS):
                    seed = 1000 + 10 * tick
                    batch = make_reports(os_, [0, 1] * (UPLOAD // 2), today, seed)
                    if tick < STOPS_AFTER:
                        batch += make_reports(dark, [0, 1] * (UPLOAD // 2), today, seed + 1)
                    response = post_reports(device, batch)
                    assert response.status_code == 202, response.text
                    metrics = prometheus.get("/metrics")
                    assert metrics.status_code == 200, metrics.text
                    operator.append(parse_exposition(metrics.text))
        yield Recorded(scrapes[0], scrapes[1], operator)
    finally:
        server.stop()


def series_name(key: tuple[str, tuple[tuple[str, str], ...]], target: dict[str, str]) -> str:
    """A sample's series in PromQL notation, with the target labels Prometheus adds."""
    name, labels = key
    pairs = sorted({**dict(labels), **target}.items())
    return name + "{" + ",".join(f"{label}={json.dumps(value)}" for label, value in pairs) + "}"


def run_length(values: Sequence[float | None]) -> str:
    """Sample values in promtool's notation: ``_xN`` for N missing, ``v+0xN`` for N+1 equal."""
    parts: list[str] = []
    start = 0
    while start < len(values):
        stop = start
        while stop + 1 < len(values) and values[stop + 1] == values[start]:
            stop += 1
        count = stop - start + 1
        value = values[start]
        if value is None:
            parts.append(f"_x{count}")
        else:
            parts.append(f"{value!r}+0x{count - 1}")
        start = stop + 1
    return " ".join(parts)


def input_series(scrapes: Sequence[Samples], target: dict[str, str]) -> list[dict[str, str]]:
    """promtool input series of ``scrapes``, one sample each, in order (missing: ``_``)."""
    keys = sorted({key for scrape in scrapes for key in scrape})
    return [
        {
            "series": series_name(key, target),
            "values": run_length([scrape.get(key) for scrape in scrapes]),
        }
        for key in keys
    ]


def held(scrape: Samples, samples: int) -> list[Samples]:
    """One scrape repeated ``samples`` times: an estimate that stayed put for that long."""
    return [scrape] * samples


def percentage(value: float) -> str:
    """Prometheus's ``humanizePercentage``: four significant digits and ``%``."""
    return f"{value * 100:.4g}%"


def value(scrape: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` in ``scrape``."""
    return scrape[(name, tuple(sorted(labels.items())))]


def change_alert(
    scrape: Samples, metric: str, direction: str, category: str | None = None
) -> dict[str, Any]:
    """The DeniableDetectableChange alert promtool must show for ``metric`` (a share when
    ``category`` is given, else the mean), its annotations written from ``scrape``."""
    labels = {**ESTIMATES, "metric": metric, "severity": "info", "direction": direction}
    del labels["instance"]  # the rule keeps job, metric and category only
    end = "low" if direction == "higher" else "high"
    side = "above" if direction == "higher" else "below"
    if category is None:
        estimate = value(scrape, f"deniable_estimate_mean_{end}", metric=metric)
        summary = f"{metric} mean: detectably {direction} than a week ago"
        description = (
            f"The mean's 95% interval now lies {side} the interval of a week ago "
            f"({end} end {estimate:.4g})."
        )
        return {
            "exp_labels": {**labels, "estimate": "mean"},
            "exp_annotations": {"summary": summary, "description": description},
        }
    estimate = value(scrape, f"deniable_estimate_share_{end}", metric=metric, category=category)
    summary = f"{metric} {category}: detectably {direction} than a week ago"
    description = (
        f"The share's 95% interval now lies {side} the interval of a week ago "
        f"({end} end {percentage(estimate)})."
    )
    return {
        "exp_labels": {**labels, "category": category, "estimate": "share"},
        "exp_annotations": {"summary": summary, "description": description},
    }


def stopped_alert(metric: str) -> dict[str, Any]:
    """The DeniableIngestionStopped alert promtool must show for ``metric``."""
    return {
        "exp_labels": {"job": OPERATOR["job"], "metric": metric, "severity": "warning"},
        "exp_annotations": {
            "summary": f"{metric}: no reports accepted for an hour",
            "description": (
                f"Reports of {metric} were accepted in the day before and none in the last "
                "hour: check the SDKs' uploads, the ingest key, a shuffler in between and the "
                "collector's rejected counts (deniable_reports_rejected_total)."
            ),
        },
    }


def minutes(samples: int) -> str:
    """A promtool duration ``samples`` steps from the start."""
    return f"{samples * STEP}m"


def unit_tests(recorded: Recorded) -> dict[str, Any]:
    """promtool's unit-test file: the change fires on the changed week only, for the changed
    metrics only, and ingestion stopping fires for the metric that stopped only."""
    changed = input_series(held(recorded.before, WEEK) + held(recorded.after, AFTER), ESTIMATES)
    steady = input_series(held(recorded.before, WEEK + AFTER), ESTIMATES)
    operator = input_series(recorded.operator, OPERATOR)
    after = recorded.after
    fired = [
        change_alert(after, "alert_dark", "higher", "true"),
        change_alert(after, "alert_dark", "lower", "false"),
        change_alert(after, "alert_load", "higher"),
    ]
    return {
        "rule_files": [str(RULES)],
        "evaluation_interval": f"{STEP}m",
        "tests": [
            {
                "name": "a detectable change fires after an hour, for the changed metrics only",
                "interval": f"{STEP}m",
                "input_series": changed,
                "alert_rule_test": [
                    {"eval_time": minutes(WEEK - 1), "alertname": "DeniableDetectableChange"},
                    {
                        "eval_time": minutes(WEEK + 6),
                        "alertname": "DeniableDetectableChange",
                    },
                    {
                        "eval_time": minutes(WEEK + 24),
                        "alertname": "DeniableDetectableChange",
                        "exp_alerts": fired,
                    },
                ],
            },
            {
                "name": "an estimate that stays put never fires",
                "interval": f"{STEP}m",
                "input_series": steady,
                "alert_rule_test": [
                    {"eval_time": minutes(WEEK + 24), "alertname": "DeniableDetectableChange"},
                    {
                        "eval_time": minutes(WEEK + AFTER - 1),
                        "alertname": "DeniableDetectableChange",
                    },
                ],
            },
            {
                "name": "ingestion stopping fires for the metric that stopped only",
                "interval": f"{STEP}m",
                "input_series": operator,
                "alert_rule_test": [
                    {"eval_time": minutes(STOPS_AFTER), "alertname": "DeniableIngestionStopped"},
                    {
                        "eval_time": minutes(STOPS_AFTER + 12),
                        "alertname": "DeniableIngestionStopped",
                    },
                    {
                        "eval_time": minutes(TICKS - 1),
                        "alertname": "DeniableIngestionStopped",
                        "exp_alerts": [stopped_alert("alert_dark")],
                    },
                ],
            },
        ],
    }


def test_promtool_checks_the_rules() -> None:
    require_promtool()
    checked = promtool("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_the_alerts_fire_on_recorded_scrapes(recorded: Recorded, tmp_path: Path) -> None:
    before, after = recorded.before, recorded.after
    assert value(after, "deniable_estimate_share_low", metric="alert_dark", category="true") > (
        value(before, "deniable_estimate_share_high", metric="alert_dark", category="true")
    )
    accepted = [
        scrape[("deniable_reports_accepted_total", (("metric", "alert_dark"),))]
        for scrape in recorded.operator
    ]
    assert accepted[STOPS_AFTER - 1] > accepted[0] and len(set(accepted[STOPS_AFTER - 1 :])) == 1
    tests = tmp_path / "alerts.test.yaml"
    tests.write_text(yaml.safe_dump(unit_tests(recorded), sort_keys=False))
    result = promtool("test", "rules", tests)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    assert "SUCCESS" in result.stdout


def test_promtool_fails_an_alert_that_did_not_fire(recorded: Recorded, tmp_path: Path) -> None:
    """The harness can fail: expecting the platform's steady share to change fails promtool."""
    document = unit_tests(recorded)
    rule_test = document["tests"][0]["alert_rule_test"][-1]
    rule_test["exp_alerts"].append(change_alert(recorded.after, "alert_os", "higher", "ios"))
    tests = tmp_path / "alerts.test.yaml"
    tests.write_text(yaml.safe_dump(document, sort_keys=False))
    result = promtool("test", "rules", tests)
    assert result.returncode != 0
    assert "alert_os" in result.stdout + result.stderr


def test_the_scrape_config_has_both_jobs_the_rules_read() -> None:
    jobs = {
        job["job_name"]: job for job in yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"]
    }
    assert jobs[ESTIMATES["job"]]["metrics_path"] == "/v1/estimates/metrics"
    assert jobs[OPERATOR["job"]].get("metrics_path", "/metrics") == "/metrics"
    rules = RULES.read_text()
    assert "deniable_reports_accepted_total" in rules and "deniable_estimate_share_low" in rules
