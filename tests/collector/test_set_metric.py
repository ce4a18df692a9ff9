"""A set metric end to end over real HTTP on SQLite and PostgreSQL (docs/STATS.md section 16):
registered with its ``max_items``, recorded through the device's own path (the Recorder's
prepare, padding-and-sampling, the wire text), counted over its k + L oracle items, and
estimated as each category's share of devices, with the 422s of what it does not offer."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import uuid
from typing import Any

import httpx
import pytest

from deniable.cli.slicerender import print_breakdown
from deniable.client import MetricSpec
from deniable.client.randomness import SeededRandomness
from deniable.client.sampling import randomized_reports
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    VIEWER_TOKEN,
    DatabaseFactory,
    register,
    signed_in,
    unique_name,
    viewer_collector,
)

DAY = TEST_NOW.date().isoformat()
FEATURES = ["search", "share", "export", "print", "sync"]
GROUPS: list[tuple[frozenset[str], int]] = [
    (frozenset({"search", "share"}), 1200),
    (frozenset({"search"}), 600),
    (frozenset(), 400),
    (frozenset({"search", "export", "sync"}), 800),
]
"""Devices by the set they hold (at most L = 3 features): 3,000 in all."""
TRUTH = {"search": 2600 / 3000, "share": 1200 / 3000, "export": 800 / 3000, "print": 0.0}
TRUTH["sync"] = 800 / 3000


def post_body(uploader: httpx.Client, body: bytes) -> None:
    """Post an upload body in parts of 1,000 reports."""
    reports = json.loads(body)["reports"]
    for start in range(0, len(reports), 1000):
        part = {"reports": reports[start : start + 1000]}
        response = uploader.post("/v1/reports", json=part)
        assert response.status_code == 202, response.text


@pytest.fixture(params=["krr", "oue", "olh"])
def features(request: pytest.FixtureRequest, admin: httpx.Client, uploader: httpx.Client) -> Any:
    """A daily set metric of five features (L = 3, eps 4) through ``request.param``, and its
    reports of :data:`GROUPS` recorded today."""
    spec = MetricSpec.set_of(
        unique_name("features"), FEATURES, max_items=3, epsilon=4.0, mechanism=request.param
    )
    spec = register(admin, spec)
    for seed, (items, devices) in enumerate(GROUPS):
        body = randomized_reports(
            spec,
            items,
            devices,
            randomness=SeededRandomness(390 + seed),
            clock=lambda: TEST_NOW,
        )
        post_body(uploader, body)
    return spec


def test_the_registered_spec_keeps_max_items_in_its_fingerprint(
    admin: httpx.Client, features: MetricSpec
) -> None:
    listed = admin.get(f"/v1/metrics/{features.name}").json()
    assert listed["type"] == "set" and listed["max_items"] == 3
    assert listed["categories"] == FEATURES and listed["fingerprint"] == features.fingerprint
    again = MetricSpec.set_of(
        features.name, FEATURES, max_items=4, epsilon=4.0, mechanism=features.mechanism
    )
    assert again.fingerprint != features.fingerprint


def test_the_estimate_gives_each_features_share_of_devices(
    admin: httpx.Client, features: MetricSpec
) -> None:
    response = admin.get(
        f"/v1/metrics/{features.name}/estimate",
        params={"start": DAY, "end": DAY, "confidence": 0.9999},
    )
    assert response.status_code == 200, response.text
    document = response.json()
    assert (document["n"], document["max_items"], document["mechanism"]) == (3000, 3, "ps")
    assert document["oracle"] == features.mechanism and document["method"] == "unbiased"
    for row in document["estimates"]:
        truth = TRUTH[row["category"]]
        assert row["ci_low"] <= truth <= row["ci_high"], row
        assert row["ci_low"] <= row["frequency"] <= row["ci_high"]
        assert math.isclose(row["count"], row["frequency"] * 3000)


def test_a_series_has_the_days_shares(admin: httpx.Client, features: MetricSpec) -> None:
    before = (TEST_NOW.date() - dt.timedelta(days=1)).isoformat()
    response = admin.get(f"/v1/metrics/{features.name}/series", params={"start": before})
    assert response.status_code == 200, response.text
    assert response.json()["method"] == "unbiased"
    points = response.json()["series"]
    assert [p["n"] for p in points] == [0, 3000]
    assert [e["category"] for e in points[1]["estimates"]] == FEATURES


def test_a_window_comparison_finds_no_change_in_an_empty_baseline(
    admin: httpx.Client, features: MetricSpec
) -> None:
    response = admin.get(
        f"/v1/metrics/{features.name}/estimate",
        params={"start": DAY, "end": DAY, "compare_to": "previous"},
    )
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["method"] == "unbiased"
    rows = document["slices"][0]["rows"]
    assert [row["category"] for row in rows] == FEATURES
    for row in rows:  # the day before has no reports: no difference, the whole span
        assert row["baseline"] is None and (row["ci_low"], row["ci_high"]) == (-1.0, 1.0)
    response = admin.get(f"/v1/metrics/{features.name}/estimate", params={"by": "platform"})
    assert response.status_code == 422 and "platform" in response.json()["detail"]
    response = admin.get(f"/v1/metrics/{features.name}/series", params={"where": "x:y"})
    assert response.status_code == 422 and "set metric" in response.json()["detail"]


def test_a_payload_outside_the_oracles_items_is_refused(
    uploader: httpx.Client, features: MetricSpec
) -> None:
    bad: Any = {"krr": 8, "oue": "AAA=", "olh": {"a": 1, "b": 0, "y": 99}}[features.mechanism]
    report = {
        "id": "00000000-0000-4000-8000-000000000039",
        "metric": features.name,
        "fingerprint": features.fingerprint,
        "period": DAY,
        "payload": bad,
    }
    assert uploader.post("/v1/reports", json={"reports": [report]}).status_code == 422


def test_an_implausible_oue_vector_of_a_set_is_refused_as_the_oracles(
    admin: httpx.Client, uploader: httpx.Client
) -> None:
    """A set's payload is judged by its oracle over k + L items: oue's plausibility check
    refuses a vector no honest device sends (no bit of 1,003 set), naming the metric."""
    categories = [f"c{i}" for i in range(1000)]
    spec = register(
        admin,
        MetricSpec.set_of(
            unique_name("features"), categories, max_items=3, epsilon=1.0, mechanism="oue"
        ),
    )
    report = {
        "id": str(uuid.uuid4()),
        "metric": spec.name,
        "fingerprint": spec.fingerprint,
        "period": DAY,
        "payload": base64.b64encode(bytes(126)).decode(),
    }
    response = uploader.post("/v1/reports", json={"reports": [report]})
    assert response.status_code == 422, response.text
    reason = response.json()["detail"][0]["reason"]
    assert spec.name in reason and "sets 0 of 1003 bits" in reason


def test_a_set_value_is_checked_on_the_device() -> None:
    spec = MetricSpec.set_of("features", FEATURES, max_items=3, epsilon=1.0)
    assert spec.items_of(["sync", "search", "sync"]) == (0, 4)
    for bad in ("search", ["nope"], [1], {"search": 1}):
        with pytest.raises(ValueError, match="metric features"):
            spec.items_of(bad)
    assert spec.randomizer.k == 8 and spec.set_randomizer.max_items == 3
    assert MetricSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ValueError, match="max_items"):
        MetricSpec.from_dict({**spec.to_dict(), "max_items": None})
    with pytest.raises(ValueError, match="max_items is for set metrics only"):
        MetricSpec.from_dict(
            {
                "name": "x",
                "type": "categorical",
                "categories": ["a", "b"],
                "epsilon": 1,
                "max_items": 2,
            }
        )


def test_the_dashboard_shows_a_set_metric(databases: DatabaseFactory) -> None:
    """The overview lists it, its page draws each feature's share of devices (the render
    hook's axis and note) with the CSV of the estimate, and Prometheus scrapes its shares."""
    with viewer_collector(databases.new("sqlite")) as server:
        with server.client(ADMIN_TOKEN) as admin, server.client(INGEST_KEY) as uploader:
            dims = {"platform": ["ios", "web"]}
            spec = register(
                admin,
                MetricSpec.set_of("features", FEATURES, max_items=3, epsilon=2, dimensions=dims),
            )
            for seed, (items, devices) in enumerate(GROUPS):
                body = randomized_reports(
                    spec, items, devices, randomness=SeededRandomness(seed), clock=lambda: TEST_NOW
                )
                post_body(uploader, body)
        with signed_in(server) as browser:
            overview = browser.get("/dashboard/")
            assert overview.status_code == 200 and "features" in overview.text
            page = browser.get("/dashboard/metrics/features", params={"start": DAY, "end": DAY})
            assert page.status_code == 200, page.text
            assert "share of devices holding it" in page.text
            assert "need not sum to 100%" in page.text
            for category in FEATURES:
                assert category in page.text
            csv = browser.get("/dashboard/metrics/features/estimate.csv")
            assert csv.status_code == 200 and "search" in csv.text
            sliced = browser.get("/dashboard/metrics/features/breakdown", params={"by": "platform"})
            assert sliced.status_code == 200, sliced.text
            assert "other" in sliced.text and "search" in sliced.text
            sliced_csv = browser.get(
                "/dashboard/metrics/features/breakdown.csv", params={"by": "platform"}
            )
            assert sliced_csv.status_code == 200 and "search" in sliced_csv.text
        with server.client(VIEWER_TOKEN) as prometheus:
            scraped = prometheus.get("/v1/estimates/metrics")
            assert scraped.status_code == 200, scraped.text
            assert 'deniable_estimate_share{category="search",metric="features"}' in scraped.text


def test_a_set_metric_with_dimensions_counts_its_cells_and_estimates_the_whole(
    admin: httpx.Client, uploader: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """Dimensions travel beside a set's reports as beside any other: the whole estimate sums
    the cells' k + L counts, and a breakdown gives each slice's shares of its devices."""
    spec = register(
        admin,
        MetricSpec.set_of(
            unique_name("features_dims"),
            FEATURES,
            max_items=3,
            epsilon=4.0,
            mechanism="olh",
            dimensions={"platform": ["ios", "web"]},
        ),
    )
    rng = SeededRandomness(39)
    reports = [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": DAY,
            "payload": spec.set_randomizer.randomize(spec.items_of(items), rng),
            "dims": {"platform": ("ios", "web", "other")[i % 3]},
        }
        for items, devices in GROUPS
        for i in range(devices)
    ]
    post_body(uploader, json.dumps({"reports": reports}).encode())
    params = {"start": DAY, "end": DAY, "confidence": 0.9999}
    response = admin.get(f"/v1/metrics/{spec.name}/estimate", params=params)
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["n"] == 3000
    for row in document["estimates"]:
        assert row["ci_low"] <= TRUTH[row["category"]] <= row["ci_high"], row
    by = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={**params, "by": "platform", "compare": "ios,web"},
    )
    assert by.status_code == 200, by.text
    sliced = by.json()
    assert [row["values"]["platform"] for row in sliced["slices"]] == ["ios", "web", "other"]
    assert sum(row["estimate"]["n"] for row in sliced["slices"]) == 3000
    for row in sliced["slices"]:
        assert row["estimate"]["max_items"] == 3
        for share in row["estimate"]["estimates"]:
            assert share["ci_low"] <= TRUTH[share["category"]] <= share["ci_high"], share
    assert sliced["comparison"] is not None
    previous = (TEST_NOW.date() - dt.timedelta(days=1)).isoformat()
    changes = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={**params, "by": "platform", "compare_to": f"{previous}..{previous}"},
    )
    assert changes.status_code == 200, changes.text
    assert len(changes.json()["slices"]) == 3
    print_breakdown(sliced, "table")  # what `deniable estimate --by platform` prints
    printed = capsys.readouterr().out
    assert "ios" in printed and "search" in printed
