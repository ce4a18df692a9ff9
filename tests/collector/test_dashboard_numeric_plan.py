"""The Plan page's form for a number (``/dashboard/plan?kind=numeric``) answers what
``deniable plan`` answers: reports needed for a margin on a mean (duchi, pm, hybrid, or the
fewest), the margin n reports give, and a histogram's plan over its buckets. Over real HTTP
against a real collector (in a thread), compared with the CLI's JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import escape

import httpx
import pytest

from deniable.collector.dashboard import CONTENT_SECURITY_POLICY
from deniable.collector.dashboard.charts import share_text, value_text
from testkit import DatabaseFactory, RunningCollector, collector_settings
from testkit.cli import run_cli

ANSWER = re.compile(r'<output id="numeric-answer" class="big">([^<]*)</output>')
MECHANISM = re.compile(r'<output id="numeric-mechanism" class="big">([^<]*)</output>')


@pytest.fixture(scope="module")
def dashboard(databases: DatabaseFactory) -> Iterator[httpx.Client]:
    """A browser-like client of a collector without tokens (loopback: the dashboard is open)."""
    settings = collector_settings(databases.new("sqlite"), admin_token=None, ingest_key=None)
    server = RunningCollector(settings).start()
    try:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=60) as client:
            yield client
    finally:
        server.stop()


def plan_page(client: httpx.Client, **params: str) -> httpx.Response:
    return client.get("/dashboard/plan", params={"kind": "numeric", **params})


def answer(page: str) -> tuple[str, str]:
    """The page's answer and the mechanism it is for, as written."""
    found, mechanism = ANSWER.search(page), MECHANISM.search(page)
    assert found and mechanism, page[-2000:]
    return found.group(1), mechanism.group(1)


def cli_plan(*args: str) -> dict:
    result = run_cli("plan", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_the_mean_form_answers_what_deniable_plan_answers(dashboard: httpx.Client) -> None:
    cli = cli_plan(
        "--numeric", "--lower", "0", "--upper", "5000", "--epsilon", "1", "--margin", "50"
    )
    rows = {row["mechanism"]: row for row in cli["mechanisms"]}
    fewest = plan_page(dashboard, lower="0", upper="5000", epsilon="1", margin="50")
    assert fewest.status_code == 200, fewest.text
    assert fewest.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "<script" not in fewest.text
    assert answer(fewest.text) == (f"{rows[cli['advised']]['reports_needed']:,}", cli["advised"])
    for name, row in rows.items():
        assert f'<td class="num">{row["reports_needed"]:,}</td>' in fewest.text, name
    other = next(name for name in rows if name != cli["advised"])
    one = plan_page(dashboard, mechanism=other, lower="0", upper="5000", epsilon="1", margin="50")
    assert answer(one.text) == (f"{rows[other]['reports_needed']:,}", other)


def test_n_reports_give_the_cli_margin(dashboard: httpx.Client) -> None:
    cli = cli_plan(
        "--numeric", "--lower", "-20", "--upper", "45", "--epsilon", "0.5", "--reports", "20000"
    )
    pm = next(row for row in cli["mechanisms"] if row["mechanism"] == "pm")
    page = plan_page(
        dashboard,
        mechanism="pm",
        lower="-20",
        upper="45",
        epsilon="0.5",
        margin="",
        reports="20000",
    )
    assert page.status_code == 200, page.text
    assert answer(page.text) == (escape(f"±{value_text(pm['margin'])}"), "pm")


def test_a_histogram_is_planned_over_its_buckets(dashboard: httpx.Client) -> None:
    cli = cli_plan("--categories", "8", "--epsilon", "2", "--margin", "0.02")
    advised = next(row for row in cli["mechanisms"] if row["mechanism"] == cli["advised"])
    page = plan_page(dashboard, mechanism="histogram", buckets="8", epsilon="2", margin="0.02")
    assert answer(page.text) == (f"{advised['reports_needed']:,}", cli["advised"])
    cli = cli_plan("--categories", "8", "--epsilon", "2", "--reports", "5000")
    advised = next(row for row in cli["mechanisms"] if row["mechanism"] == cli["advised"])
    page = plan_page(
        dashboard, mechanism="histogram", buckets="8", epsilon="2", margin="", reports="5000"
    )
    assert answer(page.text) == (f"±{share_text(advised['margin'])}", cli["advised"])


def test_the_shares_page_links_to_the_number_form(dashboard: httpx.Client) -> None:
    shares = dashboard.get("/dashboard/plan").text
    assert 'href="/dashboard/plan?kind=numeric"' in shares
    number = plan_page(dashboard).text
    assert '<form id="plan-numeric"' in number and '<output id="numeric-answer"' in number


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"margin": "10", "reports": "100"}, "give a margin or a number of reports, not both"),
        ({"lower": "5", "upper": "5"}, "lower must be less than upper"),
        ({"epsilon": "0"}, "epsilon must be a number above 0"),
        ({"epsilon": "nan"}, "epsilon must be a number above 0"),
        ({"mechanism": "magic"}, "mechanism must be one of"),
        ({"mechanism": "histogram", "margin": "2"}, "margin must be a number above 0 and below 1"),
        (
            {"mechanism": "histogram", "buckets": "1", "margin": "0.02"},
            "buckets must be a whole number from 2",
        ),
        ({"reports": "0", "margin": ""}, "reports must be a whole number from 1"),
    ],
)
def test_bad_input_is_a_422_page_naming_it(
    dashboard: httpx.Client, params: dict[str, str], message: str
) -> None:
    page = plan_page(dashboard, **params)
    assert page.status_code == 422
    assert 'role="alert"' in page.text and escape(message) in page.text
    assert '<form id="plan-numeric"' in page.text  # the number form, to correct
