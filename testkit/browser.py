"""Headless Chromium driven by Selenium, for the dashboard's browser tests and bench.

The browser is Debian's ``chromium`` with ``chromium-driver`` (``/usr/bin/chromium``,
``/usr/bin/chromedriver``). Tests that need it are skipped with the reason when either is
missing (or Selenium is not installed), unless ``DENIABLE_REQUIRE_BROWSER`` is set (CI sets
it): then they fail instead, as PostgreSQL's do with ``DENIABLE_REQUIRE_POSTGRES``.

The driver keeps the browser's console log and its network (performance) log, so a test can
check that a page logged no error and requested nothing outside the collector's origin.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from .configuration import VIEWER_TOKEN as VIEWER_TOKEN  # the browser tests' collector's

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement


CHROMIUM = os.environ.get("DENIABLE_CHROMIUM", "/usr/bin/chromium")
"""Debian's chromium (package ``chromium``)."""
CHROMEDRIVER = os.environ.get("DENIABLE_CHROMEDRIVER", "/usr/bin/chromedriver")
"""Debian's chromedriver (package ``chromium-driver``)."""

REQUIRE_VARIABLE = "DENIABLE_REQUIRE_BROWSER"
"""When set, a missing browser fails the browser tests instead of skipping them (CI)."""

WIDE = (1280, 900)
NARROW = (375, 812)
"""The viewport sizes pages must render at: a laptop and a phone."""

PAGE_LOAD_TIMEOUT = 30.0
"""Seconds a page gets to load."""


def browser_problem() -> str | None:
    """None if headless Chromium can be driven here, else why not (one line)."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        return f"{' and '.join(missing)} missing (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def require_browser(problem: str | None) -> None:
    """Skip (or, when ``DENIABLE_REQUIRE_BROWSER`` is set, fail) if ``problem`` says why the
    browser is unavailable; do nothing when it is None."""
    if problem is None:
        return
    message = f"headless Chromium unavailable: {problem}"
    if os.environ.get(REQUIRE_VARIABLE):
        pytest.fail(message + f" and {REQUIRE_VARIABLE} is set")
    pytest.skip(message, allow_module_level=True)


def start_chromium(width: int = WIDE[0], height: int = WIDE[1]) -> WebDriver:
    """A headless Chromium (no sandbox: tests may run as root) keeping console and network logs."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--metrics-recording-only",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
    driver.execute_cdp_cmd("Network.enable", {})
    set_viewport(driver, width, height)
    return driver


@contextlib.contextmanager
def chromium(width: int = WIDE[0], height: int = WIDE[1]) -> Iterator[WebDriver]:
    """Headless Chromium for the ``with`` block, quit after."""
    driver = start_chromium(width, height)
    try:
        yield driver
    finally:
        driver.quit()


def set_viewport(driver: WebDriver, width: int, height: int) -> None:
    """Make the page's viewport ``width`` x ``height`` CSS pixels (a desktop window, scale 1)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def sign_in(driver: WebDriver, base_url: str, token: str) -> None:
    """Fill the sign-in form with ``token`` and submit it; return once the next page loaded."""
    from selenium.webdriver.common.by import By

    driver.get(base_url + "/dashboard/sign-in")
    form = driver.find_element(By.CSS_SELECTOR, "form#sign-in")
    field = form.find_element(By.CSS_SELECTOR, "input[name=token]")
    field.send_keys(token)
    button = form.find_element(By.CSS_SELECTOR, "button[type=submit], input[type=submit], button")
    _until_the_next_document(driver, button.click)


def viewer_session(driver: WebDriver, base_url: str) -> None:
    """Give ``driver`` a viewer session on the collector at ``base_url``: sign in unless the
    overview already shows one."""
    from selenium.webdriver.common.by import By

    driver.get(base_url + "/dashboard/")
    if not driver.find_elements(By.CSS_SELECTOR, "table#metrics"):
        sign_in(driver, base_url, VIEWER_TOKEN)


def submit_form(driver: WebDriver, form: WebElement) -> None:
    """Submit ``form`` and return once the page it leads to has fully loaded, so nothing read
    afterwards is an element of the page being replaced."""
    _until_the_next_document(driver, form.submit)


def _until_the_next_document(driver: WebDriver, act: Callable[[], None]) -> None:
    """Mark the current document, ``act``, and wait until a document without the mark has
    fully loaded. Asking the page itself, never an element of the old one, is what survives a
    re-draw: chromedriver reports an element of a replaced document in more ways than as stale.
    """
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.wait import WebDriverWait

    driver.execute_script("window.deniableOldDocument = true")
    act()

    def loaded(d: WebDriver) -> bool:
        try:
            return bool(
                d.execute_script(
                    "return window.deniableOldDocument === undefined"
                    " && document.readyState === 'complete'"
                )
            )
        except WebDriverException:
            return False

    WebDriverWait(driver, PAGE_LOAD_TIMEOUT).until(loaded)


def console_errors(driver: WebDriver) -> list[str]:
    """The console messages of level SEVERE logged since the last call (the log is drained)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def requested_urls(driver: WebDriver) -> list[str]:
    """Every URL the browser requested since the last call, from its network log (drained)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def foreign_urls(urls: list[str], origin: str) -> list[str]:
    """The ``urls`` outside ``origin`` (``scheme://host:port``); inline ``data:``/``blob:``
    URLs and ``about:blank`` load nothing from the network and do not count."""
    inline = ("data:", "blob:", "about:")
    return [
        url for url in urls if not url.startswith(inline) and origin_of(url) != origin.rstrip("/")
    ]


def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url``."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def overflow(driver: WebDriver) -> dict[str, Any] | None:
    """None if the page does not scroll sideways, else its scroll width and viewport width."""
    widths = driver.execute_script(
        "return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth};"
    )
    return None if widths["scroll"] <= widths["inner"] + 1 else widths


def full_page_screenshot(driver: WebDriver, path: Path, width: int) -> None:
    """Save the whole page (not only the viewport) at ``width`` CSS pixels as PNG ``path``."""
    height = driver.execute_script(
        "return Math.max(document.documentElement.scrollHeight, document.body.scrollHeight);"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    set_viewport(driver, width, min(max(int(height), 600), 8000))
    try:
        driver.save_screenshot(str(path))
    finally:
        set_viewport(driver, width, NARROW[1] if width == NARROW[0] else WIDE[1])


def dom_content_loaded_ms(driver: WebDriver) -> float:
    """The current page's DOMContentLoaded time in ms from navigation start (Navigation Timing)."""
    return float(
        driver.execute_script(
            "const [n] = performance.getEntriesByType('navigation');"
            " return n.domContentLoadedEventEnd - n.startTime;"
        )
    )
