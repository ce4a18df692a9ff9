"""The dashboard's numbers nobody misreads (issue 41, "Numbers people misread" 1, 3-7, 10),
against a real collector, each page parsed as a browser's parser sees it.

Reports are made by the real mechanisms (fixed seeds) and posted through the API; every
number a test compares comes from the API's own answer for the same query.
"""

from __future__ import annotations

import datetime as dt
import itertools
import shlex
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import pytest

from deniable.client import MetricSpec, SeededRandomness
from deniable.collector.dashboard.charts import text_width, value_text
from deniable.estimators.documents import CLIPPED_MARKS
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
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

TODAY = TEST_NOW.date().isoformat()
YESTERDAY = (TEST_NOW.date() - dt.timedelta(days=1)).isoformat()
EDGES = (0, 100, 250, 500, 1000, 2000, 5000)
COLLECTOR_URL = "https://telemetry.example.com"
"""The placeholder URL the snippets show (never the Host a request named)."""
VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "wbr"}
)


@dataclass
class Node:
    """One element of a parsed page: its tag, attributes, children and text."""

    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    parts: list[Node | str] = field(default_factory=list)
    """Its children and its text, in document order."""

    def text(self) -> str:
        """Its text and its descendants', in order."""
        return "".join(part if isinstance(part, str) else part.text() for part in self.parts)

    def find(self, tag: str, **attrs: str) -> list[Node]:
        """Its descendants of ``tag`` whose attributes hold ``attrs`` (class: one of them)."""
        found = []
        for child in self.children:
            if child.tag == tag and all(child.has(k, v) for k, v in attrs.items()):
                found.append(child)
            found += child.find(tag, **attrs)
        return found

    def one(self, tag: str, **attrs: str) -> Node:
        """The one descendant :meth:`find` names."""
        (node,) = self.find(tag, **attrs)
        return node

    def has(self, key: str, value: str) -> bool:
        """Whether attribute ``key`` is ``value`` (for class: lists it)."""
        key = key.rstrip("_").replace("_", "-")
        if key == "class":
            return value in self.attrs.get("class", "").split()
        return self.attrs.get(key) == value


class Tree(HTMLParser):
    """A page as a tree of :class:`Node`."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        self.stack[-1].parts.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        self.stack[-1].parts.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def parse(page: str) -> Node:
    """The page's tree."""
    tree = Tree()
    tree.feed(page)
    tree.close()
    return tree.root


@pytest.fixture(scope="module")
def collector(backend: str, databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector with the viewer token, on each backend."""
    with viewer_collector(databases.new(backend)) as server:
        yield server


def page(collector: RunningCollector, path: str, **params: Any) -> Node:
    """The parsed dashboard page at ``path``; it must answer 200."""
    with signed_in(collector, timeout=60) as viewer:
        response = viewer.get(path, params=params)
    assert response.status_code == 200, response.text[:500]
    return parse(response.text)


def post(uploader: httpx.Client, reports: list[dict[str, Any]], dims: dict[str, str]) -> None:
    """Post ``reports`` with public ``dims`` in batches; every one accepted."""
    for start in range(0, len(reports), 500):
        batch = (
            [{**report, "dims": dims} for report in reports[start : start + 500]]
            if dims
            else (reports[start : start + 500])
        )
        response = uploader.post("/v1/reports", json={"reports": batch})
        assert response.status_code == 202, response.text


def register_with_unit(admin: httpx.Client, spec: MetricSpec, unit: str) -> MetricSpec:
    """Register ``spec`` with its ``unit``; the spec the collector resolved."""
    response = admin.post("/v1/metrics", json={**spec.fingerprint_fields(), "unit": unit})
    assert response.status_code in (200, 201), response.text
    served = {k: v for k, v in response.json().items() if k not in ("unit", "description", "owner")}
    return MetricSpec.from_dict(served)


def api(collector: RunningCollector, path: str, **params: Any) -> dict[str, Any]:
    """The API's answer at ``path`` (200)."""
    with collector.client(ADMIN_TOKEN) as reader:
        response = reader.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_quantiles_over_time_draw_bare_intervals_mark_open_days_and_name_the_unit(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    """No midpoint dot (it zigzags between bucket middles); each day's interval as it is, a
    day open on a side marked by an arrow, never left out; the axis names the unit."""
    spec = register_with_unit(
        admin, MetricSpec.histogram(unique_name("load"), EDGES, epsilon=2.0), "ms"
    )
    rng = np.random.default_rng(41)
    ordinary = np.clip(rng.lognormal(np.log(400.0), 0.6, 3000), 0, 4999)
    slow = np.full(3000, 4000.0)  # every value in the last bucket: its p50 and p90 are open
    for seed, (day, values) in enumerate(((YESTERDAY, slow), (TODAY, ordinary))):
        buckets = [spec.bucket_of(float(v)) for v in values]
        post(uploader, make_reports(spec, buckets, day, seed=60 + seed), {})
    document = api(
        collector, f"/v1/metrics/{spec.name}/series", start=YESTERDAY, end=TODAY, q=[0.5, 0.9]
    )
    tree = page(collector, f"/dashboard/metrics/{spec.name}", start=YESTERDAY, end=TODAY)
    chart = tree.one("svg", id="quantile-series-chart")
    assert chart.find("circle") == [], "a quantile interval has no estimate to dot"
    assert any("(ms)" in title.text() for title in chart.find("text", class_="axis-title"))
    drawn = {
        (line.attrs["data-category"], line.attrs["data-period"]): line
        for line in chart.find("line", class_="interval")
    }
    opened = 0
    for point in document["series"]:
        for entry in point["quantiles"]:
            line = drawn[(f"p{entry['q'] * 100:g}", point["period"])]
            sides = {side for side in ("low", "high") if entry[side] is None}
            assert set(line.attrs.get("data-open", "").split()) - {""} == sides
            low = EDGES[0] if entry["low"] is None else entry["low"]
            high = EDGES[-1] if entry["high"] is None else entry["high"]
            assert (float(line.attrs["data-low"]), float(line.attrs["data-high"])) == (low, high)
            opened += len(sides)
    assert opened >= 2, "the slow day's quantiles are open above"
    arrows = chart.find("path", class_="open")
    assert len(arrows) == opened
    assert {arrow.attrs["data-period"] for arrow in arrows} == {YESTERDAY}
    assert tree.find("p", id="quantile-open-note")


def test_a_metric_page_says_its_counts_are_reports(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    """Item 2: a recorded metric's n and estimated counts are reports, and every place that
    shows them says so (the events issue's devices are tested with event metrics)."""
    spec = register_with_unit(
        admin, MetricSpec.histogram(unique_name("load"), EDGES, epsilon=2.0), "ms"
    )
    values = np.random.default_rng(42).uniform(0, 4999, 700)
    post(uploader, make_reports(spec, [spec.bucket_of(float(v)) for v in values], TODAY, 9), {})
    tree = page(collector, f"/dashboard/metrics/{spec.name}", start=TODAY, end=TODAY)
    assert any("n = 700 reports ·" in meta.text() for meta in tree.find("p", class_="meta"))
    header = tree.one("table", id="estimate-table").find("tr")[0]
    headers = [cell.text() for cell in header.find("th")]
    assert headers[-1] == "estimated reports"
    quantile_rows = tree.one("table", id="quantile-series-table").find("tr")[1:]
    assert quantile_rows
    assert {row.find("td")[1].text() for row in quantile_rows} == {"700 reports"}


def test_a_pooled_interval_says_why_it_is_wide_and_links_each_day_alone(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.boolean(
            unique_name("dark"), epsilon=2.0, dimensions={"platform": ["ios", "android"]}
        ),
    )
    for seed, day in enumerate((YESTERDAY, TODAY)):
        for platform in ("ios", "android"):
            values = [1 if i % 3 == 0 else 0 for i in range(400)]
            post(uploader, make_reports(spec, values, day, 70 + seed), {"platform": platform})
    week = {"start": YESTERDAY, "end": TODAY}
    for path in (f"/dashboard/metrics/{spec.name}", f"/dashboard/metrics/{spec.name}/breakdown"):
        tree = page(collector, path, **week, by="platform")
        note = tree.one("p", id="pooled-note")
        assert "no more precise than its best day" in note.text()
        why = note.one("a", class_="why").attrs["href"]
        help_page = page(collector, why)
        assert "overlap-safe" in help_page.text() and "same devices" in help_page.text()
        one = urlsplit(note.one("a", class_="per-period").attrs["href"])
        assert one.path == path
        query = parse_qs(one.query)
        assert query["start"] == query["end"] == [TODAY]
        if path.endswith("breakdown"):
            assert query["by"] == ["platform"]
            compared = page(collector, path, **week, by="platform", first="ios", second="android")
            meta = compared.one("p", id="comparison-meta")
            assert meta.one("a", class_="why").attrs["href"] == why
        alone = page(collector, one.path, **{k: v[0] for k, v in query.items()})
        assert alone.find("p", id="pooled-note") == [], "one day is pooled over nothing"


@pytest.mark.parametrize(
    ("make", "python_call", "js_call"),
    [
        (
            lambda name: MetricSpec.boolean(name, epsilon=1.0),
            'client.record("{name}", True)',
            'client.record("{name}", true);',
        ),
        (
            lambda name: MetricSpec.categorical(name, ["red", "blue"], epsilon=1.0),
            'client.record("{name}", "red")',
            'client.record("{name}", "red");',
        ),
        (
            lambda name: MetricSpec.histogram(name, [0, 1, 2, 5, 100], epsilon=1.0).with_events(
                "count"
            ),
            'client.event("{name}")',
            'client.event("{name}");',
        ),
        (
            lambda name: MetricSpec.numeric(name, lower=0, upper=5000, epsilon=1.0).with_events(
                "mean"
            ),
            'client.observe("{name}", 1250.0)',
            'client.observe("{name}", 1250.0);',
        ),
    ],
)
def test_a_metric_without_reports_shows_how_to_send_them_not_zero_estimates(
    collector: RunningCollector, admin: httpx.Client, make: Any, python_call: str, js_call: str
) -> None:
    spec = register(admin, make(unique_name("empty")))
    tree = page(collector, f"/dashboard/metrics/{spec.name}")
    card = tree.one("section", id="empty-state")
    assert "No reports yet" in card.text()
    python = card.one("pre", id="snippet-python").text()
    compile(python, "snippet.py", "exec")  # it is Python a user can paste
    assert python_call.format(name=spec.name) in python and "ingest_key=" in python
    js = card.one("pre", id="snippet-js").text()
    assert js_call.format(name=spec.name) in js and "ingestKey" in js
    assert "DENIABLE_INGEST_KEY" in card.one("p", id="ingest-key-note").text()
    simulate = card.one("pre", id="snippet-simulate").text()
    assert f"simulate --metric {spec.name}" in simulate
    if spec.events is None:  # the command runs as shown, and the page then has estimates
        line = simulate.replace("\\\n", " ").replace(COLLECTOR_URL, collector.url)
        args = shlex.split(line.replace("$DENIABLE_INGEST_KEY", INGEST_KEY))
        assert args[0] == "deniable"
        result = run_cli(*args[1:], "--date", TODAY)  # the test collector's clock
        assert result.exit_code == 0, result.output
        filled = page(collector, f"/dashboard/metrics/{spec.name}")
        assert filled.find("section", id="empty-state") == []
        assert filled.find("svg", id="estimate-chart")
    # nothing drawn as if it were an estimate: no bar, whisker, point, band or small multiple
    assert tree.find("svg", class_="chart") == []
    assert tree.find("table", id="estimate-table") == tree.find("div", id="series-chart") == []


def test_a_detectable_drop_and_a_clipped_estimate_have_different_marks(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(admin, MetricSpec.boolean(unique_name("aaa_drop"), epsilon=2.0))
    for seed, (day, share) in enumerate(((YESTERDAY, 0.6), (TODAY, 0.2))):
        values = [1] * round(2000 * share) + [0] * round(2000 * (1 - share))
        post(uploader, make_reports(spec, values, day, 80 + seed), {})
    tree = page(collector, "/dashboard/")
    (row,) = [tr for tr in tree.find("tr") if tr.attrs.get("data-metric") == spec.name]
    cell = row.one("td", class_="change")
    assert cell.attrs["data-verdict"] == "lower"
    mark = cell.one("abbr", class_="mark")
    assert mark.attrs["title"] == "detectable drop"
    assert mark.text() not in CLIPPED_MARKS.values()
    lede = tree.one("p", class_="lede").text()
    assert f"{mark.text()} (a detectable drop)" in lede and CLIPPED_MARKS["below"] in lede


def test_two_slices_differ_they_do_not_change(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.boolean(
            unique_name("same"), epsilon=2.0, dimensions={"platform": ["ios", "android"]}
        ),
    )
    for seed, platform in enumerate(("ios", "android")):
        values = [1 if i % 2 else 0 for i in range(600)]
        post(uploader, make_reports(spec, values, TODAY, 90 + seed), {"platform": platform})
    query = {"by": "platform", "start": TODAY, "end": TODAY}
    compared = api(collector, f"/v1/metrics/{spec.name}/estimate", **query, compare="ios,android")
    verdicts = {row["category"]: row["verdict"] for row in compared["comparison"]["rows"]}
    assert verdicts["true"].startswith("no detectable")
    tree = page(
        collector,
        f"/dashboard/metrics/{spec.name}/breakdown",
        **query,
        first="ios",
        second="android",
    )
    card = tree.one("section", id="comparison")
    assert "change" not in card.text()
    (row,) = [tr for tr in card.find("tr") if tr.attrs.get("data-category") == "true"]
    assert row.find("td")[-1].text() == "no detectable difference at 95%"


def test_the_overview_margin_is_this_datas_with_its_unit(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register_with_unit(
        admin, MetricSpec.numeric(unique_name("aaa_load"), lower=0, upper=5000, epsilon=2.0), "ms"
    )
    rng = np.random.default_rng(7)
    values = np.clip(rng.lognormal(np.log(400.0), 0.8, 1500), 0, 5000).tolist()
    post(uploader, make_numeric_reports(spec, values, TODAY, 95), {})
    series = api(collector, f"/v1/metrics/{spec.name}/series", start=TODAY, end=TODAY)
    mean = series["series"][-1]["mean"]
    half = (mean["ci_high"] - mean["ci_low"]) / 2
    tree = page(collector, "/dashboard/")
    (row,) = [tr for tr in tree.find("tr") if tr.attrs.get("data-metric") == spec.name]
    cell = row.one("td", class_="margin")
    assert cell.text().startswith(f"±{value_text(half)} ms")
    assert "this data's" in cell.text()
    # the metric page's figure for the same period: the same interval
    metric = page(collector, f"/dashboard/metrics/{spec.name}", start=TODAY, end=TODAY)
    (today,) = metric.one("table", id="mean-table").find("tbody")[0].find("tr")
    low, high = (float(td.text().replace(",", "")) for td in today.find("td")[-2:])
    assert abs((high - low) / 2 - half) <= max(abs(half) * 0.01, 1.0)


def test_slices_share_one_chart_and_axis_with_no_colliding_tick_labels(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.boolean(
            unique_name("slices"),
            epsilon=2.0,
            dimensions={"platform": ["ios", "android", "web"]},
        ),
    )
    for seed, (platform, share) in enumerate((("ios", 0.45), ("android", 0.4), ("web", 0.5))):
        values = [1] * round(500 * share) + [0] * round(500 * (1 - share))
        post(uploader, make_reports(spec, values, TODAY, 100 + seed), {"platform": platform})
    tree = page(
        collector,
        f"/dashboard/metrics/{spec.name}/breakdown",
        by="platform",
        start=TODAY,
        end=TODAY,
    )
    for svg_id in ("slices-chart", "slices-chart-narrow"):
        chart = tree.one("svg", id=svg_id)
        width = float(chart.attrs["viewbox"].split()[2])
        slices = [g.attrs["data-slice"] for g in chart.find("g", class_="slice")]
        assert slices == ["ios", "android", "web"]
        labels = []
        for text in chart.find("text", class_="tick"):
            x, size = float(text.attrs["x"]), float(text.attrs["font-size"])
            room = text_width(text.text(), size)
            anchor = text.attrs.get("text-anchor", "middle")
            left = {"end": x - room, "start": x}.get(anchor, x - room / 2)
            labels.append((left, left + room))
        assert len(labels) >= 2
        for (_, right), (left, _) in itertools.pairwise(labels):
            assert right < left, labels
        assert labels[0][0] >= 0 and labels[-1][1] <= width
        # one bar per slice gets the chart's width, not a third of it
        bars = chart.find("rect", class_="bar")
        assert len(bars) == 3 and all(float(b.attrs["x"]) < 0.05 * width for b in bars)
    assert tree.find("figure", class_="slice") == []


def test_a_breakdown_without_reports_shows_the_empty_state_not_empty_multiples(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    spec = register(
        admin,
        MetricSpec.boolean(
            unique_name("nobody"), epsilon=1.0, dimensions={"platform": ["ios", "android"]}
        ),
    )
    tree = page(collector, f"/dashboard/metrics/{spec.name}/breakdown", by="platform")
    card = tree.one("section", id="empty-state")
    assert f'client.record("{spec.name}", True)' in card.one("pre", id="snippet-python").text()
    assert tree.find("svg") == [] and tree.find("section", id="slice-trend") == []


def test_text_slices_share_one_axis(
    collector: RunningCollector, admin: httpx.Client, uploader: httpx.Client
) -> None:
    """Each slice's strings on the same x scale, so that slices compare by eye: ios holds
    "dark" in 60% of its reports, android in 25%."""
    spec = register(
        admin,
        MetricSpec.text(
            unique_name("search"),
            max_length=4,
            epsilon=4,
            dimensions={"platform": ["ios", "android"]},
        ),
    )
    sketch, rng = spec.text_randomizer, SeededRandomness(11)
    for platform, share in (("ios", 0.6), ("android", 0.25)):
        reports = [
            {
                "id": str(uuid.uuid4()),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": TODAY,
                "payload": sketch.randomize(
                    sketch.encode("dark" if i < 2000 * share else f"{i:04d}"),
                    1 + i % sketch.levels,
                    rng,
                ),
            }
            for i in range(2000)
        ]
        post(uploader, reports, {"platform": platform})
    tree = page(collector, f"/dashboard/metrics/{spec.name}/breakdown", by="platform", end=TODAY)
    for suffix in ("", "-narrow"):
        axes = []
        for i in (1, 2):
            chart = tree.one("svg", id=f"text-slice-{i}{suffix}")
            assert chart.find("rect", class_="bar"), "each slice found its common string"
            axes.append([tick.text() for tick in chart.find("text", class_="tick")])
        assert axes[0] == axes[1], axes
