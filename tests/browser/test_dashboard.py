"""The dashboard in headless Chromium against a real collector seeded with a known population.

Every page is opened at 1280 px and at 375 px: it must log no console error, request nothing
outside the collector's origin, and not scroll sideways; no chart text may render smaller than
10 CSS px or run outside its chart, a table wider than its wrapper must scroll inside it with a
visible cue, and a metric name may wrap only between its words. A full-page screenshot of each
(and of ``/docs``) goes to ``test-artifacts/screenshots/``. The categorical metric page must draw
one bar and one whisker per category with the seeded truth inside each simultaneous 95%
whisker, and one series point per day per category shown.

The truth check is deterministic (fixed seeds). For a random seed, the simultaneous 95%
intervals miss at least one of the 5 true shares with probability at most 5%; the seeded
truth is the population's own share (the same every day), which the super-population
intervals cover conservatively, so the real miss rate is lower still.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections import Counter
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx
import pytest

from deniable.client import MetricSpec
from testkit import ADMIN_TOKEN, INGEST_KEY, authorized_client
from testkit.browser import (
    NARROW,
    VIEWER_TOKEN,
    WIDE,
    browser_problem,
    console_errors,
    foreign_urls,
    full_page_screenshot,
    overflow,
    requested_urls,
    require_browser,
    set_viewport,
    sign_in,
    submit_form,
    viewer_session,
)

require_browser(browser_problem())  # before Selenium is imported: skip, or fail in CI

from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

from .conftest import CATEGORIES, SCREENSHOTS, Seeded  # noqa: E402

pytestmark = pytest.mark.browser

PLAN = {"k": 12, "epsilon": 1.0, "margin": 0.03}
"""The plan page's inputs (oue is the fewest reports here, not krr)."""


def floats(element: Any, *names: str) -> tuple[float, ...]:
    """The ``data-*`` attributes ``names`` of ``element`` as floats."""
    return tuple(float(element.get_attribute(f"data-{name}")) for name in names)


def signed_in(driver: WebDriver, seeded: Seeded) -> WebDriver:
    """``driver`` with a viewer session on the collector (signing in if it has none)."""
    viewer_session(driver, seeded.url)
    return driver


def sign_out(driver: WebDriver) -> None:
    """Drop every cookie of the browser (whatever its path)."""
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})


def open_page(driver: WebDriver, url: str) -> None:
    """Load ``url`` with the console and network logs drained first."""
    console_errors(driver)
    requested_urls(driver)
    driver.get(url)


def metric_url(seeded: Seeded, name: str, **params: Any) -> str:
    """The metric page of ``name`` over the 7 seeded days."""
    query = {"start": seeded.days[0], "end": seeded.days[-1], **params}
    return f"{seeded.url}/dashboard/metrics/{name}?{urlencode(query)}"


def pages(seeded: Seeded) -> dict[str, str]:
    """Every dashboard page (name for the screenshot file: URL)."""
    return {
        "overview": seeded.url + "/dashboard/",
        "metric-categorical": f"{seeded.url}/dashboard/metrics/{seeded.categorical.name}",
        "metric-numeric": f"{seeded.url}/dashboard/metrics/{seeded.numeric.name}",
        "metric-histogram": f"{seeded.url}/dashboard/metrics/{seeded.histogram.name}",
        "metric-boolean": f"{seeded.url}/dashboard/metrics/{seeded.boolean.name}",
        "metric-long-labels": f"{seeded.url}/dashboard/metrics/{seeded.agents.name}",
        "metric-text": f"{seeded.url}/dashboard/metrics/{seeded.text.name}",
        "plan": f"{seeded.url}/dashboard/plan?{urlencode(PLAN)}",
        "plan-numeric": f"{seeded.url}/dashboard/plan?kind=numeric",
        "privacy": f"{seeded.url}/dashboard/privacy",
        "docs": seeded.url + "/docs",
    }


def swagger_rendered(driver: WebDriver, timeout: float = 10.0) -> bool:
    """Whether the Swagger UI of ``/docs`` draws its operations within ``timeout`` seconds."""
    try:
        WebDriverWait(driver, timeout).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock")
        )
    except TimeoutException:
        return False
    return True


def browser_cookies(driver: WebDriver) -> dict[str, str]:
    """Every cookie the browser holds, whatever its path (name: value)."""
    cookies = driver.execute_cdp_cmd("Network.getAllCookies", {})["cookies"]
    return {cookie["name"]: cookie["value"] for cookie in cookies}


def fetch_text(driver: WebDriver, seeded: Seeded, href: str) -> tuple[int, str]:
    """GET ``href`` with the browser's session cookies (outside the page, so its CSP does not
    apply); (status, body)."""
    with httpx.Client(
        base_url=seeded.url, cookies=browser_cookies(driver), trust_env=False
    ) as client:
        response = client.get(urljoin(seeded.url + "/", href))
    return response.status_code, response.text


@pytest.mark.parametrize("token", ["not-the-viewer-token-123456", ADMIN_TOKEN])
def test_a_wrong_token_or_the_admin_token_does_not_sign_in(
    driver: WebDriver, seeded: Seeded, token: str
) -> None:
    """Only the viewer token signs in: the admin token is refused as its substitute, so it is
    never kept in a browser."""
    sign_out(driver)
    sign_in(driver, seeded.url, token)
    assert urlsplit(driver.current_url).path == "/dashboard/sign-in"
    assert driver.find_elements(By.CSS_SELECTOR, "form#sign-in")
    assert driver.get_cookies() == []
    driver.get(seeded.url + "/dashboard/")
    assert not driver.find_elements(By.CSS_SELECTOR, "table#metrics")


def test_the_viewer_token_signs_in_with_an_httponly_strict_cookie(
    driver: WebDriver, seeded: Seeded
) -> None:
    sign_out(driver)
    requested_urls(driver)
    sign_in(driver, seeded.url, VIEWER_TOKEN)
    assert driver.current_url == seeded.url + "/dashboard/"
    cookies = driver.get_cookies()
    session = [c for c in cookies if c["httpOnly"] and c.get("sameSite") == "Strict"]
    assert session, f"no HttpOnly SameSite=Strict cookie among {cookies}"
    assert not [url for url in requested_urls(driver) if VIEWER_TOKEN in url]
    assert VIEWER_TOKEN not in driver.execute_script("return document.cookie;")
    driver.get(seeded.url + "/")
    assert driver.current_url == seeded.url + "/dashboard/"


def test_the_sign_out_button_ends_the_session_on_the_server(
    driver: WebDriver, seeded: Seeded
) -> None:
    """Chromium's own sign-out post passes the origin check (it says same-origin), and the
    cookie it held no longer signs in anywhere once replayed."""
    sign_out(driver)
    sign_in(driver, seeded.url, VIEWER_TOKEN)
    cookie = next(c["value"] for c in driver.get_cookies() if c["httpOnly"])
    form = driver.find_element(By.CSS_SELECTOR, "form.sign-out")
    form.find_element(By.CSS_SELECTOR, "button").click()
    WebDriverWait(driver, 30).until(lambda d: urlsplit(d.current_url).path == "/dashboard/sign-in")
    with httpx.Client(base_url=seeded.url, trust_env=False) as thief:
        thief.cookies.set("deniable_session", cookie, path="/dashboard")
        assert thief.get("/dashboard/").status_code == 303


def test_the_api_keeps_viewers_out_of_admin_routes(driver: WebDriver, seeded: Seeded) -> None:
    name = seeded.categorical.name
    new_metric = MetricSpec.boolean("browser_viewer_attempt", epsilon=1.0).fingerprint_fields()
    with authorized_client(seeded.url, VIEWER_TOKEN) as viewer:
        assert viewer.get(f"/v1/metrics/{name}/estimate").status_code == 200
        assert viewer.post("/v1/metrics", json=new_metric).status_code == 403
        assert viewer.get(f"/v1/admin/metrics/{name}/reports").status_code == 403
    with authorized_client(seeded.url, ADMIN_TOKEN) as admin:
        assert admin.get(f"/v1/admin/metrics/{name}/reports").status_code == 200
        again = seeded.categorical.fingerprint_fields()  # registering again is idempotent
        assert admin.post("/v1/metrics", json=again).status_code in (200, 201)
    with authorized_client(seeded.url, INGEST_KEY) as device:
        assert device.get(f"/v1/metrics/{name}/estimate").status_code in (401, 403)
    with authorized_client(seeded.url) as anonymous:
        assert anonymous.get(f"/v1/metrics/{name}/estimate").status_code == 401
    # The dashboard's session cookie is a viewer's: it opens no admin route either.
    signed_in(driver, seeded)
    status, _ = fetch_text(driver, seeded, f"/v1/admin/metrics/{name}/reports")
    assert status in (401, 403)


SMALL_CHART_TEXT = """
const small = [];
for (const svg of document.querySelectorAll('svg.chart')) {
  const box = svg.getBoundingClientRect();
  if (!box.width) continue;  // the other chart of a wide/narrow pair, not displayed
  const scale = box.width / svg.viewBox.baseVal.width;
  for (const text of svg.querySelectorAll('text')) {
    const size = parseFloat(getComputedStyle(text).fontSize) * scale;
    if (size < arguments[0]) small.push([svg.id, text.textContent, size]);
  }
}
return small;
"""
"""Each displayed chart text whose rendered size (its font size in SVG units times the SVG's
scale on screen) is below ``arguments[0]`` CSS px: [chart id, text, size]."""

TEXT_OUTSIDE_CHARTS = """
const outside = [];
for (const svg of document.querySelectorAll('svg.chart')) {
  const box = svg.getBoundingClientRect();
  if (!box.width) continue;
  for (const text of svg.querySelectorAll('text')) {
    const r = text.getBoundingClientRect();
    if (r.left < box.left - 1 || r.right > box.right + 1) outside.push([svg.id, text.textContent]);
  }
}
return outside;
"""
"""Each displayed chart text that runs past its chart's left or right edge (clipped there)."""

TABLES_WITHOUT_CUE = """
const bad = [];
for (const wrapper of document.querySelectorAll('.scroll')) {
  if (wrapper.scrollWidth <= wrapper.clientWidth + 1) continue;
  const style = getComputedStyle(wrapper);
  const scrolls = ['auto', 'scroll'].includes(style.overflowX);
  if (!scrolls || !style.backgroundImage.includes('gradient')) {
    bad.push([wrapper.querySelector('table').id, style.overflowX, style.backgroundImage]);
  }
}
return bad;
"""
"""Each table wider than its wrapper whose wrapper does not scroll or shows no edge shadow."""

NAMES_BROKEN_MID_WORD = r"""
const broken = [];
for (const cell of document.querySelectorAll('#metrics tbody th a, #account tbody th')) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  let top = null, before = '';
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect) continue;
      if (top !== null && rect.top > top + 2 && !/[_.\-\s]/.test(before)) {
        broken.push(cell.textContent);
      }
      top = rect.top;
      before = node.data[i];
    }
  }
}
return broken;
"""
"""Each metric name in the overview's or the privacy page's table that wraps onto a new line
anywhere but after a ``_``, ``.``, ``-`` or a space."""


def layout_problems(driver: WebDriver) -> dict[str, list[Any]]:
    """What is wrong with the current page's layout, by kind (empty lists when nothing)."""
    return {
        "chart text under 10 px": driver.execute_script(SMALL_CHART_TEXT, 10.0),
        "chart text outside its chart": driver.execute_script(TEXT_OUTSIDE_CHARTS),
        "tables cut without a scroll cue": driver.execute_script(TABLES_WITHOUT_CUE),
        "metric names broken mid-word": driver.execute_script(NAMES_BROKEN_MID_WORD),
    }


def page_faults(driver: WebDriver, origin: str, *, layout: bool = True) -> dict[str, Any]:
    """What is wrong with the page just opened (with :func:`open_page`), by kind, only the
    kinds found: console errors, requests outside ``origin``, a sideways scroll and, if
    ``layout``, :func:`layout_problems`."""
    found: dict[str, Any] = {
        "console errors": console_errors(driver),
        "requests outside the origin": foreign_urls(requested_urls(driver), origin),
        "sideways scroll": overflow(driver),
    }
    if layout:
        found.update(layout_problems(driver))
    return {kind: what for kind, what in found.items() if what}


@pytest.mark.parametrize(
    "page",
    [
        "overview",
        "metric-categorical",
        "metric-numeric",
        "metric-histogram",
        "metric-boolean",
        "metric-long-labels",
        "metric-text",
        "plan",
        "plan-numeric",
        "privacy",
        "docs",
    ],
)
def test_every_page_renders_cleanly_at_375_and_1280_px(
    driver: WebDriver, seeded: Seeded, page: str
) -> None:
    url = pages(seeded)[page]
    if page != "docs":
        signed_in(driver, seeded)
    origin = seeded.url
    try:
        for width, height in (WIDE, NARROW):
            set_viewport(driver, width, height)
            open_page(driver, url)
            rendered = page != "docs" or swagger_rendered(driver)
            full_page_screenshot(driver, SCREENSHOTS / f"{page}-{width}.png", width)
            assert rendered, "/docs drew no operation (its Swagger UI assets did not load)"
            if page != "docs":
                assert urlsplit(driver.current_url).path == urlsplit(url).path
            assert page_faults(driver, origin, layout=page != "docs") == {}, (page, width)
    finally:
        set_viewport(driver, *WIDE)


def test_the_overview_lists_every_metric_with_a_link_and_a_sparkline(
    driver: WebDriver, seeded: Seeded
) -> None:
    open_page(signed_in(driver, seeded), seeded.url + "/dashboard/")
    table = driver.find_element(By.CSS_SELECTOR, "table#metrics")
    rows = table.find_elements(By.CSS_SELECTOR, "tr[data-metric]")
    assert sorted(row.get_attribute("data-metric") for row in rows) == sorted(seeded.names)
    for row in rows:
        name = row.get_attribute("data-metric")
        assert row.find_elements(By.CSS_SELECTOR, f'a[href="/dashboard/metrics/{name}"]'), name
        assert len(row.find_elements(By.CSS_SELECTOR, "svg.sparkline")) == 1, name


def test_the_truth_lies_inside_every_simultaneous_whisker(
    driver: WebDriver, seeded: Seeded
) -> None:
    name = seeded.categorical.name
    open_page(signed_in(driver, seeded), metric_url(seeded, name))
    chart = driver.find_element(By.CSS_SELECTOR, "svg#estimate-chart")
    bars = chart.find_elements(By.CSS_SELECTOR, "rect.bar[data-category]")
    whiskers = chart.find_elements(By.CSS_SELECTOR, "line.whisker[data-category]")
    assert Counter(b.get_attribute("data-category") for b in bars) == Counter(CATEGORIES)
    assert Counter(w.get_attribute("data-category") for w in whiskers) == Counter(CATEGORIES)
    assert "simultaneous" in driver.find_element(By.TAG_NAME, "body").text.lower()
    estimates = {b.get_attribute("data-category"): floats(b, "estimate")[0] for b in bars}
    for whisker in whiskers:
        category = whisker.get_attribute("data-category")
        low, high = floats(whisker, "low", "high")
        assert 0.0 <= low <= high <= 1.0, (category, low, high)
        assert low <= seeded.shares[category] <= high, (category, seeded.shares[category])
        assert 0.0 <= estimates[category] <= 1.0
    # The same numbers as the API's document for the same range.
    with authorized_client(seeded.url, VIEWER_TOKEN) as viewer:
        document = viewer.get(
            f"/v1/metrics/{name}/estimate",
            params={"start": seeded.days[0], "end": seeded.days[-1], "simultaneous": "true"},
        ).json()
    assert document["n"] == 7 * 3000
    for row in document["estimates"]:
        assert estimates[row["category"]] == pytest.approx(
            min(1.0, max(0.0, row["frequency"])), abs=1e-4
        )
    assert driver.find_elements(By.CSS_SELECTOR, "table#estimate-table")
    href = driver.find_element(By.CSS_SELECTOR, "a#estimate-csv").get_attribute("href")
    status, text = fetch_text(driver, seeded, href)
    assert status == 200, text[:200]
    found = {value for row in csv.reader(io.StringIO(text)) for value in row}
    assert set(CATEGORIES) <= found


def test_the_series_has_one_point_per_day_per_category_shown(
    driver: WebDriver, seeded: Seeded
) -> None:
    open_page(signed_in(driver, seeded), metric_url(seeded, seeded.categorical.name))
    chart = driver.find_element(By.CSS_SELECTOR, "#series-chart")
    points = chart.find_elements(By.CSS_SELECTOR, "circle.point")
    pairs = Counter(
        (p.get_attribute("data-category"), p.get_attribute("data-period")) for p in points
    )
    shown = {category for category, _ in pairs}
    assert shown and shown <= set(CATEGORIES)
    assert set(pairs.values()) == {1}, "a (category, period) drawn twice"
    for category in shown:
        assert {period for c, period in pairs if c == category} == set(seeded.days), category
    bands = Counter(
        b.get_attribute("data-category")
        for b in chart.find_elements(By.CSS_SELECTOR, "path.band[data-category]")
    )
    assert bands == Counter(shown)
    assert driver.find_elements(By.CSS_SELECTOR, "table#series-table")
    href = driver.find_element(By.CSS_SELECTOR, "a#series-csv").get_attribute("href")
    status, text = fetch_text(driver, seeded, href)
    assert status == 200, text[:200]
    assert all(day in text for day in seeded.days)


def test_the_numeric_page_draws_the_mean_with_its_band_per_day(
    driver: WebDriver, seeded: Seeded
) -> None:
    open_page(signed_in(driver, seeded), metric_url(seeded, seeded.numeric.name))
    chart = driver.find_element(By.CSS_SELECTOR, "svg#mean-chart")
    points = chart.find_elements(By.CSS_SELECTOR, "circle.point[data-period]")
    assert sorted(p.get_attribute("data-period") for p in points) == list(seeded.days)
    lower, upper = seeded.numeric.lower, seeded.numeric.upper
    for point in points:
        mean, low, high = floats(point, "mean", "low", "high")
        assert low <= mean <= high, (point.get_attribute("data-period"), low, mean, high)
        assert lower <= low and high <= upper


def test_the_histogram_page_shows_its_quantiles(driver: WebDriver, seeded: Seeded) -> None:
    open_page(signed_in(driver, seeded), metric_url(seeded, seeded.histogram.name))
    table = driver.find_element(By.CSS_SELECTOR, "table#quantiles")
    assert table.find_elements(By.CSS_SELECTOR, "tbody tr, tr td")
    bars = driver.find_elements(By.CSS_SELECTOR, "svg#estimate-chart rect.bar[data-category]")
    if bars:  # the contract leaves the histogram's bars open; when drawn, one per bucket
        drawn = Counter(b.get_attribute("data-category") for b in bars)
        assert drawn == Counter(seeded.histogram.categories)


def test_the_histogram_over_time_draws_every_bucket_in_bucket_order(
    driver: WebDriver, seeded: Seeded
) -> None:
    """One small chart per bucket, in the order of the buckets (not of their size), each with
    its own title and a point per day: none hidden, none overlaid on another."""
    open_page(signed_in(driver, seeded), metric_url(seeded, seeded.histogram.name))
    charts = driver.find_elements(By.CSS_SELECTOR, "#series-chart svg.chart")
    titles = [chart.find_element(By.CSS_SELECTOR, "text.title").text for chart in charts]
    assert titles == list(seeded.histogram.categories)
    for chart, bucket in zip(charts, seeded.histogram.categories, strict=True):
        points = chart.find_elements(By.CSS_SELECTOR, "circle.point")
        assert {p.get_attribute("data-category") for p in points} == {bucket}
        assert sorted(p.get_attribute("data-period") for p in points) == list(seeded.days)


def test_a_boolean_charts_its_true_share_only(driver: WebDriver, seeded: Seeded) -> None:
    open_page(signed_in(driver, seeded), pages(seeded)["metric-boolean"])
    bars = driver.find_elements(By.CSS_SELECTOR, "svg#estimate-chart rect.bar")
    assert [bar.get_attribute("data-category") for bar in bars] == ["true"]
    points = driver.find_elements(By.CSS_SELECTOR, "svg#series-chart circle.point")
    assert [point.get_attribute("data-category") for point in points] == ["true"]
    overview = seeded.url + "/dashboard/"
    open_page(driver, overview)
    row = driver.find_element(By.CSS_SELECTOR, f'tr[data-metric="{seeded.boolean.name}"]')
    assert "share of true" in row.text


def test_a_lone_period_draws_its_interval_and_days_without_reports_are_said_once(
    driver: WebDriver, seeded: Seeded
) -> None:
    """The boolean has reports today only: its default 7-day range draws today's interval as
    an error bar a reader can see, and says once that 6 days had none instead of listing them.
    The numeric metric over 10 days, 3 before its first report, says so and lists 7 rows."""
    open_page(signed_in(driver, seeded), pages(seeded)["metric-boolean"])
    bar = driver.find_element(By.CSS_SELECTOR, "svg#series-chart line.errorbar")
    low, high = floats(bar, "low", "high")
    assert 0.0 <= low < 0.3 < high <= 1.0, (low, high)
    assert bar.get_attribute("data-period") == seeded.days[-1]
    assert bar.rect["height"] >= 10, bar.rect
    assert driver.find_element(By.ID, "series-gaps").text.startswith("No reports on 6 of 7 days")
    driver.find_element(By.CSS_SELECTOR, "details#series-rows summary").click()  # collapsed
    rows = driver.find_elements(By.CSS_SELECTOR, "table#series-table tbody tr")
    assert [row.find_element(By.TAG_NAME, "th").text for row in rows] == [seeded.days[-1]]
    name = seeded.numeric.name
    earlier = (dt.date.fromisoformat(seeded.days[0]) - dt.timedelta(days=3)).isoformat()
    open_page(
        driver, f"{seeded.url}/dashboard/metrics/{name}?start={earlier}&end={seeded.days[-1]}"
    )
    driver.find_element(By.CSS_SELECTOR, "details#mean-rows summary").click()
    rows = driver.find_elements(By.CSS_SELECTOR, "table#mean-table tbody tr")
    assert [row.find_element(By.TAG_NAME, "th").text for row in rows] == list(seeded.days)
    assert driver.find_element(By.ID, "mean-gaps").text.startswith("No reports on 3 of 10 days")
    open_page(driver, metric_url(seeded, name, start=seeded.days[-1]))
    bar = driver.find_element(By.CSS_SELECTOR, "svg#mean-chart line.errorbar")
    mean = driver.find_element(By.CSS_SELECTOR, "svg#mean-chart circle.point")
    assert floats(bar, "low", "high") == floats(mean, "low", "high")
    assert bar.rect["height"] >= 10, bar.rect


def test_numeric_charts_name_their_axes(driver: WebDriver, seeded: Seeded) -> None:
    open_page(signed_in(driver, seeded), metric_url(seeded, seeded.numeric.name))
    titles = [
        t.text for t in driver.find_elements(By.CSS_SELECTOR, "svg#mean-chart text.axis-title")
    ]
    assert titles == [f"mean {seeded.numeric.name} (ms)", "day (UTC)"]


def planned(k: int, epsilon: float, margin: float) -> tuple[set[int], str]:
    """What the CLI's planner says: the advised mechanism's reports needed (simultaneous or
    not, which the page may choose), and the advised mechanism."""
    from deniable.estimators.advisor import plan_document

    needed: set[int] = set()
    advised = ""
    for simultaneous in (True, False):
        plan = plan_document(
            k, epsilon, margin=margin, reports=None, confidence=0.95, simultaneous=simultaneous
        )
        advised = plan["advised"]
        row = next(r for r in plan["mechanisms"] if r["mechanism"] == advised)
        needed.add(int(row["reports_needed"]))
    return needed, advised


def read_plan(driver: WebDriver) -> tuple[int, str]:
    """The plan page's reports needed (digits only) and recommended mechanism text."""
    needed = driver.find_element(By.CSS_SELECTOR, "output#reports-needed").text
    recommended = driver.find_element(By.CSS_SELECTOR, "output#recommended").text
    return int("".join(c for c in needed if c.isdigit())), recommended.strip().lower()


def test_the_plan_page_agrees_with_the_planner_and_answers_its_form(
    driver: WebDriver, seeded: Seeded
) -> None:
    open_page(signed_in(driver, seeded), pages(seeded)["plan"])
    needed, recommended = read_plan(driver)
    expected, advised = planned(PLAN["k"], PLAN["epsilon"], PLAN["margin"])
    assert needed in expected, (needed, expected)
    assert advised in recommended
    form = driver.find_element(By.CSS_SELECTOR, "form#plan")
    field = form.find_element(By.CSS_SELECTOR, "input[name=epsilon]")
    field.clear()
    field.send_keys("2")
    submit_form(driver, form)
    after, recommended = read_plan(driver)
    expected, advised = planned(PLAN["k"], 2.0, PLAN["margin"])
    assert after in expected, (after, expected)
    assert advised in recommended
    assert console_errors(driver) == []


def api_privacy(seeded: Seeded, **params: str) -> dict[str, Any]:
    """``GET /v1/privacy`` with the viewer token."""
    with httpx.Client(base_url=seeded.url, timeout=30.0) as http:
        response = http.get(
            "/v1/privacy", params=params, headers={"Authorization": f"Bearer {VIEWER_TOKEN}"}
        )
    assert response.status_code == 200, response.text
    return response.json()


def read_account(driver: WebDriver) -> tuple[dict[str, list[str]], str]:
    """The privacy page's table (first cell: its other cells) and its statement, read at the
    wide size (at 375 px the period, memoized and 7-day columns are hidden)."""
    rows = {}
    for row in driver.find_elements(By.CSS_SELECTOR, "table#account tbody tr"):
        texts = [cell.text for cell in row.find_elements(By.CSS_SELECTOR, "th, td")]
        rows[texts[0]] = texts[1:]
    return rows, driver.find_element(By.ID, "statement").text


def figures(document: dict[str, Any]) -> dict[str, list[str]]:
    """The 30-day, lifetime and per-value lifetime figures per metric and in total, as the
    page writes them."""

    def text(value: float | None) -> str:
        return "unbounded" if value is None else f"{value:.3g}"

    keys = ("per_30_days", "lifetime", "per_value_lifetime")
    shown = {row["metric"]: [text(row[key]) for key in keys] for row in document["metrics"]}
    shown["all metrics together"] = [text(document["total"][key]) for key in keys]
    return shown


def test_the_privacy_page_shows_the_api_account_and_answers_its_form(
    driver: WebDriver, seeded: Seeded
) -> None:
    open_page(signed_in(driver, seeded), pages(seeded)["privacy"])
    rows, statement = read_account(driver)
    expected = api_privacy(seeded)
    assert {name: cells[-3:] for name, cells in rows.items()} == figures(expected)
    assert statement == expected["statement"]
    shown_warnings = [p.text for p in driver.find_elements(By.CSS_SELECTOR, "p.note")]
    assert shown_warnings == [
        f"Warning: {w.removesuffix(' (docs/privacy.md)')}. Plan a metric at a lower ε to see"
        " the margin of error it would give."
        for w in expected["warnings"]
    ]
    assert shown_warnings, "the seeded metrics are above the warning level"
    links = driver.find_elements(By.CSS_SELECTOR, 'p.note a[href="/dashboard/plan"]')
    assert len(links) == len(shown_warnings)
    form = driver.find_element(By.CSS_SELECTOR, "form#privacy-settings")
    form.find_element(By.CSS_SELECTOR, "select[name=memoize] option[value=true]").click()
    submit_form(driver, form)
    rows, statement = read_account(driver)
    memoized = api_privacy(seeded, memoize="true")
    assert {name: cells[-3:] for name, cells in rows.items()} == figures(memoized)
    assert statement == memoized["statement"]
    assert figures(memoized) != figures(expected)
    assert console_errors(driver) == []
