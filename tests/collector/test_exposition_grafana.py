"""What Grafana gets from ``GET /v1/estimates/metrics`` besides the default scrape: each
metric per slice of a declared dimension (``?by=``), equal to the breakdown API's numbers;
and the shipped dashboard: a share drawn with its interval as a band, and quantile legends
that read ``p50`` (a label its query adds, checked by promtool on a recorded scrape).

A real collector in a thread is scraped over HTTP and read with prometheus_client's parser.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from deniable.client import MetricSpec
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_numeric_reports,
    make_reports,
    post_reports,
    register,
)
from testkit.exposition import parse_exposition, sample_value
from testkit.promtool import promtool, require_promtool

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
PATH = "/v1/estimates/metrics"
DAYS = tuple((TEST_NOW.date() - dt.timedelta(days=back)).isoformat() for back in range(2, -1, -1))
PLATFORMS = ("ios", "android")
SHARE_OF_TRUE = {"ios": 0.8, "android": 0.2}
"""Each platform's true share of dark mode: the slices differ, so each is its own."""
DAILY = 300
"""Reports per platform, metric and day."""


@dataclass(frozen=True)
class Seeded:
    server: RunningCollector
    specs: dict[str, MetricSpec]


def with_platform(reports: list[dict[str, Any]], platform: str) -> list[dict[str, Any]]:
    """``reports`` sent from devices on ``platform`` (the report's ``dims``)."""
    return [{**report, "dims": {"platform": platform}} for report in reports]


@pytest.fixture(scope="module")
def seeded(databases: DatabaseFactory) -> Iterator[Seeded]:
    """A collector with a boolean and a numeric metric split by platform (the ``other`` slice
    gets no reports), a histogram with quantiles, and a metric without dimensions."""
    settings = collector_settings(databases.new("sqlite"), viewer_token=VIEWER_TOKEN)
    server = RunningCollector(settings).start()
    platform = {"platform": list(PLATFORMS)}
    try:
        with server.client(ADMIN_TOKEN) as admin:
            specs = {
                spec.name: spec
                for spec in (
                    register(
                        admin, MetricSpec.boolean("graf_dark", epsilon=2, dimensions=platform)
                    ),
                    register(
                        admin,
                        MetricSpec.numeric(
                            "graf_load", lower=0, upper=1000, epsilon=2, dimensions=platform
                        ),
                    ),
                    register(
                        admin, MetricSpec.histogram("graf_hist", [0, 10, 100, 1000], epsilon=2)
                    ),
                    register(admin, MetricSpec.boolean("graf_plain", epsilon=2)),
                )
            }
        dark, load, hist = specs["graf_dark"], specs["graf_load"], specs["graf_hist"]
        with server.client(INGEST_KEY) as device:
            for i, day in enumerate(DAYS):
                batch = make_reports(hist, [0] * 50 + [1] * 150 + [2] * 100, day, 10 + i)
                for j, name in enumerate(PLATFORMS):
                    true = round(DAILY * SHARE_OF_TRUE[name])
                    values = [1] * true + [0] * (DAILY - true)
                    seed = 100 * i + 10 * j
                    batch += with_platform(make_reports(dark, values, day, seed), name)
                    means = [100.0 + 400 * j] * DAILY
                    batch += with_platform(make_numeric_reports(load, means, day, seed + 1), name)
                for start in range(0, len(batch), 1000):
                    response = post_reports(device, batch[start : start + 1000])
                    assert response.status_code == 202, response.text
        yield Seeded(server, specs)
    finally:
        server.stop()


def scrape(seeded: Seeded, **params: str) -> httpx.Response:
    """``GET /v1/estimates/metrics`` with the viewer token, as Prometheus would."""
    with seeded.server.client(VIEWER_TOKEN) as client:
        return client.get(PATH, params=params)


def breakdown(seeded: Seeded, name: str) -> dict[str, Any]:
    """The estimate API's breakdown of ``name`` by platform."""
    with seeded.server.client(VIEWER_TOKEN) as client:
        response = client.get(f"/v1/metrics/{name}/estimate", params={"by": "platform"})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_scrape_by_a_dimension_exports_each_slice_as_the_breakdown_api(seeded: Seeded) -> None:
    response = scrape(seeded, by="platform")
    assert response.status_code == 200, response.text
    samples = parse_exposition(response.text)
    assert sample_value(samples, "deniable_estimate_pages") == 1.0
    dark = breakdown(seeded, "graf_dark")
    for entry in dark["slices"]:
        where = {"dimension": "platform", "slice": entry["values"]["platform"]}
        if entry["suppressed"]:
            assert entry["values"]["platform"] == "other"
            assert sample_value(
                samples, "deniable_estimate_slice_suppressed", metric="graf_dark", **where
            )
            assert (
                sample_value(
                    samples, "deniable_estimate_slice_reports", metric="graf_dark", **where
                )
                is None
            )
            continue
        found = entry["estimate"]
        reports = sample_value(
            samples, "deniable_estimate_slice_reports", metric="graf_dark", **where
        )
        assert reports == found["n"] == DAILY * len(DAYS)
        assert sample_value(
            samples, "deniable_estimate_slice_confidence", metric="graf_dark", **where
        ) == pytest.approx(found["confidence"])
        for row in found["estimates"]:
            labels = {"metric": "graf_dark", "category": row["category"], **where}
            assert (
                sample_value(samples, "deniable_estimate_slice_share", **labels) == row["frequency"]
            )
            assert (
                sample_value(samples, "deniable_estimate_slice_share_low", **labels)
                == row["ci_low"]
            )
            assert (
                sample_value(samples, "deniable_estimate_slice_share_high", **labels)
                == row["ci_high"]
            )
    shares = {
        name: sample_value(
            samples,
            "deniable_estimate_slice_share",
            metric="graf_dark",
            category="true",
            dimension="platform",
            slice=name,
        )
        for name in PLATFORMS
    }
    assert shares["ios"] is not None and shares["android"] is not None
    assert shares["ios"] > 0.5 > shares["android"]  # the slices are each their own
    for entry in breakdown(seeded, "graf_load")["slices"]:
        if entry["suppressed"]:
            continue
        where = {
            "metric": "graf_load",
            "dimension": "platform",
            "slice": entry["values"]["platform"],
        }
        mean = entry["estimate"]["mean"]
        assert sample_value(samples, "deniable_estimate_slice_mean", **where) == mean["estimate"]
        assert sample_value(samples, "deniable_estimate_slice_mean_low", **where) == mean["ci_low"]
        assert (
            sample_value(samples, "deniable_estimate_slice_mean_high", **where) == mean["ci_high"]
        )
    exported = {labels for name, labels in samples if name.startswith("deniable_estimate_slice")}
    metrics = {dict(labels)["metric"] for labels in exported}
    assert metrics == {"graf_dark", "graf_load"}  # only the metrics that declare platform


def test_the_default_scrape_has_no_slices_and_a_bad_dimension_is_422(seeded: Seeded) -> None:
    default = scrape(seeded).text
    assert "deniable_estimate_slice" not in default
    assert 'category="true",metric="graf_dark"' in default
    none = parse_exposition(scrape(seeded, by="region").text)
    assert sample_value(none, "deniable_estimate_pages") == 1.0
    assert not [name for name, _ in none if name.startswith("deniable_estimate_slice")]
    for bad in ("Platform", "plat form", "1x"):
        refused = scrape(seeded, by=bad)
        assert refused.status_code == 422, bad
        assert "by must be a dimension's name" in refused.json()["detail"]
    assert scrape(seeded, by="platform", page="2").status_code == 422
    with seeded.server.client() as stranger:
        assert stranger.get(PATH, params={"by": "platform"}).status_code == 401


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel of the dashboard (rows' panels too)."""
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def overrides_by_name(panel: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A panel's overrides matched by series name: the name and its properties."""
    return {
        override["matcher"]["options"]: {p["id"]: p["value"] for p in override["properties"]}
        for override in panel["fieldConfig"]["overrides"]
        if override["matcher"]["id"] == "byName"
    }


def test_the_dashboard_draws_a_share_with_its_band() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    share_panels = [
        panel
        for panel in panels(dashboard)
        if panel["type"] == "timeseries"
        and any("deniable_estimate_share{" in t["expr"] for t in panel["targets"])
    ]
    assert share_panels, "a time series panel draws the shares"
    for panel in share_panels:
        targets = {t["expr"].split("{")[0]: t for t in panel["targets"]}
        assert set(targets) == {
            "deniable_estimate_share",
            "deniable_estimate_share_low",
            "deniable_estimate_share_high",
        }
        low = targets["deniable_estimate_share_low"]["legendFormat"]
        high = targets["deniable_estimate_share_high"]["legendFormat"]
        assert "{{" not in low + high  # fixed names, which the band's override refers to
        overrides = overrides_by_name(panel)
        assert overrides[high]["custom.fillBelowTo"] == low
        assert overrides[high]["custom.fillOpacity"] > 0
        for end in (low, high):  # the ends are the band's edges, not lines of their own
            assert overrides[end]["custom.lineWidth"] == 0
            assert overrides[end]["custom.hideFrom"]["legend"] is True
        assert all('category="$category"' in t["expr"] for t in panel["targets"])
        assert panel["repeat"] == "category"  # one category (and one band) per panel
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert "$band_metric" in variables["category"]["definition"]
    assert variables["band_metric"]["multi"] is False


def quantile_targets() -> list[dict[str, Any]]:
    """The dashboard's queries of the quantiles' interval ends."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        target
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
        if "deniable_estimate_quantile" in target["expr"]
    ]


def test_quantile_legends_read_p50_on_a_recorded_scrape(seeded: Seeded, tmp_path: Path) -> None:
    """promtool evaluates the dashboard's quantile queries over the series of a real scrape:
    each answer carries a ``percentile`` label ``p50``, ``p90`` or ``p99``, and the legends
    name it."""
    require_promtool()
    samples = parse_exposition(scrape(seeded).text)
    quantiles = {
        key: number
        for key, number in samples.items()
        if key[0].startswith("deniable_estimate_quantile")
    }
    assert {dict(labels)["quantile"] for _, labels in quantiles} == {"0.5", "0.9", "0.99"}
    series = [
        {
            "series": name
            + "{"
            + ",".join(f"{label}={json.dumps(text)}" for label, text in labels)
            + "}",
            "values": f"{number!r}+0x3",
        }
        for (name, labels), number in quantiles.items()
    ]
    targets = quantile_targets()
    assert len(targets) == 2
    checks = []
    legends: set[str] = set()
    for target in targets:
        assert "{{percentile}}" in target["legendFormat"]
        assert "{{quantile}}" not in target["legendFormat"]
        name = "deniable_estimate_quantile_" + ("low" if "_low" in target["expr"] else "high")
        expected = [
            {
                "labels": "{"
                + ",".join(
                    f"{label}={json.dumps(text)}"
                    for label, text in sorted(
                        [
                            *labels,
                            ("__name__", name),
                            ("percentile", f"p{float(dict(labels)['quantile']) * 100:g}"),
                        ]
                    )
                )
                + "}",
                "value": number,
            }
            for (family, labels), number in quantiles.items()
            if family == name and dict(labels)["metric"] == "graf_hist"
        ]
        assert expected  # an end beyond the outer edges is absent, so some may be
        legends.update(e["labels"].split('percentile="')[1][:3] for e in expected)
        checks.append(
            {
                "expr": target["expr"].replace("$metric", "graf_hist"),
                "eval_time": "2m",
                "exp_samples": expected,
            }
        )
    document = {
        "rule_files": [],
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": checks}],
    }
    tests = tmp_path / "legends.test.yaml"
    tests.write_text(yaml.safe_dump(document, sort_keys=False))
    result = promtool("test", "rules", tests)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert legends == {"p50", "p90", "p99"}
