"""A breakdown in headless Chromium: real SDK devices with a public context (their platform)
report to a real ``deniable serve``; the metric page's selector leads to the breakdown page,
which draws one small chart per slice with its interval bars, and a slice under the minimum
(web, 40 devices) shows "suppressed, fewer than 100 reports" and no number: not on the page,
not in the API's answer, the CLI's table or CSV, or the page's CSV download.

Each page is checked at 1280 and 375 px like every dashboard page (no console error, nothing
from another origin, no sideways scroll, chart text at least 10 px and inside its chart) and
screenshotted to ``test-artifacts/screenshots/``. The truth check is deterministic (fixed
seeds): the intervals hold at once at 95%, so a seed misses a truth with probability at most 5%.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin

import httpx
import numpy as np
import pytest

from deniable.client import Client, MetricSpec, SeededRandomness
from testkit import ADMIN_TOKEN, INGEST_KEY, CollectorProcess, authorized_client, collector_settings
from testkit.browser import (
    NARROW,
    VIEWER_TOKEN,
    WIDE,
    browser_problem,
    full_page_screenshot,
    require_browser,
    set_viewport,
    submit_form,
    viewer_session,
)
from testkit.cli import run_cli
from testkit.documents import numbers_in

require_browser(browser_problem())  # before Selenium is imported: skip, or fail in CI

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402

from .conftest import SCREENSHOTS, register  # noqa: E402
from .test_dashboard import open_page, page_faults  # noqa: E402

pytestmark = pytest.mark.browser

DIMENSIONS = {"platform": ["ios", "android", "web"], "channel": ["beta", "stable"]}
DARK = {"ios": (600, 0.25), "android": (400, 0.7), "web": (40, 0.5)}
"""platform: (devices, true share of dark mode); web is under the minimum of 100."""
EARLIER = {"ios": (300, 0.3), "android": (150, 0.6), "web": (20, 0.5)}
"""The boolean's devices two days ago (web again under the minimum)."""
THEMES = ("light", "dark", "high contrast", "system default (follows the OS)")
THEME_SHARES = {"ios": (0.2, 0.3, 0.1, 0.4), "android": (0.5, 0.2, 0.05, 0.25), "web": (0.25,) * 4}
SUPPRESSED = "suppressed, fewer than 100 reports"
SEARCHES = {"ios": ("cat", 600), "android": ("dog", 400), "web": ("cat", 40)}
"""platform: (the string half its devices search for, devices); the rest search unique ones."""
PER_CLIENT = 40
"""Devices one SDK client stands for in the text metric (each client pins one prefix level)."""


@dataclass(frozen=True)
class Fleet:
    """The collector, the two metrics and each platform's true share of dark mode over the
    week (every report of it, today's and two days ago's)."""

    url: str
    dark: MetricSpec
    theme: MetricSpec
    truth: dict[str, float]


def report_from_devices(
    url: str,
    spec: MetricSpec,
    platform: str,
    values: list[Any],
    state: Path,
    seed: int,
    days_ago: int = 0,
) -> None:
    """``values`` recorded by an SDK client whose context is ``platform`` (stable channel)
    ``days_ago`` days before now, then delivered."""
    moment = dt.datetime.now(dt.UTC) - dt.timedelta(days=days_ago)
    with Client(
        url,
        state_dir=state,
        metrics=[spec],
        context={"platform": platform, "channel": "stable"},
        ingest_key=INGEST_KEY,
        max_reports_per_period=len(values),
        lifetime_epsilon=None,
        randomness=SeededRandomness(seed),
        batch_size=500,
        clock=lambda: moment,
    ) as device:
        for value in values:
            assert device.record(spec.name, value)
        assert device.flush(timeout=60)


@pytest.fixture(scope="module")
def fleet(browser_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """``deniable serve`` with the viewer token, and SDK devices on three platforms."""
    directory = tmp_path_factory.mktemp("breakdown")
    settings = collector_settings(f"sqlite:///{directory}/collector.db")
    with CollectorProcess(
        settings, directory, env={"DENIABLE_VIEWER_TOKEN": VIEWER_TOKEN}
    ) as server:
        with authorized_client(server.url, ADMIN_TOKEN) as admin:
            dark = register(
                admin, MetricSpec.boolean("dark_by_platform", epsilon=2.0, dimensions=DIMENSIONS)
            )
            theme = register(
                admin,
                MetricSpec.categorical(
                    "theme_by_platform", THEMES, epsilon=2.0, dimensions=DIMENSIONS
                ),
            )
        rng = np.random.default_rng(27)
        truth = {}
        for seed, (platform, (n, share)) in enumerate(DARK.items()):
            values = (rng.random(n) < share).tolist()
            truth[platform] = sum(values) / n
            report_from_devices(server.url, dark, platform, values, directory / f"d{seed}", seed)
            picks = rng.choice(len(THEMES), size=n, p=THEME_SHARES[platform]).tolist()
            themes = [THEMES[i] for i in picks]
            report_from_devices(
                server.url, theme, platform, themes, directory / f"t{seed}", 10 + seed
            )
        with authorized_client(server.url, ADMIN_TOKEN) as admin:
            load = register(
                admin,
                MetricSpec.numeric(
                    "load_by_platform", lower=0, upper=1000, epsilon=2.0, dimensions=DIMENSIONS
                ),
                unit="ms",
            )
        for seed, (platform, middle) in enumerate((("ios", 200.0), ("android", 600.0))):
            times = np.clip(rng.normal(middle, 80, 300), 0, 1000).tolist()
            state = directory / f"n{seed}"
            report_from_devices(server.url, load, platform, times, state, 30 + seed)
        search = register_text(server.url)
        for seed, (platform, (common, n)) in enumerate(SEARCHES.items()):
            values = [common if i % 2 else f"{platform[0]}{i:02x}"[:3] for i in range(n)]
            for start in range(0, n, PER_CLIENT):
                state = directory / f"s{seed}-{start}"
                chunk = values[start : start + PER_CLIENT]
                report_from_devices(server.url, search, platform, chunk, state, 100 * seed + start)
        for seed, (platform, (n, share)) in enumerate(EARLIER.items()):
            values = (rng.random(n) < share).tolist()
            state = directory / f"e{seed}"
            report_from_devices(server.url, dark, platform, values, state, 20 + seed, 2)
            total = DARK[platform][0] * truth[platform] + sum(values)
            truth[platform] = total / (DARK[platform][0] + n)
        yield Fleet(server.url, dark, theme, truth)


def register_text(url: str) -> MetricSpec:
    """The text metric with the two dimensions (12 cells of 4-byte strings' sketches)."""
    with authorized_client(url, ADMIN_TOKEN) as admin:
        spec = MetricSpec.text("search_by_platform", max_length=4, epsilon=4, dimensions=DIMENSIONS)
        return register(admin, spec)


def open_signed_in(driver: WebDriver, fleet: Fleet, url: str) -> None:
    """Open ``url`` with a viewer session (signing in first if needed), logs drained."""
    viewer_session(driver, fleet.url)
    open_page(driver, url)


def digits_besides_the_minimum(text: str) -> list[str]:
    """Every number in ``text`` except the minimum the suppression note names."""
    return [n for n in re.findall(r"\d+(?:[.,]\d+)*", text) if n != "100"]


def test_the_breakdown_page_draws_bars_per_slice_and_no_number_for_a_suppressed_one(
    driver: WebDriver, fleet: Fleet
) -> None:
    name = fleet.dark.name
    open_signed_in(driver, fleet, f"{fleet.url}/dashboard/metrics/{name}")
    picker = driver.find_element(By.CSS_SELECTOR, "form#breakdown-picker")
    Select(picker.find_element(By.CSS_SELECTOR, 'select[name="by"]')).select_by_value("platform")
    submit_form(driver, picker)
    assert "/breakdown" in driver.current_url
    figures = driver.find_elements(By.CSS_SELECTOR, "#breakdown-multiples svg#slices-chart g.slice")
    assert [f.get_attribute("data-slice") for f in figures] == ["ios", "android"]
    for figure in figures:
        platform = figure.get_attribute("data-slice")
        (bar,) = figure.find_elements(By.CSS_SELECTOR, "rect.bar")
        (whisker,) = figure.find_elements(By.CSS_SELECTOR, "line.whisker")
        assert bar.get_attribute("data-category") == "true"
        low, high = (float(whisker.get_attribute(f"data-{end}")) for end in ("low", "high"))
        assert low <= fleet.truth[platform] <= high, (platform, low, high)
        reports = DARK[platform][0] + EARLIER[platform][0]
        assert f"n = {reports:,} reports" in figure.get_attribute("textContent")
    note = driver.find_element(By.CSS_SELECTOR, "#suppressed-slices")
    assert note.text == "Suppressed, fewer than 100 reports: web, other."
    assert digits_besides_the_minimum(note.text) == []
    rows = driver.find_elements(By.CSS_SELECTOR, "table#breakdown-table tr.suppressed")
    assert [row.get_attribute("data-slice") for row in rows] == ["web", "other"]
    for row in rows:
        assert digits_besides_the_minimum(row.text) == [], row.text
    body = driver.find_element(By.TAG_NAME, "body").text
    assert "simultaneous 95% intervals" in body
    href = driver.find_element(By.CSS_SELECTOR, "a#breakdown-csv").get_attribute("href")
    with httpx.Client(cookies=browser_cookies(driver), trust_env=False) as client:
        download = client.get(urljoin(fleet.url + "/", href))
    assert download.status_code == 200
    check_csv(download.text)


def check_csv(text: str) -> None:
    """Shown slices have numbers; suppressed rows have none but the note's minimum."""
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {row["by.platform"] for row in rows if row["suppressed"] == "false"} == {
        "ios",
        "android",
    }
    for row in rows:
        if row["suppressed"] == "true":
            assert row["note"] == SUPPRESSED
            data = [
                v
                for k, v in row.items()
                if k not in ("metric", "start", "end", "confidence", "note")
            ]
            assert digits_besides_the_minimum(" ".join(data)) == [], row


def browser_cookies(driver: WebDriver) -> dict[str, str]:
    """Every cookie the browser holds (name: value)."""
    cookies = driver.execute_cdp_cmd("Network.getAllCookies", {})["cookies"]
    return {cookie["name"]: cookie["value"] for cookie in cookies}


def test_a_text_metric_breaks_down_into_each_slice_strings_and_no_number_for_a_small_one(
    driver: WebDriver, fleet: Fleet
) -> None:
    open_signed_in(driver, fleet, f"{fleet.url}/dashboard/metrics/search_by_platform")
    picker = driver.find_element(By.CSS_SELECTOR, "section#breakdown-entry form#breakdown-picker")
    Select(picker.find_element(By.CSS_SELECTOR, 'select[name="by"]')).select_by_value("platform")
    submit_form(driver, picker)
    assert "/breakdown" in driver.current_url
    figures = driver.find_elements(By.CSS_SELECTOR, "#breakdown-multiples figure.slice")
    assert [f.get_attribute("data-slice") for f in figures] == ["ios", "android"]
    for figure in figures:
        platform = figure.get_attribute("data-slice")
        common, devices = SEARCHES[platform]
        labels = [
            bar.get_attribute("data-category")
            for bar in figure.find_elements(By.CSS_SELECTOR, "rect.bar")
        ]
        assert common in labels, (platform, labels)
        assert f"n = {devices:,} reports" in figure.text
    note = driver.find_element(By.CSS_SELECTOR, "#suppressed-slices")
    assert note.text == "Suppressed, fewer than 100 reports: web, other."
    rows = driver.find_elements(By.CSS_SELECTOR, "table#breakdown-table tr.suppressed")
    assert [row.get_attribute("data-slice") for row in rows] == ["web", "other"]
    for row in rows:
        assert digits_besides_the_minimum(row.text) == [], row.text
    href = driver.find_element(By.CSS_SELECTOR, "a#breakdown-csv").get_attribute("href")
    with httpx.Client(cookies=browser_cookies(driver), trust_env=False) as client:
        download = client.get(urljoin(fleet.url + "/", href))
    assert download.status_code == 200
    check_csv(download.text)


def test_a_suppressed_slice_shows_no_number_in_the_api_or_the_cli(fleet: Fleet) -> None:
    name = fleet.dark.name
    with authorized_client(fleet.url, VIEWER_TOKEN) as viewer:
        document = viewer.get(f"/v1/metrics/{name}/estimate", params={"by": "platform"}).json()
        series = viewer.get(f"/v1/metrics/{name}/series", params={"where": "platform:web"}).json()
    for row in document["slices"]:
        if row["values"]["platform"] in ("web", "other"):
            assert row["suppressed"] and numbers_in(row) == []
    for point in series["series"]:
        (web,) = point["slices"]
        assert web["suppressed"] and numbers_in(web) == []
    cli = ("--collector", fleet.url, "--token", ADMIN_TOKEN, "estimate", name, "--by", "platform")
    table = run_cli(*cli)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    for platform in ("web", "other"):
        (line,) = [line for line in lines if line.startswith(f"platform={platform}")]
        assert digits_besides_the_minimum(line) == [], line
    printed = run_cli(*cli, "--format", "csv")
    assert printed.exit_code == 0, printed.output
    check_csv(printed.stdout)


BREAKDOWN_PAGES = {
    "metric-with-dimensions": ("theme_by_platform", {}),
    "breakdown-boolean": ("dark_by_platform/breakdown", {"by": "platform"}),
    "breakdown-categorical": ("theme_by_platform/breakdown", {"by": "platform"}),
    "breakdown-two-dimensions": ("theme_by_platform/breakdown", {"by": ["platform", "channel"]}),
    "breakdown-numeric": ("load_by_platform/breakdown", {"by": "platform"}),
    "breakdown-numeric-compared": (
        "load_by_platform/breakdown",
        {"by": "platform", "first": "ios", "second": "android"},
    ),
    "breakdown-filtered": ("theme_by_platform/breakdown", {"where": "platform:ios"}),
    "text-with-dimensions": ("search_by_platform", {}),
    "breakdown-text": ("search_by_platform/breakdown", {"by": "platform"}),
    "breakdown-text-two-dimensions": (
        "search_by_platform/breakdown",
        {"by": ["platform", "channel"]},
    ),
    "breakdown-compared": (
        "dark_by_platform/breakdown",
        {"by": "platform", "first": "ios", "second": "android"},
    ),
    "breakdown-categorical-compared": (
        "theme_by_platform/breakdown",
        {"by": "platform", "first": "android", "second": "ios"},
    ),
}
"""Each page checked (the screenshot's name: the path under /dashboard/metrics/, the query)."""


@pytest.mark.parametrize("page", list(BREAKDOWN_PAGES))
def test_breakdown_pages_render_cleanly_at_375_and_1280_px(
    driver: WebDriver, fleet: Fleet, page: str
) -> None:
    name, params = BREAKDOWN_PAGES[page]
    url = f"{fleet.url}/dashboard/metrics/{name}?{urlencode(params, doseq=True)}"
    try:
        for width, height in (WIDE, NARROW):
            set_viewport(driver, width, height)
            open_signed_in(driver, fleet, url)
            full_page_screenshot(driver, SCREENSHOTS / f"{page}-{width}.png", width)
            assert page_faults(driver, fleet.url) == {}, (page, width)
            notes = driver.execute_script(SUPPRESSED_NOTES)
            assert [note for note in notes if note["right"] > note["view"]] == [], (page, width)
            if page in SUPPRESSED_IN_TABLE:
                assert notes and all(note["shown"] for note in notes), (page, width, notes)
    finally:
        set_viewport(driver, *WIDE)


SUPPRESSED_NOTES = """
return [...document.querySelectorAll('tr.suppressed .sub')].map(note => {
  const box = note.getBoundingClientRect();
  return {text: note.textContent, right: box.right, shown: box.width > 0,
          view: document.documentElement.clientWidth};
});
"""
"""Each suppressed row's note in a breakdown table: where its right edge is, and the view's."""

SUPPRESSED_IN_TABLE = {"breakdown-text", "breakdown-categorical", "breakdown-boolean"}
"""Pages whose table holds suppressed rows (web and other): their notes must be drawn, and at
375 px inside the view, not past the edge where the table scrolls."""
