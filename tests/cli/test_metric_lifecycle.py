"""A metric's first hour through the CLI (issue 14): create states its precision and refuses a
weak spec, registering again says so, archive retires a metric, and refusals name their cause.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import click
import pytest

from deniable.cli.localcollector import LocalCollector
from testkit.cli import run_cli as run


@pytest.fixture(scope="module")
def collector() -> Iterator[LocalCollector]:
    with LocalCollector() as running:
        yield running


def admin(collector: LocalCollector) -> tuple[str, ...]:
    return ("--collector", collector.url, "--token", collector.token)


def one_line_error(result: click.testing.Result) -> str:
    assert result.exit_code == 1, (result.exit_code, result.output)
    message = result.stderr.strip()
    assert message.startswith("error: ") and "\n" not in message, message
    return message


def listed(collector: LocalCollector) -> set[str]:
    result = run("--collector", collector.url, "metrics", "list", "--format", "json")
    return {m["name"] for m in json.loads(result.stdout)}


CATEGORIES = ",".join(f"c{i}" for i in range(200))


def test_create_states_the_margins_and_refuses_a_wide_one_unless_accepted(
    collector: LocalCollector,
) -> None:
    args = ("metrics", "create", "wide", "--categories", CATEGORIES, "--epsilon", "1")
    refused = run(*admin(collector), *args)
    message = one_line_error(refused)
    assert "not registered" in message and "--accept-weak" in message
    assert "10,000 reports" in message and "±7.9 percentage points" in message
    for size in ("1,000", "10,000", "100,000"):
        assert size in refused.stdout
    assert (
        "±13.39 " in refused.stdout and "percentage points" in refused.stdout
    )  # each category at 1,000 reports (Wilson)
    assert "wide" not in listed(collector)

    accepted = run(*admin(collector), *args, "--accept-weak")
    assert accepted.exit_code == 0, accepted.output
    assert "registered wide" in accepted.stdout and "warning: with 10,000" in accepted.stderr
    assert "wide" in listed(collector)


def test_a_histogram_counts_its_buckets_as_categories(collector: LocalCollector) -> None:
    """A histogram's k is its bucket count, in create's weak-spec check, show and list alike
    (issue 23: they counted 2): 10 buckets at eps 1 are refused as 10 categories would be,
    and a 5-bucket histogram shows a 5-category metric's margins."""
    ten = ",".join(str(edge) for edge in range(11))
    refused = run(
        *admin(collector),
        "metrics",
        "create",
        "h10",
        "--type",
        "histogram",
        "--edges",
        ten,
        "--epsilon",
        "1",
    )
    as_categories = run(
        *admin(collector),
        "metrics",
        "create",
        "c10",
        "--categories",
        ",".join(f"c{i}" for i in range(10)),
        "--epsilon",
        "1",
    )
    assert "all 10 buckets at once are known only to ±8.1 percentage points" in one_line_error(
        refused
    )
    assert "all 10 categories at once are known only to ±8.1 percentage points" in one_line_error(
        as_categories
    )
    five = ",".join(str(edge) for edge in range(6))
    created = run(
        *admin(collector),
        "metrics",
        "create",
        "h5",
        "--type",
        "histogram",
        "--edges",
        five,
        "--epsilon",
        "1",
    )
    assert created.exit_code == 0, created.output
    categories = run(
        *admin(collector), "metrics", "create", "c5", "--categories", "a,b,c,d,e", "--epsilon", "1"
    )
    assert categories.exit_code == 0, categories.output
    margins = [
        json.loads(
            run("--collector", collector.url, "metrics", "show", name, "--format", "json").stdout
        )["expected_margin"]["by_reports"]
        for name in ("h5", "c5")
    ]
    assert margins[0] == margins[1]
    table = run("--collector", collector.url, "metrics", "list").stdout
    row = next(line for line in table.splitlines() if " h5 " in line)
    assert " 5 " in row and "histogram" in row


def test_create_refuses_an_epsilon_devices_would_refuse(collector: LocalCollector) -> None:
    args = ("metrics", "create", "loose", "--boolean", "--epsilon", "19")
    message = one_line_error(run(*admin(collector), *args))
    assert "ε=19 is above 4" in message and "max_epsilon" in message
    assert "loose" not in listed(collector)
    accepted = run(*admin(collector), *args, "--accept-weak", "--format", "json")
    assert accepted.exit_code == 0, accepted.output
    document = json.loads(accepted.stdout)
    assert document["epsilon"] == 19 and document["already_registered"] is False
    assert [row["reports"] for row in document["expected_margin"]["by_reports"]] == [
        1_000,
        10_000,
        100_000,
    ]


def test_registering_the_identical_spec_again_says_so(collector: LocalCollector) -> None:
    args = ("metrics", "create", "theme", "--categories", "light,dark", "--epsilon", "1")
    first = run(*admin(collector), *args)
    assert first.exit_code == 0, first.output
    assert "registered theme" in first.stdout and "already" not in first.stdout
    again = run(*admin(collector), *args)
    assert again.exit_code == 0, again.output
    assert "already registered (identical) theme" in again.stdout
    as_json = json.loads(run(*admin(collector), *args, "--format", "json").stdout)
    assert as_json["already_registered"] is True


def test_archive_asks_first_then_retires_the_metric(collector: LocalCollector) -> None:
    created = run(*admin(collector), "metrics", "create", "browsr", "--boolean", "--epsilon", "1")
    assert created.exit_code == 0, created.output

    declined = run(*admin(collector), "metrics", "archive", "browsr", stdin="n\n")
    assert declined.exit_code == 1 and "browsr" in listed(collector)

    confirmed = run(*admin(collector), "metrics", "archive", "browsr", stdin="y\n")
    assert confirmed.exit_code == 0, confirmed.output
    assert "archived browsr" in confirmed.stdout and "browsr" not in listed(collector)

    again = run(*admin(collector), "metrics", "archive", "browsr", "--yes")
    assert again.exit_code == 0 and "already archived" in again.stdout
    recreate = run(*admin(collector), "metrics", "create", "browsr", "--boolean", "--epsilon", "1")
    assert "archived" in one_line_error(recreate)
    estimate = run(*admin(collector), "estimate", "browsr", "--format", "json")
    assert estimate.exit_code == 0, estimate.output

    simulated = run(*admin(collector), "simulate", "--metric", "browsr", "--clients", "5")
    assert "metric archived" in one_line_error(simulated)
    assert "requires a token" in one_line_error(
        run("--collector", collector.url, "metrics", "archive", "theme", "--yes")
    )


def test_simulate_outside_the_retention_window_says_so(collector: LocalCollector) -> None:
    created = run(*admin(collector), "metrics", "create", "old", "--boolean", "--epsilon", "1")
    assert created.exit_code == 0, created.output
    message = one_line_error(
        run(
            *admin(collector),
            "simulate",
            "--metric",
            "old",
            "--clients",
            "20",
            "--date",
            "2020-01-01",
        )
    )
    assert "refused 20 report(s)" in message
    assert "older than the retention window" in message
    assert "ingest-key" not in message


def test_a_collector_url_ending_in_v1_says_drop_it(collector: LocalCollector) -> None:
    message = one_line_error(run("--collector", f"{collector.url}/v1", "metrics", "list"))
    assert "drop /v1" in message and f"--collector {collector.url})" in message
    assert "older version" not in message
