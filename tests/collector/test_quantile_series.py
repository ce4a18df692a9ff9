"""A histogram's quantiles over time: ``GET /v1/metrics/{name}/series?q=...`` gives each
period's quantile intervals, the same as that period's own estimate; the work is bounded by
``DENIABLE_MAX_SERIES_CELLS`` (a 422 naming it); the dashboard's histogram page shows them.
Over real HTTP against a real collector (in a thread).
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from deniable.client import MetricSpec
from deniable.collector.dashboard import CONTENT_SECURITY_POLICY
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    make_reports,
    register,
    signed_in,
    viewer_collector,
)

DAYS = tuple((TEST_NOW.date() - dt.timedelta(days=back)).isoformat() for back in range(3, -1, -1))
WEEK = {"start": DAYS[0], "end": DAYS[-1]}
EDGES = [0, 10, 100, 1000]


@dataclass(frozen=True)
class Seeded:
    server: RunningCollector
    histogram: MetricSpec
    categorical: MetricSpec


@pytest.fixture(scope="module")
def seeded(databases: DatabaseFactory) -> Iterator[Seeded]:
    """A histogram whose median moves from the first bucket to the third over four days (the
    last day has no reports), and a categorical metric; at most 100 series cells."""
    with viewer_collector(databases.new("sqlite"), max_series_cells=100) as server:
        with server.client(ADMIN_TOKEN) as admin:
            hist = register(admin, MetricSpec.histogram("qs_load", EDGES, epsilon=3))
            cat = register(admin, MetricSpec.categorical("qs_os", ["a", "b"], epsilon=2))
        mixes = ([0] * 300 + [1] * 60 + [2] * 40, [0] * 40 + [1] * 300 + [2] * 60)
        mixes += ([0] * 40 + [1] * 60 + [2] * 300,)
        with server.client(INGEST_KEY) as device:
            for i, (day, values) in enumerate(zip(DAYS, mixes, strict=False)):
                batch = make_reports(hist, values, day, i) + make_reports(cat, [0, 1] * 50, day, i)
                assert device.post("/v1/reports", json={"reports": batch}).status_code == 202
        yield Seeded(server, hist, cat)


def get(seeded: Seeded, path: str, **params: object) -> httpx.Response:
    with seeded.server.client(VIEWER_TOKEN) as client:
        return client.get(path, params=params)  # type: ignore[arg-type]


def test_each_periods_quantiles_are_that_periods_own_estimate(seeded: Seeded) -> None:
    name = seeded.histogram.name
    response = get(seeded, f"/v1/metrics/{name}/series", **WEEK, q=[0.5, 0.9])
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["edges"] == [float(e) for e in EDGES]
    assert [p["period"] for p in document["series"]] == list(DAYS)
    for point in document["series"]:
        alone = get(
            seeded,
            f"/v1/metrics/{name}/estimate",
            start=point["period"],
            end=point["period"],
            q=[0.5, 0.9],
        ).json()
        assert point["quantiles"] == alone["quantiles"]
        assert point["estimates"] == alone["estimates"]
    medians = [(p["quantiles"][0]["low"], p["quantiles"][0]["high"]) for p in document["series"]]
    assert medians[0][1] == 10.0  # day 1: the median lies in [0, 10)
    assert medians[1] == (10.0, 100.0)
    assert medians[2][0] == 100.0
    assert medians[3] == (None, None)  # no reports that day
    plain = get(seeded, f"/v1/metrics/{name}/series", **WEEK).json()
    assert "quantiles" not in plain["series"][0]  # only when asked for


def test_quantiles_past_the_cells_limit_or_on_another_type_are_422(seeded: Seeded) -> None:
    name = seeded.histogram.name
    eight = {"start": (TEST_NOW.date() - dt.timedelta(days=7)).isoformat(), "end": DAYS[-1]}
    many = [round(0.05 * i, 2) for i in range(1, 20)]  # 19 quantiles: 8 × (3 + 19) > 100
    refused = get(seeded, f"/v1/metrics/{name}/series", **eight, q=many)
    assert refused.status_code == 422
    detail = refused.json()["detail"]
    assert "DENIABLE_MAX_SERIES_CELLS" in detail and "100 cells" in detail
    assert "19 quantiles" in detail
    assert "at most 4 periods" in detail
    fits = get(seeded, f"/v1/metrics/{name}/series", **eight, q=many[:9])  # 8 × 12 <= 100
    assert fits.status_code == 200
    other = get(seeded, f"/v1/metrics/{seeded.categorical.name}/series", **WEEK, q=0.5)
    assert other.status_code == 422 and "histogram" in other.json()["detail"]
    for bad in ("0", "1.5", "half"):
        assert get(seeded, f"/v1/metrics/{name}/series", q=bad).status_code == 422


def test_the_histogram_page_shows_quantiles_over_time(seeded: Seeded) -> None:
    name = seeded.histogram.name
    api = get(seeded, f"/v1/metrics/{name}/series", **WEEK, q=[0.5, 0.9]).json()
    with signed_in(seeded.server) as client:
        page = client.get(f"/dashboard/metrics/{name}", params=WEEK)
        chosen = client.get(f"/dashboard/metrics/{name}", params={**WEEK, "quantiles": "0.25"})
        bad = client.get(f"/dashboard/metrics/{name}", params={**WEEK, "quantiles": "2"})
        long = client.get(f"/dashboard/metrics/{name}", params={**WEEK, "quantiles": "0.5 " * 60})
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    text = page.text
    assert '<table id="quantile-series-table"' in text and 'id="quantile-series-chart"' in text
    assert "<script" not in text
    for point in api["series"]:
        for entry in point["quantiles"]:
            row = f'<tr data-period="{point["period"]}" data-q="{entry["q"]!r}">'
            assert row in text
            cells = text.split(row, 1)[1].split("</tr>", 1)[0]
            low = "none: may be below 0" if entry["low"] is None else f"{entry['low']:,.3g}"
            assert html.escape(low) in cells
    assert f'<tr data-period="{DAYS[0]}" data-q="0.25">' in chosen.text
    assert f'<tr data-period="{DAYS[0]}" data-q="0.9">' not in chosen.text
    assert bad.status_code == 422
    assert "q must be a number above 0 and below 1" in bad.text
    assert long.status_code == 422 and "quantiles: at most 200 characters" in long.text
