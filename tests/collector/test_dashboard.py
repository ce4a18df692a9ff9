"""The viewer token and the dashboard, over HTTP against a real collector (in a thread).

One collector with an admin token, an ingest key and a viewer token is seeded with a
categorical, a numeric and a histogram metric over the last 7 days of the test clock, and a
categorical metric whose category is markup; the tests read it as a viewer, an admin, a device
and a stranger, and read every dashboard page as a browser would (cookies, forms, headers).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from markupsafe import escape
from pydantic import ValidationError

from deniable.client import MetricSpec
from deniable.collector.auth import VIEWER_REFUSED
from deniable.collector.dashboard import CONTENT_SECURITY_POLICY, session
from deniable.estimators.advisor import plan_document
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    VIEWER_TOKEN,
    CollectorProcess,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_numeric_reports,
    make_reports,
    register,
    signed_in,
    viewer_collector,
)

HOSTILE = "<script>alert(1)</script>"
DAYS = tuple((TEST_NOW.date() - dt.timedelta(days=back)).isoformat() for back in range(6, -1, -1))


@dataclass(frozen=True)
class Seeded:
    """The running collector and its metrics' names."""

    server: RunningCollector
    categorical: str
    numeric: str
    histogram: str
    hostile: str

    @property
    def url(self) -> str:
        return self.server.url


def upload(client: httpx.Client, reports: list[dict[str, object]]) -> None:
    """Post ``reports`` in batches; all must be accepted."""
    for start in range(0, len(reports), 1000):
        response = client.post("/v1/reports", json={"reports": reports[start : start + 1000]})
        assert response.status_code == 202, response.text


@pytest.fixture(scope="module")
def seeded(databases: DatabaseFactory) -> Iterator[Seeded]:
    """A collector with the viewer token and four metrics with a week of reports."""
    with viewer_collector(databases.new("sqlite")) as server:
        with server.client(ADMIN_TOKEN) as admin:
            colors = register(
                admin, MetricSpec.categorical("dash_color", ["red", "green", "blue"], epsilon=2.0)
            )
            load = register(admin, MetricSpec.numeric("dash_load", lower=0, upper=1000, epsilon=2))
            hist = register(admin, MetricSpec.histogram("dash_hist", [0, 10, 100, 1000], epsilon=2))
            hostile = register(
                admin, MetricSpec.categorical("dash_hostile", [HOSTILE, "plain"], epsilon=1.0)
            )
        rng = np.random.default_rng(7)
        with server.client(INGEST_KEY) as device:
            for i, day in enumerate(DAYS):
                upload(device, make_reports(colors, [0] * 300 + [1] * 200 + [2] * 100, day, i))
                values = rng.uniform(100, 500, 200).tolist()
                upload(device, make_numeric_reports(load, values, day, 10 + i))
                upload(device, make_reports(hist, [0] * 50 + [1] * 100 + [2] * 50, day, 20 + i))
                upload(device, make_reports(hostile, [0] * 40 + [1] * 60, day, 30 + i))
        yield Seeded(server, colors.name, load.name, hist.name, hostile.name)


def browser(seeded: Seeded) -> httpx.Client:
    """A client that keeps cookies and does not follow redirects, like a fresh browser tab."""
    return httpx.Client(base_url=seeded.url, trust_env=False, timeout=30)


def page_urls(seeded: Seeded) -> dict[str, str]:
    """Every dashboard page, by what it shows."""
    week = f"start={DAYS[0]}&end={DAYS[-1]}"
    return {
        "overview": "/dashboard/",
        "categorical": f"/dashboard/metrics/{seeded.categorical}?{week}",
        "numeric": f"/dashboard/metrics/{seeded.numeric}?{week}",
        "histogram": f"/dashboard/metrics/{seeded.histogram}",
        "plan": "/dashboard/plan?k=12&epsilon=1&margin=0.03",
        "privacy": "/dashboard/privacy?memoize=true&lifetime_epsilon=10",
    }


CONTRACT = {
    "overview": ['<table id="metrics"', 'class="sparkline"', 'action="/dashboard/sign-out"'],
    "categorical": [
        '<form id="pickers"',
        '<svg id="estimate-chart"',
        'class="bar" data-category="red"',
        'class="whisker" data-category="red"',
        '<table id="estimate-table"',
        'id="estimate-csv"',
        '<div id="series-chart" class="multiples"',
        'class="band" data-category="red"',
        '<table id="series-table"',
        'id="series-csv"',
        "simultaneous 95% intervals",
    ],
    "numeric": ['<svg id="mean-chart"', '<table id="mean-table"', 'id="mean-csv"', "data-mean="],
    "histogram": ['<svg id="estimate-chart"', '<table id="quantiles"', '<tr data-q="0.5">'],
    "plan": ['<form id="plan"', '<output id="reports-needed"', '<output id="recommended"'],
    "privacy": ['<form id="privacy-settings"', '<table id="account"', '<blockquote id="statement"'],
}


# --- the viewer token on the API ---------------------------------------------------------------


def test_the_viewer_token_reads_estimates_and_series_but_writes_nothing(seeded: Seeded) -> None:
    name = seeded.categorical
    new_metric = MetricSpec.boolean("dash_viewer_attempt", epsilon=1.0).fingerprint_fields()
    with seeded.server.client(VIEWER_TOKEN) as viewer:
        assert viewer.get("/v1/metrics").status_code == 200
        assert viewer.get(f"/v1/metrics/{name}").status_code == 200
        assert viewer.get(f"/v1/metrics/{name}/estimate").status_code == 200
        assert viewer.get(f"/v1/metrics/{name}/series").status_code == 200
        refused = [
            viewer.post("/v1/metrics", json=new_metric),
            viewer.post(f"/v1/metrics/{name}/archive"),
            viewer.get(f"/v1/admin/metrics/{name}/reports"),
            viewer.post("/v1/admin/retention"),
        ]
    for response in refused:
        assert response.status_code == 403, response.text
        assert response.json()["detail"] == VIEWER_REFUSED
    with seeded.server.client(ADMIN_TOKEN) as admin:
        assert admin.get(f"/v1/metrics/{name}/estimate").status_code == 200
        assert admin.get(f"/v1/admin/metrics/{name}/reports?limit=1").status_code == 200
    for token in (None, INGEST_KEY, "a-token-nobody-was-given-1234"):
        with seeded.server.client(token) as stranger:
            assert stranger.get(f"/v1/metrics/{name}/estimate").status_code == 401
            assert stranger.post("/v1/metrics", json=new_metric).status_code == 401


def test_the_viewer_token_follows_the_admin_tokens_rules(tmp_path: object) -> None:
    with pytest.raises(ValidationError, match="shorter than 16"):
        collector_settings("sqlite:///x.db", viewer_token="short")
    with pytest.raises(ValidationError, match="placeholder"):
        collector_settings("sqlite:///x.db", viewer_token="changeme-changeme-1")
    with pytest.raises(ValidationError, match="equals the admin token"):
        collector_settings("sqlite:///x.db", viewer_token=ADMIN_TOKEN)


def test_the_viewer_token_can_come_from_a_file(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "viewer"  # type: ignore[operator]
    path.write_text(VIEWER_TOKEN + "\n")
    settings = collector_settings("sqlite:///x.db", viewer_token_file=path)
    assert settings.viewer_secret() == VIEWER_TOKEN
    assert settings.viewer_tokens() == [VIEWER_TOKEN, ADMIN_TOKEN]


# --- signing in --------------------------------------------------------------------------------


def test_pages_redirect_to_the_sign_in_form_when_signed_out(seeded: Seeded) -> None:
    with browser(seeded) as client:
        for path in [
            *page_urls(seeded).values(),
            f"/dashboard/metrics/{seeded.categorical}/estimate.csv",
        ]:
            response = client.get(path)
            assert response.status_code == 303, path
            assert response.headers["location"] == "/dashboard/sign-in"
        form = client.get("/dashboard/sign-in")
    assert form.status_code == 200
    assert '<form id="sign-in" method="post" action="/dashboard/sign-in">' in form.text
    assert '<input id="token" name="token" type="password"' in form.text


def test_a_wrong_token_shows_the_form_again_with_401_and_no_cookie(seeded: Seeded) -> None:
    with browser(seeded) as client:
        response = client.post("/dashboard/sign-in", data={"token": "wrong-token-wrong-token"})
        assert response.status_code == 401
        assert '<form id="sign-in"' in response.text and "not accepted" in response.text
        assert "set-cookie" not in response.headers
        too_big = client.post("/dashboard/sign-in", data={"token": "x" * 10_000})
        assert too_big.status_code == 413


def test_the_admin_token_does_not_sign_in(seeded: Seeded) -> None:
    """Only the viewer token signs in: the admin token is never kept in a browser's cookie, so
    a stolen dashboard session can only read."""
    with browser(seeded) as client:
        response = client.post("/dashboard/sign-in", data={"token": ADMIN_TOKEN})
        assert response.status_code == 403
        assert "use the viewer token" in response.text and ADMIN_TOKEN not in response.text
        assert "set-cookie" not in response.headers
        assert client.get("/dashboard/", follow_redirects=False).status_code == 303
        admin_session = session.issue(ADMIN_TOKEN)
        client.cookies.set(session.COOKIE_NAME, admin_session, path="/dashboard")
        assert client.get("/dashboard/", follow_redirects=False).status_code == 303


def test_signing_in_sets_a_strict_httponly_cookie_without_the_token(seeded: Seeded) -> None:
    token = VIEWER_TOKEN
    with browser(seeded) as client:
        response = client.post("/dashboard/sign-in", data={"token": token})
        assert response.status_code == 303
        assert response.headers["location"] == "/dashboard/"
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/dashboard" in cookie
        assert "Secure" not in cookie  # plain http on loopback
        assert token not in cookie and token not in response.headers.get("location", "")
        assert client.get("/dashboard/").status_code == 200
        # The session opens no API route: the API wants a bearer token.
        assert client.get(f"/v1/metrics/{seeded.categorical}/estimate").status_code == 401
        signed_out = client.post("/dashboard/sign-out")
        assert signed_out.status_code == 303
        assert "Max-Age=0" in signed_out.headers["set-cookie"]
        assert client.get("/dashboard/").status_code == 303


def test_a_forged_or_expired_cookie_is_refused(seeded: Seeded) -> None:
    forged = session.issue("not-a-token-anyone-has")
    expired = session.issue(VIEWER_TOKEN, now=0)
    for value in (forged, expired, "9999999999.00", "junk"):
        with browser(seeded) as client:
            client.cookies.set(session.COOKIE_NAME, value, path="/dashboard")
            assert client.get("/dashboard/").status_code == 303


@pytest.mark.parametrize(
    "value",
    [
        "\u00b2" * 3 + "." + "0" * 64,
        "\u00b2" * 32 + ".\u00b2\u00b2." + "0" * 64,
        "0" * 32 + ".\u0661\u0662." + "0" * 64,
        "0" * 32 + ".99." + "0" * 63 + "\u00e9",
        "0" * 32 + ".99." + "0" * 64 + ".",
        "0" * 32 + ".-1." + "0" * 64,
        ".." * 40,
    ],
)
def test_a_malformed_cookie_is_signed_out_never_an_error(seeded: Seeded, value: str) -> None:
    """Digits outside ASCII (``²`` passes ``isdigit`` but not ``int``) and any other shape
    mean no session: the sign-in redirect, never a 500."""
    cookie = f"{session.COOKIE_NAME}={value}".encode("latin-1", "replace")
    with browser(seeded) as client:
        response = client.get("/dashboard/", headers={"Cookie": cookie})  # type: ignore[dict-item]
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/dashboard/sign-in"


def test_a_cookie_replayed_after_sign_out_is_refused(seeded: Seeded) -> None:
    with signed_in(seeded) as client:
        cookie = client.cookies.get(session.COOKIE_NAME)
        assert cookie is not None and client.get("/dashboard/").status_code == 200
        with signed_in(seeded) as other_tab:
            assert other_tab.get("/dashboard/").status_code == 200
            assert client.post("/dashboard/sign-out").status_code == 303
            # Another session of the same token stays signed in.
            assert other_tab.get("/dashboard/").status_code == 200
    with browser(seeded) as thief:
        thief.cookies.set(session.COOKIE_NAME, cookie, path="/dashboard")
        replayed = thief.get("/dashboard/")
    assert replayed.status_code == 303 and replayed.headers["location"] == "/dashboard/sign-in"


def test_a_sign_out_holds_on_every_process_sharing_the_session_secret(
    databases: DatabaseFactory, tmp_path: Path
) -> None:
    """Two processes given one session secret and one revocations directory, as ``deniable
    serve --workers N`` gives its workers: a session signed in on one is valid on the other,
    and once signed out on one, the other refuses it too."""
    settings = collector_settings(databases.new("sqlite"), viewer_token=VIEWER_TOKEN)
    revocations = tmp_path / "revocations"
    revocations.mkdir()
    shared = {
        session.SECRET_VARIABLE: "ab" * 32,
        session.REVOCATIONS_VARIABLE: str(revocations),
    }
    first, second = (
        CollectorProcess(settings, tmp_path, env=shared).launch(),
        CollectorProcess(settings, tmp_path, env=shared).launch(),
    )
    try:
        first.wait_ready()
        second.wait_ready()
        with httpx.Client(base_url=first.url, trust_env=False) as client:
            assert client.post("/dashboard/sign-in", data={"token": VIEWER_TOKEN}).is_redirect
            cookie = client.cookies.get(session.COOKIE_NAME)
            assert cookie is not None
            assert _status_with(second.url, cookie) == 200
            assert client.post("/dashboard/sign-out").status_code == 303
        assert _status_with(second.url, cookie) == 303
        assert _status_with(first.url, cookie) == 303
    finally:
        first.stop()
        second.stop()


def _status_with(url: str, cookie: str) -> int:
    """The status of ``GET /dashboard/`` on ``url`` with the session ``cookie``."""
    with httpx.Client(base_url=url, trust_env=False) as client:
        client.cookies.set(session.COOKIE_NAME, cookie, path="/dashboard")
        return client.get("/dashboard/").status_code


FOREIGN = [
    {"Origin": "https://evil.example"},
    {"Origin": "null"},
    {"Origin": "http://127.0.0.1.evil.example"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "cross-site", "Origin": "http://127.0.0.1"},
]
"""Headers of a form posted from another site (login CSRF, forced sign-out)."""


@pytest.mark.parametrize("headers", FOREIGN)
def test_sign_in_and_out_refuse_a_foreign_origin(seeded: Seeded, headers: dict[str, str]) -> None:
    with browser(seeded) as client:
        refused = client.post("/dashboard/sign-in", data={"token": VIEWER_TOKEN}, headers=headers)
        assert refused.status_code == 403 and "set-cookie" not in refused.headers
    with signed_in(seeded) as client:
        refused = client.post("/dashboard/sign-out", headers=headers)
        assert refused.status_code == 403 and "set-cookie" not in refused.headers
        assert client.get("/dashboard/").status_code == 200


def test_sign_in_and_out_accept_the_dashboards_own_origin(seeded: Seeded) -> None:
    host = seeded.url.split("://", 1)[1]
    own = [
        {"Origin": seeded.url},
        {"Origin": seeded.url, "Sec-Fetch-Site": "same-origin"},
        {"Origin": "null", "Sec-Fetch-Site": "same-origin"},  # Referrer-Policy: no-referrer
        {"Origin": f"https://{host.split(':')[0]}", "Host": f"{host.split(':')[0]}:443"},
    ]
    for headers in own:
        with browser(seeded) as client:
            signed = client.post(
                "/dashboard/sign-in", data={"token": VIEWER_TOKEN}, headers=headers
            )
            assert signed.status_code == 303, (headers, signed.text)
            assert client.post("/dashboard/sign-out", headers=headers).status_code == 303


@pytest.mark.parametrize("path", ["/dashboard/plan/", "/v1/metrics/"])
def test_a_redirect_never_names_the_host_the_client_sent(seeded: Seeded, path: str) -> None:
    with browser(seeded) as client:
        response = client.get(path, headers={"Host": "evil.example"})
    assert response.is_redirect, response.status_code
    location = response.headers["location"]
    assert location == path.rstrip("/"), location


def test_the_cookie_is_secure_over_https(seeded: Seeded) -> None:
    with browser(seeded) as client:
        response = client.post(
            "/dashboard/sign-in",
            data={"token": VIEWER_TOKEN},
            headers={"X-Forwarded-Proto": "https"},
        )
    assert "Secure" in response.headers["set-cookie"]


# --- the pages ---------------------------------------------------------------------------------


def test_the_root_redirects_to_the_dashboard(seeded: Seeded) -> None:
    with browser(seeded) as client:
        response = client.get("/")
    assert response.status_code in (302, 303, 307)
    assert response.headers["location"] == "/dashboard/"


def test_every_page_holds_its_dom_contract_and_strict_headers(seeded: Seeded) -> None:
    with signed_in(seeded) as client:
        responses = {name: client.get(path) for name, path in page_urls(seeded).items()}
        responses["stylesheet"] = client.get("/dashboard/static/dashboard.css")
        responses["sign-in"] = browser(seeded).get("/dashboard/sign-in")
        responses["redirect"] = browser(seeded).get("/dashboard/")
        responses["missing"] = client.get("/dashboard/metrics/no_such_metric")
    for name, response in responses.items():
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, name
        assert response.headers["x-content-type-options"] == "nosniff", name
        assert response.headers["referrer-policy"] == "no-referrer", name
    assert responses["missing"].status_code == 404
    assert responses["stylesheet"].headers["content-type"].startswith("text/css")
    for name, needles in CONTRACT.items():
        response = responses[name]
        assert response.status_code == 200, (name, response.text[:300])
        for needle in needles:
            assert needle in response.text, (name, needle)
    overview = responses["overview"].text
    for metric in (seeded.categorical, seeded.numeric, seeded.histogram, seeded.hostile):
        assert f'<tr data-metric="{metric}">' in overview
        assert f'<a href="/dashboard/metrics/{metric}">' in overview
    categorical = responses["categorical"].text
    bars = categorical.split('<svg id="estimate-chart"')[1].split("</svg>")[0]
    assert bars.count('class="bar"') == 3 and bars.count('class="whisker"') == 3
    assert categorical.count('<circle class="point" data-category="red"') == 7
    mean_chart = responses["numeric"].text.split('<svg id="mean-chart"')[1].split("</svg>")[0]
    assert mean_chart.count('<circle class="point" data-period=') == 7


def test_pages_hold_no_inline_script_or_style_and_no_foreign_url(seeded: Seeded) -> None:
    with signed_in(seeded) as client:
        texts = [client.get(path).text for path in page_urls(seeded).values()]
    texts.append(browser(seeded).get("/dashboard/sign-in").text)
    for text in texts:
        assert "<script" not in text.lower()
        assert " style=" not in text.lower() and "<style" not in text.lower()
        assert not re.search(r"(?i)\bon[a-z]+=", text), "an inline event handler"
        assert (
            "http://" not in text and "https://" not in text and "//" not in text.replace("://", "")
        )


def test_metric_names_and_categories_are_escaped(seeded: Seeded) -> None:
    with signed_in(seeded) as client:
        page = client.get(f"/dashboard/metrics/{seeded.hostile}").text
        overview = client.get("/dashboard/").text
    assert HOSTILE not in page and HOSTILE not in overview
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_pages_show_the_api_documents_numbers(seeded: Seeded) -> None:
    name = seeded.categorical
    params = {"start": DAYS[0], "end": DAYS[-1], "simultaneous": "true"}
    with seeded.server.client(VIEWER_TOKEN) as viewer:
        document = viewer.get(f"/v1/metrics/{name}/estimate", params=params).json()
        series = viewer.get(f"/v1/metrics/{name}/series", params=params).json()
    with signed_in(seeded) as client:
        page = client.get(page_urls(seeded)["categorical"]).text
        link = re.search(r'id="estimate-csv"[^>]*href="([^"]+)"', page) or re.search(
            r'href="([^"]+)"[^>]*id="estimate-csv"', page
        )
        assert link is not None
        table = client.get(link.group(1).replace("&amp;", "&"))
        series_csv = client.get(
            f"/dashboard/metrics/{name}/series.csv?start={DAYS[0]}&end={DAYS[-1]}"
        )
    assert table.status_code == 200 and table.headers["content-type"].startswith("text/csv")
    rows = {row["category"]: row for row in csv.DictReader(io.StringIO(table.text))}
    for expected in document["estimates"]:
        row = rows[expected["category"]]
        for key in ("frequency", "ci_low", "ci_high", "std_error"):
            value = None if row[key] == "" else float(row[key])
            assert value == expected[key], (key, row)
        bar = f'class="bar" data-category="{expected["category"]}" data-estimate="'
        shown = float(page.split(bar)[1].split('"')[0])
        assert shown == min(1.0, max(0.0, expected["frequency"]))
        whisker = f'class="whisker" data-category="{expected["category"]}" data-low="'
        low = float(page.split(whisker)[1].split('"')[0])
        assert low == expected["ci_low"]
    lines = list(csv.DictReader(io.StringIO(series_csv.text)))
    assert len(lines) == 3 * len(series["series"])
    first = series["series"][0]["estimates"][0]
    assert float(lines[0]["frequency"]) == first["frequency"]


def test_the_numeric_csv_is_the_mean_series(seeded: Seeded) -> None:
    name = seeded.numeric
    params = {"start": DAYS[0], "end": DAYS[-1]}
    with seeded.server.client(VIEWER_TOKEN) as viewer:
        series = viewer.get(f"/v1/metrics/{name}/series", params=params).json()
    with signed_in(seeded) as client:
        text = client.get(f"/dashboard/metrics/{name}/series.csv", params=params).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["period"] for r in rows] == list(DAYS)
    for row, point in zip(rows, series["series"], strict=True):
        assert float(row["mean"]) == point["mean"]["estimate"]


def test_a_bad_range_or_choice_is_a_page_with_422(seeded: Seeded) -> None:
    base = f"/dashboard/metrics/{seeded.categorical}"
    with signed_in(seeded) as client:
        for query in (
            "?start=yesterday",
            "?method=magic",
            "?top=0",
            f"?start={DAYS[-1]}&end={DAYS[0]}",
        ):
            response = client.get(base + query)
            assert response.status_code == 422, query
            assert 'role="alert"' in response.text


def test_the_plan_page_shows_the_advisors_numbers(seeded: Seeded) -> None:
    expected = plan_document(12, 1.0, margin=0.03, reports=None, confidence=0.95, simultaneous=True)
    advised = expected["advised"]
    needed = next(r for r in expected["mechanisms"] if r["mechanism"] == advised)["reports_needed"]
    with signed_in(seeded) as client:
        page = client.get(page_urls(seeded)["plan"]).text
        bad = [
            client.get("/dashboard/plan", params={"k": k, "epsilon": eps, "margin": m})
            for k, eps, m in (
                ("x", "1", "0.1"),
                ("5", "-1", "0.1"),
                ("5", "1", "100"),  # 100 points or more: no margin
                ("5", "nan", "0.1"),
            )
        ]
    assert f'<output id="reports-needed" class="big">{needed:,}</output>' in page
    assert f'<output id="recommended" class="big">{advised}</output>' in page
    alone = plan_document(12, 1.0, margin=0.03, reports=None, confidence=0.95, simultaneous=False)
    fewest = next(r for r in alone["mechanisms"] if r["mechanism"] == alone["advised"])
    query = {"k": "12", "epsilon": "1", "margin": "0.03", "intervals": "per-category"}
    with signed_in(seeded) as client:
        each = client.get("/dashboard/plan", params=query).text
        bad.append(client.get("/dashboard/plan", params={**query, "intervals": "both"}))
    assert f'<output id="reports-needed" class="big">{fewest["reports_needed"]:,}</output>' in each
    assert fewest["reports_needed"] < needed
    for response in bad:
        assert response.status_code == 422
        assert 'class="error"' in response.text


def test_the_privacy_page_shows_the_apis_account_and_refuses_bad_settings(seeded: Seeded) -> None:
    with seeded.server.client(VIEWER_TOKEN) as viewer:
        expected = viewer.get("/v1/privacy", params={"memoize": "true", "lifetime_epsilon": 10})
    assert expected.status_code == 200
    document = expected.json()
    with signed_in(seeded) as client:
        page = client.get(page_urls(seeded)["privacy"]).text
        bad = [
            client.get("/dashboard/privacy", params=params)
            for params in (
                {"max_reports_per_period": "0"},
                {"max_reports_per_period": "two"},
                {"memoize": "sometimes"},
                {"lifetime_epsilon": "-1"},
                {"lifetime_epsilon": "inf"},
                {"instantaneous_ratio": "3"},
            )
        ]
    assert escape(document["statement"]) in page
    total = document["total"]
    assert f'<td class="num">{total["per_30_days"]:.3g}</td>' in page
    assert total["lifetime"] is not None  # the cap counts memoized reports too (issue 37)
    assert f'<td class="num">{total["lifetime"]:.3g}</td>' in page
    assert f'<td class="num">{total["per_value_lifetime"]:.3g}</td>' in page
    for response in bad:
        assert response.status_code == 422
        assert 'class="error"' in response.text


def test_without_tokens_the_dashboard_is_open_on_loopback(databases: DatabaseFactory) -> None:
    settings = collector_settings(databases.new("sqlite"), admin_token=None, ingest_key=None)
    server = RunningCollector(settings).start()
    try:
        with browser_of(server.url) as client:
            assert client.get("/dashboard/").status_code == 200
            assert client.get("/dashboard/plan").status_code == 200
    finally:
        server.stop()


def browser_of(url: str) -> httpx.Client:
    """A cookie-keeping client of ``url`` that does not follow redirects."""
    return httpx.Client(base_url=url, trust_env=False, timeout=30)


def test_the_privacy_page_shows_the_shuffled_batches_beside_the_local_eps(seeded: Seeded) -> None:
    """With a shuffler batch size, ``table#shuffled`` holds the API's central eps per metric;
    without one the page says there are no shuffled batches; a bad size is a 422."""
    with seeded.server.client(VIEWER_TOKEN) as viewer:
        document = viewer.get("/v1/privacy", params={"shuffle_batch": 100_000}).json()
    with signed_in(seeded) as client:
        page = client.get("/dashboard/privacy", params={"shuffle_batch": "100000"}).text
        plain = client.get("/dashboard/privacy").text
        bad = client.get("/dashboard/privacy", params={"shuffle_batch": "1"})
    assert '<table id="shuffled"' in page
    for row in document["shuffled"]["batches"]:
        assert f'<td class="num">{row["central_epsilon"]:.4g}</td>' in page
    assert escape(document["statement"]) in page
    assert '<p id="shuffled-none"' in plain and "No shuffled batches" in plain
    assert bad.status_code == 422 and "shuffle_batch" in bad.text
