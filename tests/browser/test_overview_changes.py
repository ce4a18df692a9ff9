"""The overview marks only detectable changes, and its sparklines draw the interval band, in
headless Chromium against its own seeded collector (its metrics would change the shared
fixture's overview).

Seeded over the last 7 days, fixed seeds: ``shift_dark`` (boolean, 2,000 devices a day, true
share 20% until yesterday, 50% today: a change the period comparison detects), and
``steady_color`` (categorical, 1,500 devices a day, exactly the same shares every day: its
change is noise). The marks must be the API's period comparison's verdicts (one source of
truth), the true change inside the API's interval, and no number shown for an undetectable one.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

from deniable.client import MetricSpec
from testkit import ADMIN_TOKEN, INGEST_KEY, CollectorProcess, authorized_client, collector_settings
from testkit.browser import (
    VIEWER_TOKEN,
    browser_problem,
    full_page_screenshot,
    require_browser,
    sign_in,
)

require_browser(browser_problem())  # before Selenium is imported: skip, or fail in CI

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

from testkit import make_reports  # noqa: E402

from .conftest import SCREENSHOTS, last_days, population, register, upload  # noqa: E402

pytestmark = pytest.mark.browser

DAYS = 7
DARK = (0.2, 0.5)
"""The dark-mode share until yesterday, and today."""
COLORS = ("red", "green", "blue")
COLOR_SHARES = (0.5, 0.3, 0.2)


@pytest.fixture(scope="module")
def overview_url(browser_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("overview")
    settings = collector_settings(f"sqlite:///{directory}/collector.db")
    with CollectorProcess(
        settings, directory, env={"DENIABLE_VIEWER_TOKEN": VIEWER_TOKEN}
    ) as server:
        days = last_days(DAYS)
        with authorized_client(server.url, ADMIN_TOKEN) as admin:
            dark = register(admin, MetricSpec.boolean("shift_dark", epsilon=2.0))
            color = register(admin, MetricSpec.categorical("steady_color", COLORS, epsilon=2.0))
        with authorized_client(server.url, INGEST_KEY) as uploader:
            for i, day in enumerate(days):
                share = DARK[1] if day == days[-1] else DARK[0]
                values = population(2000, (1 - share, share))
                upload(uploader, make_reports(dark, values, day, seed=900 + i))
                upload(uploader, make_reports(color, population(1500, COLOR_SHARES), day, 950 + i))
        yield server.url


def comparison(url: str, name: str) -> dict:
    today = last_days(1)[0]
    query = urlencode({"start": today, "end": today, "compare_to": "previous"})
    with authorized_client(url, ADMIN_TOKEN) as admin:
        response = admin.get(f"/v1/metrics/{name}/estimate?{query}")
    assert response.status_code == 200, response.text
    return response.json()


def test_only_the_detectable_change_is_marked_and_every_sparkline_draws_its_band(
    driver: WebDriver, overview_url: str
) -> None:
    sign_in(driver, overview_url, VIEWER_TOKEN)
    driver.get(overview_url + "/dashboard/")
    cells = {
        row.get_attribute("data-metric"): row.find_element(By.CSS_SELECTOR, "td.change")
        for row in driver.find_elements(By.CSS_SELECTOR, "table#metrics tr[data-metric]")
    }
    assert set(cells) == {"shift_dark", "steady_color"}
    dark_rows = comparison(overview_url, "shift_dark")["slices"][0]["rows"]
    (true_row,) = [row for row in dark_rows if row["category"] == "true"]
    assert true_row["verdict"] == "higher"
    assert true_row["ci_low"] <= DARK[1] - DARK[0] <= true_row["ci_high"], true_row
    assert cells["shift_dark"].get_attribute("data-verdict") == "higher"
    assert cells["shift_dark"].text == f"↑ {true_row['difference'] * 100:+.1f} pts"
    color_rows = comparison(overview_url, "steady_color")["slices"][0]["rows"]
    assert all(row["verdict"] == "no detectable change at 95%" for row in color_rows), color_rows
    steady = cells["steady_color"]
    assert steady.get_attribute("data-verdict") == "none"
    assert steady.text == "no detectable change"
    for row in driver.find_elements(By.CSS_SELECTOR, "table#metrics tr[data-metric]"):
        spark = row.find_element(By.CSS_SELECTOR, "svg.sparkline")
        bands = spark.find_elements(By.CSS_SELECTOR, "polygon.band")
        assert len(bands) == 1, row.get_attribute("data-metric")  # 7 days in a row with reports
        band_box, line_box = bands[0].rect, spark.find_element(By.CSS_SELECTOR, "polyline").rect
        assert band_box["height"] >= line_box["height"] - 0.5
    full_page_screenshot(driver, SCREENSHOTS / "overview-changes-1280.png", 1280)
    full_page_screenshot(driver, SCREENSHOTS / "overview-changes-375.png", 375)
