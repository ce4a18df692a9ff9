"""The Privacy page with shuffled batches, as a viewer sees it in headless Chromium at 1280 and
375 px: a batch whose refused sealed reports are left out of its n, and one left below the
minimum batch size, each stated in its row, the weakest bound per metric above the table, the
page clean (no console error, nothing from another origin, no sideways scroll), screenshotted
to ``test-artifacts/screenshots/``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from deniable.client import MetricSpec
from deniable.collector.sealingkeys import generate
from testkit import ADMIN_TOKEN, RunningCollector, collector_settings, unique_name
from testkit.browser import (
    NARROW,
    VIEWER_TOKEN,
    WIDE,
    browser_problem,
    full_page_screenshot,
    require_browser,
    set_viewport,
    viewer_session,
)
from testkit.metrics import register
from testkit.shuffler_process import SHUFFLER_TOKEN
from tests.shuffler.conftest import MIN_BATCH
from tests.shuffler.test_collector_routes import (
    forward,
    invalid_envelopes,
    part,
    sealed_reports,
)

require_browser(browser_problem())  # before Selenium is imported: skip, or fail in CI

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

from .conftest import SCREENSHOTS  # noqa: E402
from .test_dashboard import open_page, page_faults  # noqa: E402

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def shuffled(
    browser_ready: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningCollector, dict[str, MetricSpec]]]:
    """A collector that took two shuffled batches: ``kept`` (n 12 stated, 5 sealed reports
    refused: 7 devices) and ``small`` (n 4 stated, 2 refused: 2 devices, below the minimum
    of 3)."""
    directory = tmp_path_factory.mktemp("privacy-shuffled")
    keys = Path(directory) / "keys.json"
    generate(keys, dt.datetime.now(dt.UTC))
    settings = collector_settings(
        f"sqlite:///{directory}/collector.db",
        shuffler_token=SHUFFLER_TOKEN,
        sealing_keys_file=keys,
        shuffle_min_batch=MIN_BATCH,
        viewer_token=VIEWER_TOKEN,
    )
    server = RunningCollector(settings).start()
    try:
        specs = {}
        with server.client(ADMIN_TOKEN) as admin:
            for role in ("kept", "small"):
                specs[role] = register(
                    admin,
                    MetricSpec.categorical(unique_name(role), ["a", "b", "c"], epsilon=2.0),
                )
            specs["split"] = register(
                admin,
                MetricSpec.boolean(
                    unique_name("split"),
                    epsilon=1.0,
                    dimensions={"platform": ["ios", "android", "web"], "tier": ["paid"]},
                ),
            )
        for role, good, bad in (("kept", 7, 5), ("small", 2, 2)):
            spec = specs[role]
            _, envelopes = sealed_reports(server, spec, good)
            body = part(spec, envelopes + invalid_envelopes(server, spec, bad))
            answer = forward(server, body)
            assert answer.status_code == 202 and answer.json()["refused"] == bad, answer.text
        yield server, specs
    finally:
        server.stop()


def _rows(driver: WebDriver) -> dict[str, list[str]]:
    """``table#shuffled``'s rows by metric: their cells' text."""
    return {
        row.get_attribute("data-metric"): [
            cell.text for cell in row.find_elements(By.CSS_SELECTOR, "td")
        ]
        for row in driver.find_elements(By.CSS_SELECTOR, "table#shuffled tbody tr")
    }


def test_the_privacy_page_states_refused_and_below_minimum_batches(
    driver: WebDriver, shuffled: tuple[RunningCollector, dict[str, MetricSpec]]
) -> None:
    server, specs = shuffled
    try:
        for width, height in (WIDE, NARROW):
            set_viewport(driver, width, height)
            viewer_session(driver, server.url)
            open_page(driver, server.url + "/dashboard/privacy")
            full_page_screenshot(driver, SCREENSHOTS / f"privacy-shuffled-{width}.png", width)
            rows = _rows(driver)
            assert rows[specs["kept"].name][1] == "7 (5 refused)", rows
            assert rows[specs["small"].name][1] == "2 (2 refused, below minimum)", rows
            weakest = driver.find_element(By.CSS_SELECTOR, "#shuffled-weakest").text
            assert f"{specs['kept'].name}: central ε ≤" in weakest, weakest
            assert "(1 batch of 7 devices)" in weakest, weakest
            assert "(1 batch of 2 devices, 1 below the minimum)" in weakest, weakest
            clear = driver.find_element(
                By.CSS_SELECTOR, f'table#in-the-clear tr[data-metric="{specs["split"].name}"]'
            )
            assert [c.text for c in clear.find_elements(By.CSS_SELECTOR, "td")] == [
                "platform (4), tier (2)",
                "8",
            ]
            assert page_faults(driver, server.url) == {}, width
    finally:
        set_viewport(driver, *WIDE)
