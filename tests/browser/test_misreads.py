"""The numbers nobody misreads (issue 41), as headless Chromium draws them at 1280 and 375 px:
bare quantile intervals, the note beside a pooled interval and its links, the empty state of a
metric with no reports, the overview's marks and margins, and the breakdown's one chart whose
tick labels do not collide (measured on the rendered text). Screenshots of each page at both
widths go to test-artifacts/screenshots/misreads-*.png.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

from deniable.client import MetricSpec
from testkit import ADMIN_TOKEN, INGEST_KEY, authorized_client, make_reports
from testkit.browser import (
    browser_problem,
    full_page_screenshot,
    overflow,
    require_browser,
    set_viewport,
    viewer_session,
)

require_browser(browser_problem())  # before Selenium is imported: skip, or fail in CI

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

from .conftest import SCREENSHOTS, Seeded, register, upload  # noqa: E402

pytestmark = pytest.mark.browser

WIDTHS = (1280, 375)
PLATFORMS = ("ios", "android", "web")


@pytest.fixture(scope="module")
def extra(seeded: Seeded) -> Iterator[dict[str, str]]:
    """Two more metrics on the module's collector: one with no reports, one with a platform
    dimension reported yesterday and today (names by role)."""
    with authorized_client(seeded.url, ADMIN_TOKEN) as admin:
        empty = register(admin, MetricSpec.boolean("misread_empty", epsilon=2.0))
        sliced = register(
            admin,
            MetricSpec.boolean(
                "misread_dark", epsilon=2.0, dimensions={"platform": list(PLATFORMS)}
            ),
        )
    with authorized_client(seeded.url, INGEST_KEY) as uploader:
        for i, day in enumerate(seeded.days[-2:]):
            for j, (platform, share) in enumerate(zip(PLATFORMS, (0.3, 0.35, 0.6), strict=True)):
                values = [1] * round(600 * share) + [0] * round(600 * (1 - share))
                reports = [
                    {**report, "dims": {"platform": platform}}
                    for report in make_reports(sliced, values, day, seed=40 + 3 * i + j)
                ]
                upload(uploader, reports)
    yield {"empty": empty.name, "sliced": sliced.name}


def shoot(driver: WebDriver, name: str, part: str | None = None) -> None:
    """Screenshots of the current page at both widths (and of its element ``part``, a CSS
    selector, to read at full size); neither scrolls sideways."""
    for width in WIDTHS:
        set_viewport(driver, width, 900)
        assert overflow(driver) is None, (name, width, overflow(driver))
        if part is not None:
            element = driver.find_element(By.CSS_SELECTOR, part)
            driver.execute_script("arguments[0].scrollIntoView();", element)
            element.screenshot(str(SCREENSHOTS / f"misreads-{name}-part-{width}.png"))
        full_page_screenshot(driver, SCREENSHOTS / f"misreads-{name}-{width}.png", width)
    set_viewport(driver, WIDTHS[0], 900)


def week(seeded: Seeded, **params: str) -> str:
    """The query of the 7 seeded days with ``params``."""
    return urlencode({"start": seeded.days[0], "end": seeded.days[-1], **params})


def test_quantiles_over_time_are_bare_intervals_with_a_unit(
    driver: WebDriver, seeded: Seeded
) -> None:
    viewer_session(driver, seeded.url)
    driver.get(f"{seeded.url}/dashboard/metrics/{seeded.histogram.name}?{week(seeded)}")
    chart = driver.find_element(By.CSS_SELECTOR, "svg#quantile-series-chart")
    assert chart.is_displayed()
    assert chart.find_elements(By.CSS_SELECTOR, "circle") == []
    intervals = chart.find_elements(By.CSS_SELECTOR, "line.interval")
    assert len(intervals) == 2 * len(seeded.days)  # p50 and p90, every day: none vanished
    assert all(line.rect["height"] > 0 for line in intervals)
    titles = [t.text for t in chart.find_elements(By.CSS_SELECTOR, "text.axis-title")]
    assert any("(ms)" in title for title in titles), titles
    shoot(driver, "histogram", "form#quantile-picker + ul + .chart-pair")


def test_a_pooled_interval_says_why_and_links_one_day(driver: WebDriver, seeded: Seeded) -> None:
    viewer_session(driver, seeded.url)
    driver.get(f"{seeded.url}/dashboard/metrics/{seeded.categorical.name}?{week(seeded)}")
    note = driver.find_element(By.CSS_SELECTOR, "p#pooled-note")
    assert note.is_displayed() and "no more precise than its best day" in note.text
    shoot(driver, "pooled", "p#pooled-note")
    note.find_element(By.CSS_SELECTOR, "a.per-period").click()
    assert f"start={seeded.days[-1]}" in driver.current_url
    assert driver.find_elements(By.CSS_SELECTOR, "p#pooled-note") == []
    driver.back()
    driver.find_element(By.CSS_SELECTOR, "p#pooled-note a.why").click()
    assert "overlap-safe" in driver.find_element(By.CSS_SELECTOR, "#pooling-help").text
    shoot(driver, "pooling-help")


def test_a_metric_without_reports_shows_the_sdk_lines(
    driver: WebDriver, seeded: Seeded, extra: dict[str, str]
) -> None:
    viewer_session(driver, seeded.url)
    driver.get(f"{seeded.url}/dashboard/metrics/{extra['empty']}")
    card = driver.find_element(By.CSS_SELECTOR, "section#empty-state")
    assert "No reports yet" in card.text
    assert f'client.record("{extra["empty"]}", True)' in card.text
    assert driver.find_elements(By.CSS_SELECTOR, "svg.chart") == []
    shoot(driver, "empty", "section#empty-state")


def test_the_overview_marks_and_margins(
    driver: WebDriver, seeded: Seeded, extra: dict[str, str]
) -> None:
    viewer_session(driver, seeded.url)
    driver.get(f"{seeded.url}/dashboard/")
    margin = driver.find_element(
        By.CSS_SELECTOR, f'tr[data-metric="{seeded.numeric.name}"] td.margin'
    )
    assert margin.text.startswith("±") and " ms" in margin.text and "this data's" in margin.text
    shoot(driver, "overview", "table#metrics")


def test_the_breakdown_draws_one_chart_whose_tick_labels_do_not_collide(
    driver: WebDriver, seeded: Seeded, extra: dict[str, str]
) -> None:
    viewer_session(driver, seeded.url)
    query = week(seeded, by="platform", first="ios", second="android")
    driver.get(f"{seeded.url}/dashboard/metrics/{extra['sliced']}/breakdown?{query}")
    for width, svg_id in zip(WIDTHS, ("slices-chart", "slices-chart-narrow"), strict=True):
        set_viewport(driver, width, 900)
        chart = driver.find_element(By.CSS_SELECTOR, f"svg#{svg_id}")
        assert chart.is_displayed(), width
        slices = chart.find_elements(By.CSS_SELECTOR, "g.slice")
        assert [s.get_attribute("data-slice") for s in slices] == list(PLATFORMS)
        boxes = sorted(
            (t.rect["x"], t.rect["x"] + t.rect["width"])
            for t in chart.find_elements(By.CSS_SELECTOR, "text.tick")
        )
        assert len(boxes) >= 2
        for (_, right), (left, _) in itertools.pairwise(boxes):
            assert right <= left, (width, boxes)
        chart_box = chart.rect
        for bar in chart.find_elements(By.CSS_SELECTOR, "rect.bar"):
            assert bar.rect["x"] - chart_box["x"] < 0.05 * chart_box["width"], width
    set_viewport(driver, WIDTHS[0], 900)
    verdicts = driver.find_elements(By.CSS_SELECTOR, "#comparison-table td:last-child")
    assert verdicts and all("change" not in cell.text for cell in verdicts)
    assert driver.find_element(By.CSS_SELECTOR, "p#pooled-note").is_displayed()
    shoot(driver, "breakdown", "div#breakdown-multiples")
