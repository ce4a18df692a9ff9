"""Issue 41's dashboard in headless Chromium at 1280 and 375 px, against the seeded collector.

Every page is opened at both widths, including a metric with no reports yet and the text page
with its period picker, and each saves a full-page screenshot to
``test-artifacts/screenshots/first-day-*.png``; each must keep the layout rules of
:mod:`.test_dashboard` and show what issue 41 added where a person can see it: the presets and
the comparison checkbox, when the last report arrived, the collapsed per-period tables (opened
with a click), the explanations, the floor's legend, the planner's first line, the link to
/docs, and charts as wide as their card. The text page's picker is used as a person would:
pick yesterday, submit, read yesterday's strings.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from deniable.client import MetricSpec
from testkit import ADMIN_TOKEN, INGEST_KEY, authorized_client, make_text_reports
from testkit.browser import (
    NARROW,
    WIDE,
    browser_problem,
    full_page_screenshot,
    require_browser,
    set_viewport,
    submit_form,
    viewer_session,
)

require_browser(browser_problem())  # before Selenium is imported: skip, or fail in CI

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

from .conftest import SCREENSHOTS, Seeded, register, upload  # noqa: E402
from .test_dashboard import open_page, page_faults  # noqa: E402

pytestmark = pytest.mark.browser

TERMS = "browser_terms"
"""A text metric with one search term yesterday and another today."""
EMPTY = "browser_empty"
"""A metric with no reports at all."""
TERM_REPORTS = 2000


@pytest.fixture(scope="module")
def extra(seeded: Seeded) -> Iterator[tuple[str, str]]:
    """The text metric with yesterday's and today's strings and the empty metric, on the
    module's seeded collector; (yesterday, today)."""
    yesterday, today = seeded.days[-2], seeded.days[-1]
    with authorized_client(seeded.url, ADMIN_TOKEN) as admin:
        terms = register(admin, MetricSpec.text(TERMS, max_length=8, epsilon=4.0))
        register(admin, MetricSpec.boolean(EMPTY, epsilon=1.0))
    with authorized_client(seeded.url, INGEST_KEY) as device:
        for day, lead, seed in ((yesterday, "yterm", 11), (today, "nterm", 12)):
            values = [lead if i % 2 else f"u{i:06d}" for i in range(TERM_REPORTS)]
            upload(device, make_text_reports(terms, values, day, seed))
    yield yesterday, today


def pages(seeded: Seeded, yesterday: str) -> dict[str, str]:
    """Every page this test opens (name for the screenshot file: URL)."""
    base = f"{seeded.url}/dashboard"
    week = urlencode({"start": seeded.days[0], "end": seeded.days[-1]})
    return {
        "overview": f"{base}/",
        "categorical": f"{base}/metrics/{seeded.categorical.name}",
        "categorical-compared": f"{base}/metrics/{seeded.categorical.name}?{week}&compare=previous",
        "numeric": f"{base}/metrics/{seeded.numeric.name}",
        "histogram": f"{base}/metrics/{seeded.histogram.name}",
        "boolean": f"{base}/metrics/{seeded.boolean.name}",
        "long-labels": f"{base}/metrics/{seeded.agents.name}",
        "empty": f"{base}/metrics/{EMPTY}",
        "text": f"{base}/metrics/{seeded.text.name}",
        "text-yesterday": f"{base}/metrics/{TERMS}?end={yesterday}",
        "plan": f"{base}/plan?k=12&epsilon=1&margin=3",
        "plan-numeric": f"{base}/plan?kind=numeric",
        "privacy": f"{base}/privacy",
    }


def shown(driver: WebDriver, selector: str) -> bool:
    """Whether an element matching ``selector`` is on the page and displayed (found afresh)."""
    return any(e.is_displayed() for e in driver.find_elements(By.CSS_SELECTOR, selector))


def seen_items(driver: WebDriver, page: str) -> dict[str, bool]:
    """Issue 41's items a person should see on ``page``, each True when it is displayed."""
    items = {"the link to /docs": shown(driver, 'header nav a[href="/docs"]')}
    metric = page not in ("overview", "plan", "plan-numeric", "privacy")
    if page == "overview":
        items["when reports arrived"] = all(
            cell.is_displayed() and ("ago" in cell.text or "no report yet" in cell.text)
            for cell in driver.find_elements(By.CSS_SELECTOR, ".arrival")
        ) and bool(driver.find_elements(By.CSS_SELECTOR, ".arrival"))
    if metric:
        items["the breadcrumb"] = shown(driver, "p.crumb a")
        items["the last report received"] = shown(driver, "#arrivals")
    if metric and not page.startswith("text"):
        items["four presets"] = (
            len(
                [a for a in driver.find_elements(By.CSS_SELECTOR, "#presets a") if a.is_displayed()]
            )
            == 4
        )
        items["the compare checkbox"] = shown(driver, 'input[name="compare"]')
        items["the pickers' explanations"] = shown(driver, "#pickers-help summary")
        if page != "empty":  # an empty range shows how to send reports instead of tables
            items["collapsed per-period rows"] = shown(
                driver, "details#series-rows summary, details#mean-rows summary"
            ) and not shown(driver, "#series-table, #mean-table")
    if page == "categorical-compared":
        items["the comparison"] = shown(driver, "#comparison")
    if page.startswith("text"):
        items["the period picker"] = shown(driver, '#pickers input[name="end"]')
        items["the floor's legend"] = shown(driver, "#floor-key .key-floor")
        items["the CSV"] = shown(driver, "#text-csv")
        items["the periods before"] = shown(driver, "#text-history-table")
    if page in ("plan", "plan-numeric"):
        items["your metrics first"] = shown(driver, "#your-metrics li")
    if page == "plan":
        items["the mechanisms named"] = shown(driver, "#mechanism-names")
        items["the margin hint"] = shown(driver, "#margin-hint")
    return items


@pytest.mark.parametrize(
    "page",
    [
        "overview",
        "categorical",
        "categorical-compared",
        "numeric",
        "histogram",
        "boolean",
        "long-labels",
        "empty",
        "text",
        "text-yesterday",
        "plan",
        "plan-numeric",
        "privacy",
    ],
)
def test_every_page_shows_the_first_day_items_at_375_and_1280_px(
    driver: WebDriver, seeded: Seeded, extra: tuple[str, str], page: str
) -> None:
    url = pages(seeded, extra[0])[page]
    viewer_session(driver, seeded.url)
    try:
        for width, height in (WIDE, NARROW):
            set_viewport(driver, width, height)
            open_page(driver, url)
            if width == NARROW[0]:  # the first screen a phone shows, at its own size
                driver.save_screenshot(str(SCREENSHOTS / f"first-day-{page}-{width}-top.png"))
            full_page_screenshot(driver, SCREENSHOTS / f"first-day-{page}-{width}.png", width)
            assert page_faults(driver, seeded.url) == {}, (page, width)
            missing = [item for item, seen in seen_items(driver, page).items() if not seen]
            assert missing == [], (page, width)
    finally:
        set_viewport(driver, *WIDE)


def test_the_text_pages_picker_shows_yesterdays_strings(
    driver: WebDriver, seeded: Seeded, extra: tuple[str, str]
) -> None:
    yesterday, today = extra
    viewer_session(driver, seeded.url)
    open_page(driver, f"{seeded.url}/dashboard/metrics/{TERMS}")
    assert "nterm" in driver.find_element(By.CSS_SELECTOR, "#text-table").text
    field = driver.find_element(By.CSS_SELECTOR, '#pickers input[name="end"]')
    assert field.get_attribute("type") == "date" and field.get_attribute("value") == today
    driver.execute_script("arguments[0].value = arguments[1]", field, yesterday)
    submit_form(driver, driver.find_element(By.CSS_SELECTOR, "form#pickers"))
    assert parse_qs(urlsplit(driver.current_url).query)["end"] == [yesterday]
    table = driver.find_element(By.CSS_SELECTOR, "#text-table").text
    assert "yterm" in table and "nterm" not in table
    full_page_screenshot(driver, SCREENSHOTS / "first-day-text-picked-375.png", NARROW[0])


def test_a_collapsed_table_opens_with_a_click(driver: WebDriver, seeded: Seeded) -> None:
    viewer_session(driver, seeded.url)
    open_page(driver, f"{seeded.url}/dashboard/metrics/{seeded.categorical.name}")
    assert not shown(driver, "#series-table")
    driver.find_element(By.CSS_SELECTOR, "details#series-rows summary").click()
    WebDriverWait(driver, 10).until(lambda d: shown(d, "#series-table"))
    rows = driver.find_elements(By.CSS_SELECTOR, "#series-table tbody tr")
    assert len(rows) >= 7


def chart_and_card(driver: WebDriver, chart: str) -> Any:
    """The widths of ``chart`` and of its card's content box (CSS px), read in the page."""
    return driver.execute_script(
        """
        const svg = document.querySelector(arguments[0]);
        const card = svg.closest('.card');
        const style = getComputedStyle(card);
        const inner = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
        return [svg.getBoundingClientRect().width, inner];
        """,
        chart,
    )


def test_charts_use_the_cards_width(driver: WebDriver, seeded: Seeded) -> None:
    viewer_session(driver, seeded.url)
    set_viewport(driver, *WIDE)
    for name, chart in (
        (seeded.categorical.name, "svg#estimate-chart"),
        (seeded.numeric.name, "svg#mean-chart"),
        (seeded.boolean.name, "svg#series-chart"),
    ):
        open_page(driver, f"{seeded.url}/dashboard/metrics/{name}")
        width, inner = chart_and_card(driver, chart)
        assert width >= 0.97 * inner, (name, chart, width, inner)


def test_a_metric_that_stops_receiving_reports_is_not_amber_while_reports_arrive(
    driver: WebDriver, seeded: Seeded
) -> None:
    """The seeded metrics received their reports seconds ago: none is marked stopped, and each
    says how many arrived in the last hour."""
    viewer_session(driver, seeded.url)
    open_page(driver, f"{seeded.url}/dashboard/")
    assert not driver.find_elements(By.CSS_SELECTOR, "#metrics tr.stopped")
    cell = driver.find_element(
        By.CSS_SELECTOR, f'tr[data-metric="{seeded.categorical.name}"] .arrival'
    )
    assert int(cell.get_attribute("data-last-hour").replace(",", "")) == 21_000
