"""Event metrics in the CLI (issue 40): ``metrics create --aggregate --window
--report-empty`` registers the rule and ``show``/``list`` state it; ``plan --aggregate any``
counts devices; ``estimate`` says what its n counts; and an event metric's spec goes through
the archive of raw reports and back, its estimates (a breakdown too) the online ones."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import click.testing
import pytest

from deniable.cli.localcollector import LocalCollector
from deniable.client import MetricSpec, SeededRandomness
from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.archive import Archive
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import register_spec
from deniable.collector.storage.retention import retain
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from testkit import ADMIN_TOKEN, DatabaseFactory, RunningCollector, collector_settings
from testkit.cli import run_cli as run
from tests.cli.test_from_archive import assert_same


@pytest.fixture(scope="module")
def collector() -> Iterator[LocalCollector]:
    with LocalCollector() as running:
        yield running


def admin(collector: LocalCollector) -> tuple[str, ...]:
    return ("--collector", collector.url, "--token", collector.token)


def test_create_registers_the_rule_and_show_and_list_state_it(collector: LocalCollector) -> None:
    created = run(
        *admin(collector),
        "metrics",
        "create",
        "ev_search",
        "--boolean",
        "--epsilon",
        "1",
        "--aggregate",
        "any",
        "--window",
        "7",
        "--format",
        "json",
    )
    assert created.exit_code == 0, created.output
    stored = json.loads(created.stdout)
    assert stored["events"] == {"aggregate": "any", "window": 7, "report_empty": True}
    expected = MetricSpec.boolean("ev_search", epsilon=1).with_events("any", window=7)
    assert stored["fingerprint"] == expected.fingerprint
    crashes = run(
        *admin(collector),
        *("metrics", "create", "ev_crashes", "--type", "histogram", "--edges", "0,1,2,5,10"),
        *("--epsilon", "1", "--aggregate", "count"),
    )
    assert crashes.exit_code == 0, crashes.output
    assert "events" in crashes.stdout and "count per device, calendar day" in crashes.stdout
    spent = run(
        *admin(collector),
        *("metrics", "create", "ev_spent", "--type", "numeric", "--lower", "0", "--upper"),
        *("100", "--epsilon", "1", "--aggregate", "sum", "--no-report-empty", "--period", "week"),
    )
    assert spent.exit_code == 0, spent.output
    shown = run(*admin(collector), "metrics", "show", "ev_search")
    assert shown.exit_code == 0, shown.output
    assert "any per device, rolling 7 days" in shown.stdout
    header = next(line for line in shown.stdout.splitlines() if "all categories" in line)
    assert "devices" in header, "one window's reports are one per active device"
    spent_shown = run(*admin(collector), "metrics", "show", "ev_spent").stdout
    assert "sum per device, ISO week, empty windows not reported" in spent_shown
    listed = run(*admin(collector), "metrics", "list")
    assert listed.exit_code == 0, listed.output
    assert "ev_search: events: any per device, rolling 7 days" in listed.stdout
    assert "ev_crashes: events: count per device, calendar day" in listed.stdout
    plain = run(*admin(collector), "metrics", "create", "ev_plain", "--boolean", "--epsilon", "1")
    assert plain.exit_code == 0 and "events" not in plain.stdout
    assert "ev_plain: events" not in run(*admin(collector), "metrics", "list").stdout
    plain_shown = run(*admin(collector), "metrics", "show", "ev_plain").stdout
    plain_header = next(line for line in plain_shown.splitlines() if "all categories" in line)
    assert "reports" in plain_header and "devices" not in plain_header


def one_line_error(result: click.testing.Result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    return result.stderr.strip()


def test_create_refuses_a_bad_rule_before_asking_the_collector(collector: LocalCollector) -> None:
    base = (*admin(collector), "metrics", "create")
    alone = run(*base, "ev_alone", "--boolean", "--epsilon", "1", "--window", "7")
    assert "--window and --report-empty go with --aggregate" in one_line_error(alone, 2)
    wrong = run(
        *base,
        *("ev_wrong", "--type", "numeric", "--lower", "0", "--upper", "9", "--epsilon", "1"),
        *("--aggregate", "any"),
    )
    assert "a numeric metric cannot aggregate events by any" in one_line_error(wrong, 1)
    weekly = run(
        *base,
        *("ev_weekly", "--boolean", "--epsilon", "1", "--period", "week"),
        *("--aggregate", "any", "--window", "28"),
    )
    assert "its period must be day" in one_line_error(weekly, 1)
    empty = run(
        *base, "ev_empty", "--boolean", "--epsilon", "1", "--aggregate", "any", "--no-report-empty"
    )
    assert "report_empty must be true for any" in one_line_error(empty, 1)
    names = json.loads(run(*admin(collector), "metrics", "list", "--format", "json").stdout)
    assert not {m["name"] for m in names} & {"ev_alone", "ev_wrong", "ev_weekly", "ev_empty"}
    help_text = run("metrics", "create", "--help").stdout
    assert "--aggregate" in help_text and "ONE report per window" in help_text


def test_plan_of_an_any_metric_counts_devices() -> None:
    plain = run("plan", "--categories", "2", "--epsilon", "1", "--reports", "20000")
    devices = run("plan", "--aggregate", "any", "--epsilon", "1", "--reports", "20000")
    assert devices.exit_code == 0, devices.output
    assert "margin of error with 20,000 devices" in devices.stdout
    assert "← fewest devices" in devices.stdout and "one report per active" in devices.stdout
    assert "20,000 reports" in plain.stdout and "devices" not in plain.stdout
    same = [line.split("│")[3] for line in plain.stdout.splitlines() if line.startswith("│")]
    again = [line.split("│")[3] for line in devices.stdout.splitlines() if line.startswith("│")]
    assert same == again, "the same margins: one report per device"
    document = json.loads(
        run(
            "plan", "--aggregate", "any", "--epsilon", "1", "--margin", "0.02", "--format", "json"
        ).stdout
    )
    assert document["counted"] == "devices" and document["categories"] == 2
    needed = run("plan", "--aggregate", "any", "--epsilon", "1", "--margin", "0.02").stdout
    assert "devices needed for" in needed
    count = run(
        *("plan", "--aggregate", "count", "--numeric", "--lower", "0", "--upper", "10"),
        *("--epsilon", "1", "--reports", "5000"),
    )
    assert count.exit_code == 0 and "margin with 5,000 devices" in count.stdout
    wrong = run("plan", "--aggregate", "any", "--categories", "3", "--epsilon", "1")
    assert wrong.exit_code == 2 and "an any metric is a boolean" in wrong.output


PERIODS = ["2026-06-01", "2026-06-02"]
CELLS = ["ios", "web", "other"]
DEVICES = 1500
ACTIVES = MetricSpec.boolean(
    "ev_arch_actives", epsilon=1.0, dimensions={"platform": ["ios", "web"]}
).with_events("any", window=7)
COUNTS = MetricSpec.numeric("ev_arch_count", lower=0, upper=10, epsilon=1.0).with_events("count")


def test_an_event_metric_goes_through_the_archive_and_back(
    databases: DatabaseFactory, tmp_path: Path
) -> None:
    url = databases.new("sqlite")
    migrate(url)
    database = open_database(url)
    queries = {
        "one": {"start": PERIODS[-1], "end": PERIODS[-1]},
        "both": {"start": PERIODS[0], "end": PERIODS[-1]},
        "by": {"start": PERIODS[-1], "end": PERIODS[-1], "by": "platform"},
    }
    try:
        for spec in (ACTIVES, COUNTS):
            register_spec(database, spec, dt.datetime.now(dt.UTC))
        for p, period in enumerate(PERIODS):
            rng = SeededRandomness(40 + p)
            batch = [
                ValidReport(
                    str(uuid.uuid4()),
                    ACTIVES.name,
                    period,
                    ACTIVES.randomizer.randomize(int(i % 4 == 0), rng),
                    CELLS[i % 3],
                )
                for i in range(DEVICES)
            ] + [
                ValidReport(
                    str(uuid.uuid4()),
                    COUNTS.name,
                    period,
                    COUNTS.numeric_randomizer.randomize(COUNTS.scale(i % 3), rng),
                )
                for i in range(DEVICES)
            ]
            for start in range(0, len(batch), 1000):
                prepared = prepare_batch(
                    batch[start : start + 1000],
                    {ACTIVES.name: ACTIVES, COUNTS.name: COUNTS},
                    dt.date(2026, 6, 3),
                )
                store_batches(database, [prepared])
        server = RunningCollector(collector_settings(url)).start()
        online: dict[tuple[str, str], dict] = {}
        table = ""
        try:
            with server.client(ADMIN_TOKEN) as client:
                for spec in (ACTIVES, COUNTS):
                    for key, params in queries.items():
                        if key == "by" and spec is COUNTS:
                            continue
                        answer = client.get(f"/v1/metrics/{spec.name}/estimate", params=params)
                        assert answer.status_code == 200, answer.text
                        online[spec.name, key] = answer.json()
            shown = run(
                *("--collector", server.url, "--token", ADMIN_TOKEN, "estimate", ACTIVES.name),
                *("--start", PERIODS[-1], "--end", PERIODS[-1]),
            )
            assert shown.exit_code == 0, shown.output
            table = shown.stdout
            trend = run(
                *("--collector", server.url, "--token", ADMIN_TOKEN, "series", COUNTS.name),
                *("--start", PERIODS[0], "--end", PERIODS[-1]),
            )
            assert trend.exit_code == 0, trend.output
            header = next(line for line in trend.stdout.splitlines() if "margin" in line)
            assert "devices" in header, "each period of the series is one window"
        finally:
            server.stop()
        run_ = retain(
            database, [ACTIVES, COUNTS], dt.date(2026, 7, 1), archive=Archive(str(tmp_path))
        )
        assert run_.deleted == 2 * DEVICES * len(PERIODS)
    finally:
        database.dispose()
    assert f"{DEVICES:,} devices · " in table
    assert f"of {DEVICES:,} active devices" in table and "devices where the event occurred" in table
    assert online[ACTIVES.name, "one"]["counted"] == "devices"
    assert online[ACTIVES.name, "both"]["counted"] == "reports"
    assert online[COUNTS.name, "one"]["counted"] == "devices"
    for (name, key), document in online.items():
        args = ["estimate", name, "--from-archive", str(tmp_path), "--format", "json"]
        params = queries[key]
        args += ["--start", params["start"], "--end", params["end"]]
        if "by" in params:
            args += ["--by", params["by"]]
        result = run(*args)
        assert result.exit_code == 0, result.output
        offline = json.loads(result.stdout)
        assert_same(document, offline)
        assert key == "by" or offline["counted"] == document["counted"]
    sliced = json.loads(
        run(
            *("estimate", ACTIVES.name, "--from-archive", str(tmp_path), "--format", "json"),
            *("--start", PERIODS[-1], "--end", PERIODS[-1], "--by", "platform"),
        ).stdout
    )
    assert {s["estimate"]["counted"] for s in sliced["slices"] if s["estimate"]} == {"devices"}
