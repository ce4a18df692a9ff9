"""``GET /v1/estimates/metrics``: the current estimates in Prometheus text, scraped over real
HTTP from a real collector (in a thread) and parsed with prometheus_client's own parser, equal
to the estimate API's numbers; refused without the viewer token; paged by the dashboard's
page limits; and the Grafana dashboard in deploy/ queries only names it exports.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from deniable.client import MetricSpec
from deniable.client.calendar import next_period, period_start
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    make_numeric_reports,
    make_reports,
    register,
    viewer_collector,
)
from testkit.exposition import parse_exposition, sample_value

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PATH = "/v1/estimates/metrics"
DAYS = tuple((TEST_NOW.date() - dt.timedelta(days=back)).isoformat() for back in range(2, -1, -1))
QUOTED = 'say "hi"\\\n'
"""A category with a quote, a backslash and a newline: the exposition must escape them."""


@dataclass(frozen=True)
class Seeded:
    server: RunningCollector
    specs: tuple[MetricSpec, ...]


@pytest.fixture(scope="module")
def seeded(databases: DatabaseFactory) -> Iterator[Seeded]:
    """A collector with the viewer token and three metrics per overview page: a categorical
    with an awkward label, a numeric, a histogram, one without reports, one too wide for
    the estimate cells limit (20 categories × 7 periods > 100), and one split by platform."""
    with viewer_collector(
        databases.new("sqlite"), dashboard_page_metrics=3, max_estimate_cells=100
    ) as server:
        with server.client(ADMIN_TOKEN) as admin:
            specs = (
                register(admin, MetricSpec.categorical("prom_os", ["linux", QUOTED], epsilon=2)),
                register(admin, MetricSpec.numeric("prom_load", lower=0, upper=1000, epsilon=2)),
                register(admin, MetricSpec.histogram("prom_hist", [0, 10, 100, 1000], epsilon=2)),
                register(admin, MetricSpec.boolean("prom_quiet", epsilon=1)),
                register(
                    admin,
                    MetricSpec.categorical("prom_wide", list("abcdefghijklmnopqrst"), epsilon=1),
                ),
                register(
                    admin,
                    MetricSpec.boolean("prom_xsplit", epsilon=2, dimensions={"platform": ["ios"]}),
                ),
            )
        os_, load, hist, *_, dark = specs
        with server.client(INGEST_KEY) as device:
            for i, day in enumerate(DAYS):
                batch = (
                    make_reports(os_, [0] * 150 + [1] * 50, day, i)
                    + make_numeric_reports(load, [100.0 + j for j in range(200)], day, 10 + i)
                    + make_reports(hist, [0] * 50 + [1] * 100 + [2] * 50, day, 20 + i)
                    + [
                        {**report, "dims": {"platform": "ios"}}
                        for report in make_reports(dark, [0, 1] * 100, day, 30 + i)
                    ]
                )
                response = device.post("/v1/reports", json={"reports": batch})
                assert response.status_code == 202, response.text
        yield Seeded(server, specs)


def scrape(seeded: Seeded, token: str | None = VIEWER_TOKEN, **params: str) -> httpx.Response:
    """``GET /v1/estimates/metrics`` over HTTP, as Prometheus would."""
    with seeded.server.client(token) as client:
        return client.get(PATH, params=params)


def api_estimate(seeded: Seeded, name: str) -> dict:
    with seeded.server.client(VIEWER_TOKEN) as client:
        response = client.get(f"/v1/metrics/{name}/estimate")
    assert response.status_code == 200, response.text
    return response.json()


def test_a_scrape_equals_the_estimate_api(seeded: Seeded) -> None:
    response = scrape(seeded)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    samples = parse_exposition(response.text)
    assert sample_value(samples, "deniable_estimate_pages") == 2.0  # 5 metrics, 3 per page
    os_, load, hist, *_ = seeded.specs
    for spec in (os_, hist):
        document = api_estimate(seeded, spec.name)
        assert (
            sample_value(samples, "deniable_estimate_reports", metric=spec.name)
            == document["n"]
            > 0
        )
        assert (
            sample_value(samples, "deniable_estimate_margin", metric=spec.name)
            == document["margin"]
        )
        for row in document["estimates"]:
            labels = {"metric": spec.name, "category": row["category"]}
            assert sample_value(samples, "deniable_estimate_share", **labels) == row["frequency"]
            assert sample_value(samples, "deniable_estimate_share_low", **labels) == row["ci_low"]
            assert sample_value(samples, "deniable_estimate_share_high", **labels) == row["ci_high"]
        info = {
            "metric": spec.name,
            "type": spec.type,
            "mechanism": spec.mechanism,
            "epsilon": f"{spec.epsilon:g}",
            "period": spec.period,
            "confidence": "0.95",
        }
        assert sample_value(samples, "deniable_estimate_info", **info) == 1.0
        start = dt.datetime.combine(period_start(spec.period, document["start"]), dt.time(), dt.UTC)
        after = period_start(spec.period, next_period(spec.period, document["end"]))
        end = dt.datetime.combine(after, dt.time(), dt.UTC)
        window = {"metric": spec.name}
        assert (
            sample_value(samples, "deniable_estimate_start_timestamp_seconds", **window)
            == start.timestamp()
        )
        assert (
            sample_value(samples, "deniable_estimate_end_timestamp_seconds", **window)
            == end.timestamp()
        )
    assert (
        sample_value(samples, "deniable_estimate_share", metric=os_.name, category=QUOTED)
        is not None
    )
    quantiles = api_estimate(seeded, hist.name)["quantiles"]
    assert [q["q"] for q in quantiles] == [0.5, 0.9, 0.99]
    for entry in quantiles:
        labels = {"metric": hist.name, "quantile": f"{entry['q']:g}"}
        assert sample_value(samples, "deniable_estimate_quantile_low", **labels) == entry["low"]
        assert sample_value(samples, "deniable_estimate_quantile_high", **labels) == entry["high"]
    mean = api_estimate(seeded, load.name)["mean"]
    assert sample_value(samples, "deniable_estimate_mean", metric=load.name) == mean["estimate"]
    assert sample_value(samples, "deniable_estimate_mean_low", metric=load.name) == mean["ci_low"]
    assert sample_value(samples, "deniable_estimate_mean_high", metric=load.name) == mean["ci_high"]


def test_the_second_page_holds_the_rest_and_a_page_past_the_last_is_422(seeded: Seeded) -> None:
    second = parse_exposition(scrape(seeded, page="2").text)
    quiet = seeded.specs[3].name
    document = api_estimate(seeded, quiet)
    assert sample_value(second, "deniable_estimate_reports", metric=quiet) == 0.0 == document["n"]
    assert sample_value(second, "deniable_estimate_share", metric=quiet, category="true") is None
    assert (
        sample_value(second, "deniable_estimate_share_high", metric=quiet, category="true") == 1.0
    )
    assert sample_value(second, "deniable_estimate_reports", metric=seeded.specs[0].name) is None
    wide = seeded.specs[4].name
    with seeded.server.client(VIEWER_TOKEN) as client:
        assert client.get(f"/v1/metrics/{wide}/estimate").status_code == 422
    assert sample_value(second, "deniable_estimate_unavailable", metric=wide) == 1.0
    assert sample_value(second, "deniable_estimate_reports", metric=wide) is None
    for page in ("3", "0", "two"):
        refused = scrape(seeded, page=page)
        assert refused.status_code == 422
        assert "page must be a whole number from 1 to 2" in refused.json()["detail"]


def test_it_refuses_without_the_viewer_token(seeded: Seeded) -> None:
    for token in (None, "not-the-viewer-token-123", INGEST_KEY):
        refused = scrape(seeded, token)
        assert refused.status_code == 401, token
        assert "deniable_estimate" not in refused.text
    assert scrape(seeded, ADMIN_TOKEN).status_code == 200
    with seeded.server.client() as stranger:
        public = stranger.get("/metrics").text
    assert "deniable_estimate" not in public  # the open operator endpoint holds no estimate


def exported_names(seeded: Seeded) -> set[str]:
    """The metric names a scrape of every page exports, and a scrape by a dimension."""
    names: set[str] = set()
    for params in ({"page": "1"}, {"page": "2"}, {"by": "platform"}):
        names |= {name for name, _ in parse_exposition(scrape(seeded, **params).text)}
    return names


def test_the_grafana_dashboard_queries_only_exported_metrics(seeded: Seeded) -> None:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    expressions = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                expressions.append(node["expr"])
            if isinstance(node.get("query"), str):
                expressions.append(node["query"])
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(dashboard)
    queried = {name for expr in expressions for name in re.findall(r"deniable_[a-z_]+", expr)}
    exported = exported_names(seeded)
    assert len(expressions) >= 6 and len(queried) >= 8
    assert queried <= exported, queried - exported
    for kind in ("share", "mean", "quantile", "slice_share"):
        assert any(kind in name for name in queried), kind


def test_the_scrape_config_sends_the_viewer_token_to_the_endpoint() -> None:
    config = yaml.safe_load((DEPLOY / "grafana-prometheus-scrape.yaml").read_text())
    jobs = config["scrape_configs"]
    job = next(j for j in jobs if j.get("metrics_path") == PATH)
    assert job["authorization"]["type"] == "Bearer"
    assert "credentials_file" in job["authorization"] or "credentials" in job["authorization"]
