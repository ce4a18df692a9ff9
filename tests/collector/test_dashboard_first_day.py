"""Issue 41's dashboard items, read as a browser would against a real collector (in a thread):
the text page at the other pages' standard, time-range presets and the period comparison, when
each metric's reports last arrived, explanations beside the jargon, a planner that knows the
metrics, collapsed per-period tables and the link between /docs and the dashboard.

One collector (SQLite, the test clock) holds a text metric with a different search term on
each of two days, among rarer terms that the sketch finds below its floor, and a categorical
metric with a week of reports. Pages are parsed (:mod:`testkit.htmlpage`), not matched as bytes.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from deniable.client import MetricSpec
from deniable.estimators import margin_of_error
from deniable.estimators.advisor import plan_document
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    VIEWER_TOKEN,
    Clock,
    RunningCollector,
    make_numeric_reports,
    make_reports,
    make_text_reports,
    register,
    signed_in,
    viewer_collector,
)
from testkit.databases import DatabaseFactory
from testkit.htmlpage import Element, parse

TODAY = TEST_NOW.date()
DAYS = tuple((TODAY - dt.timedelta(days=back)).isoformat() for back in range(6, -1, -1))
YESTERDAY, NOW_DAY = DAYS[-2], DAYS[-1]
TEXT_REPORTS = 4000
RARE = (0.10, 0.09, 0.08, 0.07)
"""Shares of the rarer terms: with these seeds the sketch finds some of them with an estimated
share below the floor (about 11% at 4,000 reports), the case a chart drew left of its line."""


@dataclass(frozen=True)
class Seeded:
    """The running collector and its metrics."""

    server: RunningCollector
    text: MetricSpec
    color: MetricSpec
    load: MetricSpec

    @property
    def url(self) -> str:
        return self.server.url


def text_values(lead: str, rare_prefix: str) -> list[str]:
    """One day's strings: ``lead`` held by 40%, four rarer terms, the rest unique."""
    values = [lead] * int(TEXT_REPORTS * 0.4)
    for i, share in enumerate(RARE):
        values += [f"{rare_prefix}{i}"] * int(TEXT_REPORTS * share)
    values += [f"u{i:06d}" for i in range(TEXT_REPORTS - len(values))]
    return values


def upload(client: httpx.Client, reports: list[dict[str, object]]) -> None:
    """Post ``reports`` in batches; all must be accepted."""
    for start in range(0, len(reports), 1000):
        response = client.post("/v1/reports", json={"reports": reports[start : start + 1000]})
        assert response.status_code == 202, response.text


@pytest.fixture(scope="module")
def seeded(databases: DatabaseFactory) -> Iterator[Seeded]:
    """A collector with the viewer token, a text metric with reports yesterday and today, and
    a categorical metric with a week of reports."""
    with viewer_collector(databases.new("sqlite")) as server:
        with server.client(ADMIN_TOKEN) as admin:
            text = register(admin, MetricSpec.text("fd_search", max_length=8, epsilon=4.0))
            color = register(
                admin, MetricSpec.categorical("fd_color", ["red", "green", "blue"], epsilon=2.0)
            )
            load = register(admin, MetricSpec.numeric("fd_load", lower=0, upper=1000, epsilon=2))
        with server.client(INGEST_KEY) as device:
            upload(device, make_text_reports(text, text_values("yterm", "yrare"), YESTERDAY, 5))
            upload(device, make_text_reports(text, text_values("nterm", "nrare"), NOW_DAY, 6))
            for i, day in enumerate(DAYS):
                upload(device, make_reports(color, [0] * 300 + [1] * 200 + [2] * 100, day, i))
                values = [100.0 + 150 * i] * 400
                upload(device, make_numeric_reports(load, values, day, 10 + i))
        yield Seeded(server, text, color, load)


def page(seeded: Seeded, path: str) -> Element:
    """The parsed page at ``path`` (which must answer 200)."""
    with signed_in(seeded, timeout=60) as client:
        response = client.get(path)
    assert response.status_code == 200, response.text
    return parse(response.text)


def api(seeded: Seeded, path: str) -> dict[str, object]:
    """An API document read with the viewer token."""
    with seeded.server.client(VIEWER_TOKEN) as client:
        response = client.get(path)
    assert response.status_code == 200, response.text
    return response.json()


# --- item 9: the text page -------------------------------------------------------------------


def test_the_text_page_has_a_breadcrumb_and_a_date_picker_that_shows_yesterday(
    seeded: Seeded,
) -> None:
    root = page(seeded, f"/dashboard/metrics/{seeded.text.name}?end={YESTERDAY}")
    crumb = root.find("p", cls="crumb")
    assert crumb is not None and crumb.find("a", href="/dashboard/") is not None
    picker = root.by_id("pickers")
    assert picker is not None
    field = picker.find("input", name="end")
    assert field is not None and field.attrs.get("type") == "date"
    assert field.attrs["value"] == YESTERDAY
    shown = root.by_id("text-table").text + root.by_id("below-floor").text
    assert "yterm" in shown
    assert "nterm" not in shown


def test_the_text_page_offers_its_strings_as_csv(seeded: Seeded) -> None:
    root = page(seeded, f"/dashboard/metrics/{seeded.text.name}?end={YESTERDAY}")
    link = root.by_id("text-csv")
    assert link is not None and "download" in link.attrs
    with signed_in(seeded, timeout=60) as client:
        response = client.get(link.attrs["href"])
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    document = api(seeded, f"/v1/metrics/{seeded.text.name}/estimate?end={YESTERDAY}")
    assert [r["string"] for r in rows] == [s["value"] for s in document["strings"]]
    assert {r["period"] for r in rows} == {YESTERDAY}
    assert [float(r["share"]) for r in rows] == [s["share"] for s in document["strings"]]


def test_the_text_page_shows_the_periods_before_with_links(seeded: Seeded) -> None:
    root = page(seeded, f"/dashboard/metrics/{seeded.text.name}")
    table = root.by_id("text-history-table")
    assert table is not None
    by_period = {
        row.attrs["data-period"]: row for row in table.find_all("tr") if "data-period" in row.attrs
    }
    assert list(by_period)[:2] == [NOW_DAY, YESTERDAY]
    assert "yterm" in by_period[YESTERDAY].text
    assert "nterm" in by_period[NOW_DAY].text
    assert by_period[YESTERDAY].find(
        "a", href=f"/dashboard/metrics/{seeded.text.name}?end={YESTERDAY}"
    )
    series = api(seeded, f"/v1/metrics/{seeded.text.name}/series?start={DAYS[0]}&end={NOW_DAY}")
    reports = {p["end"]: p["n"] for p in series["series"]}
    for period, row in by_period.items():
        cells = [c.text for c in row.children if c.tag in ("th", "td")]
        assert cells[1] == f"{reports[period]:,}"


def test_the_floor_line_has_a_legend_and_no_bar_ends_left_of_it(seeded: Seeded) -> None:
    """A string whose estimated share is below the floor is listed apart, under the chart,
    not drawn as a bar that ends left of the dashed line."""
    root = page(seeded, f"/dashboard/metrics/{seeded.text.name}?end={YESTERDAY}")
    key = root.by_id("floor-key")
    assert key is not None and key.find("span", cls="key-floor") is not None
    assert "detection floor" in key.text
    document = api(seeded, f"/v1/metrics/{seeded.text.name}/estimate?end={YESTERDAY}")
    t95 = document["floor"]["t95"]
    below = [s["value"] for s in document["strings"] if s["share"] < t95]
    assert below, "the seeded data should hold a string found below the floor"
    for svg_id in ("text-chart", "text-chart-narrow"):
        bars = root.by_id(svg_id).find_all("rect", cls="bar")
        assert bars
        assert all(float(bar.attrs["data-estimate"]) >= t95 for bar in bars)
    listed = [row[0] for row in root.by_id("below-floor-table").rows()]
    assert listed == below
    assert [row[0] for row in root.by_id("text-table").rows()] == [
        s["value"] for s in document["strings"] if s["share"] >= t95
    ]


# --- time-range presets and the comparison to the previous period ---------------------------


@pytest.mark.parametrize("which", ["color", "load"])
def test_every_metric_page_offers_time_range_presets(seeded: Seeded, which: str) -> None:
    name = getattr(seeded, which).name
    root = page(seeded, f"/dashboard/metrics/{name}")
    presets = {a.attrs["data-preset"]: a for a in root.by_id("presets").find_all("a")}
    assert list(presets) == ["today", "7d", "30d", "month"]
    expected = {
        "today": (NOW_DAY, NOW_DAY),
        "7d": (DAYS[0], NOW_DAY),
        "30d": ((TODAY - dt.timedelta(days=29)).isoformat(), NOW_DAY),
        "month": (TODAY.replace(day=1).isoformat(), NOW_DAY),
    }
    for key, (start, end) in expected.items():
        query = parse_qs(urlsplit(presets[key].attrs["href"]).query)
        assert (query["start"], query["end"]) == ([start], [end]), key
    assert "aria-current" in presets["7d"].attrs  # the default range is the last 7 days
    chosen = page(seeded, presets["today"].attrs["href"])
    assert chosen.find("input", name="start").attrs["value"] == NOW_DAY
    assert "aria-current" in chosen.by_id("presets").find("a", data_preset="today").attrs


@pytest.mark.parametrize("which", ["color", "load"])
def test_the_metric_page_compares_to_the_previous_period(seeded: Seeded, which: str) -> None:
    """The form's checkbox asks for the API's compare_to=previous; the card shows its rows."""
    name = getattr(seeded, which).name
    root = page(seeded, f"/dashboard/metrics/{name}")
    box = root.by_id("pickers").find("input", name="compare")
    assert box is not None and box.attrs["type"] == "checkbox" and box.attrs["value"] == "previous"
    assert root.by_id("comparison") is None
    window = f"start={DAYS[-3]}&end={NOW_DAY}"
    shown = page(seeded, f"/dashboard/metrics/{name}?{window}&compare=previous")
    assert "checked" in shown.by_id("pickers").find("input", name="compare").attrs
    card = shown.by_id("comparison")
    assert card is not None
    assert DAYS[-6] in card.text and DAYS[-4] in card.text
    method = "&method=unbiased" if which == "load" else ""
    document = api(seeded, f"/v1/metrics/{name}/estimate?{window}&compare_to=previous{method}")
    rows = document["slices"][0]["rows"]
    table = shown.by_id("comparison-table").rows()
    assert [r[0] for r in table] == [r["category"] for r in rows]
    assert [r[-1] for r in table] == [r["verdict"] for r in rows]
    if which == "load":  # the mean rose by 150 a day: 3 days against the 3 before
        assert rows[0]["verdict"] == "higher"
        assert table[0][3].startswith("+")


# --- did my event arrive? ----------------------------------------------------------------------


def test_the_overview_and_the_metric_page_say_when_reports_last_arrived(
    databases: DatabaseFactory, backend: str
) -> None:
    """The last report received and the reports of the last hour, per metric, from the
    collector's clock; a metric that had reports and received none for an hour turns amber on
    the overview, one that never had any does not; a resent report is no new arrival."""
    clock = Clock(TEST_NOW)
    with viewer_collector(databases.new(backend), clock=clock) as server:
        with server.client(ADMIN_TOKEN) as admin:
            busy = register(admin, MetricSpec.boolean("arrive_busy", epsilon=1.0))
            register(admin, MetricSpec.boolean("arrive_never", epsilon=1.0))
        reports = make_reports(busy, [0, 1] * 150, NOW_DAY, 3)
        with server.client(INGEST_KEY) as device:
            upload(device, reports[:200])
            clock.now = TEST_NOW + dt.timedelta(minutes=30)
            upload(device, reports[200:])
            upload(device, reports[:50])  # resent: no new report arrives
        clock.now = TEST_NOW + dt.timedelta(minutes=30, seconds=12)
        seeded = Seeded(server, busy, busy, busy)

        overview = page(seeded, "/dashboard/")
        rows = {
            r.attrs["data-metric"]: r
            for r in overview.by_id("metrics").find_all("tr")
            if "data-metric" in r.attrs
        }
        cell = rows["arrive_busy"].find(cls="arrival")
        assert cell is not None and cell.attrs["data-last-hour"] == "300"
        assert "12 s ago" in cell.text and "300 reports in the last hour" in cell.text
        assert "stopped" not in rows["arrive_busy"].classes
        never = rows["arrive_never"].find(cls="arrival")
        assert "no report yet" in never.text and "stopped" not in rows["arrive_never"].classes

        quiet = page(seeded, "/dashboard/metrics/arrive_never")
        assert quiet.by_id("arrivals").text == "No report received yet."
        metric = page(seeded, "/dashboard/metrics/arrive_busy")
        assert metric.by_id("last-report").text == "12 s ago"
        assert metric.by_id("last-hour").text == "300"

        clock.now = TEST_NOW + dt.timedelta(minutes=89)  # the first 200 are over an hour old
        assert page(seeded, "/dashboard/metrics/arrive_busy").by_id("last-hour").text == "100"
        clock.now = TEST_NOW + dt.timedelta(hours=3)
        overview = page(seeded, "/dashboard/")
        rows = {
            r.attrs["data-metric"]: r
            for r in overview.by_id("metrics").find_all("tr")
            if "data-metric" in r.attrs
        }
        assert "stopped" in rows["arrive_busy"].classes
        assert "2 h ago" in rows["arrive_busy"].find(cls="arrival").text
        assert rows["arrive_busy"].find(cls="arrival").attrs["data-last-hour"] == "0"
        assert "stopped" not in rows["arrive_never"].classes


# --- explanations where the jargon is -----------------------------------------------------------


def test_the_method_and_pooling_pickers_explain_their_choices(seeded: Seeded) -> None:
    root = page(seeded, f"/dashboard/metrics/{seeded.color.name}")
    help_box = root.by_id("pickers-help")
    assert help_box is not None and help_box.tag == "details"
    methods = {d.attrs["data-term"]: d.text for d in root.by_id("method-terms").find_all("div")}
    options = [o.attrs["value"] for o in root.find("select", name="method").find_all("option")]
    assert list(methods) == options
    assert "below 0" in methods["unbiased"] and "100%" in methods["consistent"]
    poolings = {d.attrs["data-term"]: d.text for d in root.by_id("pooling-terms").find_all("div")}
    assert list(poolings) == ["overlap-safe", "independent"]
    assert "same devices" in poolings["overlap-safe"]
    numeric = page(seeded, f"/dashboard/metrics/{seeded.load.name}")
    assert numeric.by_id("method-terms") is None and numeric.by_id("pooling-terms") is not None


def test_the_planners_name_their_mechanisms_and_v_star(seeded: Seeded) -> None:
    root = page(seeded, "/dashboard/plan?k=12&epsilon=1&margin=3")
    listed = [row[0] for row in root.by_id("mechanisms").rows()]
    names = {d.attrs["data-term"]: d.text for d in root.by_id("mechanism-names").find_all("div")}
    assert list(names) == listed
    assert "randomized response" in names["krr"] and "unary encoding" in names["oue"]
    assert "noise one report carries" in root.by_id("v-star").text
    numeric = page(seeded, "/dashboard/plan?kind=numeric&margin=50")
    choices = [
        o.attrs["value"] for o in numeric.find("select", name="mechanism").find_all("option")
    ]
    terms = [d.attrs["data-term"] for d in numeric.by_id("mechanism-names").find_all("div")]
    assert terms == choices


@pytest.mark.parametrize("typed", ["2", "0.02"])
def test_the_planner_reads_a_margin_in_points_and_says_points(seeded: Seeded, typed: str) -> None:
    """2 and 0.02 are the same margin: ±2 points, so the same reports needed."""
    expected = plan_document(12, 1.0, margin=0.02, reports=None, confidence=0.95, simultaneous=True)
    needed = next(r for r in expected["mechanisms"] if r["mechanism"] == expected["advised"])
    root = page(seeded, f"/dashboard/plan?k=12&epsilon=1&margin={typed}")
    assert root.by_id("reports-needed").text == f"{needed['reports_needed']:,}"
    label = root.find("input", name="margin")
    assert label.attrs["aria-describedby"] == "margin-hint"
    assert "points" in root.by_id("margin-hint").text
    assert "±2 points" in root.text
    assert "±2%" not in root.text


# --- a planner that knows your metrics ------------------------------------------------------------


def test_the_planner_opens_with_your_metrics_at_todays_reports(seeded: Seeded) -> None:
    """The metrics with the most reports today first, each with the worst-case simultaneous
    margin its reports give (the overview's planner figure), in points."""
    root = page(seeded, "/dashboard/plan")
    listed = root.by_id("your-metrics").find_all("li")
    assert [li.attrs["data-metric"] for li in listed[:3]] == [
        seeded.text.name,
        seeded.color.name,
        seeded.load.name,
    ]
    heading = root.find("div", cls="heading")
    assert heading.children[1].attrs.get("id") == "your-metrics"  # right under the title
    color = next(li for li in listed if li.attrs["data-metric"] == seeded.color.name)
    spec = seeded.color
    margin = margin_of_error(
        spec.k, spec.epsilon, 600, mechanism=spec.randomizer, simultaneous=True
    )
    assert color.text == f"{spec.name} at today's 600 reports: ±{margin * 100:.1f} points"
    text = next(li for li in listed if li.attrs["data-metric"] == seeded.text.name)
    assert text.text.startswith(
        f"{seeded.text.name} at today's {TEXT_REPORTS:,} reports: detection floor"
    )
    assert color.find("a").attrs["href"] == f"/dashboard/metrics/{spec.name}"


def test_the_numeric_planner_opens_with_the_same_lines_on_your_metrics(seeded: Seeded) -> None:
    """The number form's planner knows your metrics too: the shares planner's first lines,
    from the same source, right under its title."""
    shares = page(seeded, "/dashboard/plan").by_id("your-metrics")
    root = page(seeded, "/dashboard/plan?kind=numeric")
    numbers = root.by_id("your-metrics")
    heading = root.find("div", cls="heading")
    assert heading.children[1].attrs.get("id") == "your-metrics"
    assert [li.text for li in numbers.find_all("li")] == [li.text for li in shares.find_all("li")]
    load = next(li for li in numbers.find_all("li") if li.attrs["data-metric"] == seeded.load.name)
    assert load.text.startswith(f"{seeded.load.name} at today's ") and "(its units)" in load.text
    assert load.find("a").attrs["href"] == f"/dashboard/metrics/{seeded.load.name}"
    assert "what your metrics' reports give now" in root.find("p", cls="lede").text


# --- collapsed tables, decimals, /docs and the dashboard ------------------------------------------


def test_the_per_period_tables_are_collapsed(seeded: Seeded) -> None:
    for name, details_id, table_id in (
        (seeded.color.name, "series-rows", "series-table"),
        (seeded.load.name, "mean-rows", "mean-table"),
    ):
        root = page(seeded, f"/dashboard/metrics/{name}")
        details = root.by_id(details_id)
        assert details is not None and details.tag == "details" and "open" not in details.attrs
        rows = details.find("table", id=table_id).rows()
        assert len(rows) >= 7
        assert f"{len(rows)} rows" in details.find("summary").text


def test_a_table_shows_one_decimal_where_the_interval_is_points_wide(seeded: Seeded) -> None:
    """fd_color's intervals are several points wide at 600 reports a day: 41.3%, not 41.27%."""
    root = page(seeded, f"/dashboard/metrics/{seeded.color.name}")
    document = api(
        seeded, f"/v1/metrics/{seeded.color.name}/estimate?start={DAYS[0]}&end={NOW_DAY}"
    )
    for row, expected in zip(
        root.by_id("estimate-table").rows(), document["estimates"], strict=True
    ):
        assert expected["ci_high"] - expected["ci_low"] > 0.02
        values = (expected["frequency"], expected["ci_low"], expected["ci_high"])
        assert row[1:4] == [f"{v * 100:.1f}%" for v in values]
    for row in root.by_id("series-table").rows():
        for cell in row[3:6]:
            number = cell.split("%")[0]
            assert len(number.split(".")[1]) == 1, row


def test_the_dashboard_and_docs_link_to_each_other(seeded: Seeded) -> None:
    root = page(seeded, "/dashboard/")
    nav = root.find("nav", aria_label="Dashboard")
    assert nav.find("a", href="/docs") is not None
    with httpx.Client(base_url=seeded.url, trust_env=False) as client:
        schema = client.get("/openapi.json").json()
    assert "](/dashboard/)" in schema["info"]["description"]


def test_a_comparison_with_an_empty_previous_period_says_so(seeded: Seeded) -> None:
    """The week before the seeded one has no reports: no rows of ±100 points, one sentence."""
    root = page(seeded, f"/dashboard/metrics/{seeded.color.name}?compare=previous")
    assert root.by_id("comparison-table") is None
    problem = root.by_id("comparison-problem").text
    assert "previous period" in problem and "no reports" in problem
