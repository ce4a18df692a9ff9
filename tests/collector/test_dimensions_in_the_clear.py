"""Dimensions travel in the clear: a near-identifier (``user: u0000..u0998``) is refused at
registration naming the per-dimension cap, so is one split over two dimensions (``uhi`` ×
``ulo``) naming the cap on their cells, and the privacy account, its statement and the
dashboard's privacy page show each metric's dimensions and how many values each can take."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from markupsafe import escape

from deniable.client import MetricSpec
from deniable.client.errors import SpecError
from deniable.client.spec import MAX_DIMENSION_CELLS, MAX_DIMENSION_VALUES, registered_specs
from deniable.client.specsource import verified_specs
from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.queries import register_spec
from testkit import (
    ADMIN_TOKEN,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    register,
    signed_in,
    viewer_collector,
)

SPLIT = MetricSpec.boolean(
    "clear_dark", epsilon=1.0, dimensions={"platform": ["ios", "android", "web"], "tier": ["paid"]}
)
PLAIN = MetricSpec.boolean("clear_plain", epsilon=1.0)
WIDEST = MetricSpec.categorical(
    "clear_version",
    ["a", "b"],
    epsilon=1.0,
    dimensions={"version": [f"v{i}" for i in range(MAX_DIMENSION_VALUES)]},
)


@pytest.fixture(scope="module")
def server(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    with viewer_collector(databases.new("sqlite")) as running:
        with running.client(ADMIN_TOKEN) as admin:
            for spec in (SPLIT, PLAIN, WIDEST):
                register(admin, spec)
        yield running


@pytest.mark.parametrize("values", [999, MAX_DIMENSION_VALUES + 1])
def test_a_dimension_past_the_cap_is_refused_naming_it(
    server: RunningCollector, values: int
) -> None:
    body = {
        "name": f"clear_user_{values}",
        "type": "boolean",
        "epsilon": 1.0,
        "dimensions": {"user": [f"u{i:04d}" for i in range(values)]},
    }
    with server.client(ADMIN_TOKEN) as admin:
        response = admin.post("/v1/metrics", json=body)
        listed = [m["name"] for m in admin.get("/v1/metrics").json()["metrics"]]
    assert response.status_code == 422, response.text
    assert (
        f"dimension user lists {values:,} values; at most {MAX_DIMENSION_VALUES}" in response.text
    )
    assert body["name"] not in listed


SPLIT_USER = {"uhi": [f"u{i:02d}" for i in range(31)], "ulo": [f"{i:02d}" for i in range(30)]}
"""An identifier split over two dimensions: 32 × 31 = 992 cells, within MAX_CELLS (1,000)."""


@pytest.mark.parametrize(
    ("dimensions", "cells"),
    [(SPLIT_USER, 992), ({"a": ["x", "y", "z", "w", "u"], "b": [f"v{i}" for i in range(10)]}, 66)],
)
def test_dimensions_making_more_cells_than_the_cap_are_refused_naming_it(
    server: RunningCollector, dimensions: dict, cells: int
) -> None:
    body = {"name": f"clear_split_{cells}", "type": "boolean", "epsilon": 1.0}
    body["dimensions"] = dimensions
    with server.client(ADMIN_TOKEN) as admin:
        response = admin.post("/v1/metrics", json=body)
        listed = [m["name"] for m in admin.get("/v1/metrics").json()["metrics"]]
    assert response.status_code == 422, response.text
    assert f"make {cells:,} cells" in response.text, response.text
    assert f"at most {MAX_DIMENSION_CELLS} are allowed" in response.text, response.text
    assert body["name"] not in listed


def test_the_privacy_account_and_page_show_the_dimensions_and_their_cardinality(
    server: RunningCollector,
) -> None:
    with server.client(VIEWER_TOKEN) as viewer:
        document = viewer.get("/v1/privacy").json()
    clear = {m["metric"]: m for m in document["in_the_clear"]}
    assert sorted(clear) == ["clear_dark", "clear_version"]
    assert clear["clear_dark"]["dimensions"] == [
        {"name": "platform", "values": 4},
        {"name": "tier", "values": 2},
    ]
    assert clear["clear_dark"]["cells"] == 8
    assert clear["clear_version"]["cells"] == MAX_DIMENSION_VALUES + 1
    statement = document["statement"]
    assert "clear_dark: platform (one of 4 values), tier (one of 2 values)" in statement
    assert f"clear_version: version (one of {MAX_DIMENSION_VALUES + 1} values)" in statement
    assert "clear_plain:" not in statement

    with signed_in(server) as viewer:
        page = viewer.get("/dashboard/privacy").text
    section = page.split('<table id="in-the-clear">', 1)[1].split("</table>", 1)[0]
    row = section.split('<tr data-metric="clear_dark">', 1)[1].split("</tr>", 1)[0]
    assert "<td>platform (4), tier (2)</td>" in row
    assert '<td class="num">8</td>' in row
    assert 'data-metric="clear_plain"' not in section
    assert escape(statement) in page


@pytest.mark.parametrize(
    ("dimensions", "cells", "cap"),
    [
        ({"version": [f"v{i}" for i in range(100)]}, 101, "at most 64"),
        (SPLIT_USER, 992, "at most 65 are allowed"),
    ],
)
def test_a_metric_registered_before_the_cap_stays_readable_but_devices_refuse_it(
    databases: DatabaseFactory, dimensions: dict, cells: int, cap: str
) -> None:
    """A spec a collector accepted before the caps existed (100 values; 992 cells over two
    dimensions): the collector still lists it and accounts for it; a device refuses it when
    it is served."""
    url = databases.new("sqlite")
    migrate(url)
    wide = {"name": "clear_old", "type": "boolean", "epsilon": 1.0, "dimensions": dimensions}
    with registered_specs():
        old = MetricSpec.from_dict(wide)
    with pytest.raises(SpecError, match=cap):
        MetricSpec.from_dict(wide)
    database = open_database(url)
    try:
        register_spec(database, old, dt.datetime.now(dt.UTC))
    finally:
        database.dispose()
    with viewer_collector(url) as running:
        with running.client(VIEWER_TOKEN) as viewer:
            served = viewer.get("/v1/metrics")
            privacy = viewer.get("/v1/privacy")
        assert served.status_code == 200, served.text
        assert [m["name"] for m in served.json()["metrics"]] == ["clear_old"]
        assert privacy.json()["in_the_clear"][0]["cells"] == cells
        assert verified_specs(served.json()["metrics"]) == []  # a device ignores it
