"""``/docs`` in headless Chromium (issue 25): Swagger UI shows the Authorize button with the
collector's three tokens, and the operations under their tags, none under "default"."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit import DatabaseFactory, RunningCollector, viewer_collector
from testkit.browser import browser_problem, chromium, require_browser

require_browser(browser_problem())  # before Selenium is imported: skip, or fail in CI

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

DRAW_WAIT = 20.0
"""Seconds Swagger UI gets to draw (a hang bound, not a measurement)."""


@pytest.fixture(scope="module")
def server(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    with viewer_collector(databases.new("sqlite")) as running:
        yield running


def test_docs_has_an_authorize_button_for_each_token_and_tagged_operations(
    server: RunningCollector,
) -> None:
    with chromium() as driver:
        driver.get(server.url + "/docs")
        wait = WebDriverWait(driver, DRAW_WAIT)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock"))
        tags = {
            element.get_attribute("data-tag")
            for element in driver.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock-tag")
        }
        assert "default" not in tags
        assert {"reports", "metrics", "estimates", "privacy", "admin", "operations"} <= tags
        ids = driver.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock-summary-operation-id")
        assert "getEstimate" in {element.text for element in ids}
        buttons = driver.find_elements(By.CSS_SELECTOR, ".swagger-ui .auth-wrapper .authorize")
        assert buttons, "/docs has no Authorize button: the document declares no security"
        buttons[0].click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .auth-container"))
        dialog = driver.find_element(By.CSS_SELECTOR, ".swagger-ui .modal-ux").text
        for scheme in ("viewerToken", "adminToken", "ingestKey"):
            assert scheme in dialog, dialog
