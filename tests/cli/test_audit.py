"""``deniable audit``: the CI sweep over every mechanism at four eps passes, a collector's
registered metrics are each audited, a broken randomizer exits 1, and bad input is one line.

The sweep runs the installed command in a subprocess at the default 200,000 reports per audit
(docs/audit.md states its wall time on the two-core CI machine)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from deniable.client import BRR, MetricSpec
from deniable.client.randomness import Randomness
from deniable.estimators.audit import DEFAULT_REPORTS
from testkit import (
    ADMIN_TOKEN,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    loopback_url,
    spare_port,
)
from testkit import register as register_spec
from testkit.cli import run_cli as run

SWEEP_SEED = 1121
TEST_EPSILONS = (0.5, 4.0)
"""The sweep's ends, which the suite audits every mechanism at (the full sweep adds 1 and 2,
which tests/estimators/test_audit.py audits for brr and krr): half the sweep's time."""
MECHANISMS = {"brr", "krr", "oue", "olh", "duchi", "pm", "hybrid"}
BOOLEAN = '{"name": "dark_mode", "type": "boolean", "epsilon": 1}'


def one_line_error(result: click.testing.Result, code: int = 1) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in result.output, result.output
    return message


@pytest.fixture(scope="module")
def collector(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector of this module's own, so "every registered metric" is exactly these."""
    server = RunningCollector(collector_settings(databases.new("sqlite"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def registered(collector: RunningCollector) -> list[MetricSpec]:
    specs = [
        MetricSpec.boolean("dark_mode", epsilon=0.5),
        MetricSpec.categorical("browser", ["chrome", "firefox", "safari"], epsilon=2.0),
        MetricSpec.numeric("load_ms", lower=0, upper=5000, epsilon=1.0, mechanism="pm"),
        MetricSpec.histogram("load_hist", [0, 100, 500, 5000], epsilon=1.0, mechanism="olh"),
    ]
    with collector.client(ADMIN_TOKEN) as admin:
        return [register_spec(admin, spec) for spec in specs]


def test_the_sweep_of_every_mechanism_passes_in_a_subprocess() -> None:
    command = [sys.executable, "-m", "deniable.cli.main", "audit", "--all-mechanisms"]
    command += ["--seed", str(SWEEP_SEED), "--jobs", "2", "--format", "json"]
    command += ["--epsilons", ",".join(str(e) for e in TEST_EPSILONS)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    rows = document["results"]
    assert len(rows) == 8 * len(TEST_EPSILONS)
    assert {(r["mechanism"], r["epsilon"]) for r in rows if r["type"] != "histogram"} == {
        (m, e) for m in MECHANISMS for e in TEST_EPSILONS
    }
    histograms = [r["mechanism"] for r in rows if r["type"] == "histogram"]
    assert len(histograms) == len(TEST_EPSILONS) and set(histograms) <= {"krr", "oue", "olh"}
    assert [r["verdict"] for r in rows] == ["pass"] * len(rows), [r["message"] for r in rows]
    for r in rows:  # the default budget spread over 2 inputs (boolean) or 5 (every other)
        inputs = 2 if r["type"] == "boolean" else 5
        assert r["inputs"].startswith(f"every pair of {inputs}:"), r["inputs"]
        assert r["samples"] == DEFAULT_REPORTS // inputs and r["confidence"] == 0.99
    assert document["summary"] == {"pass": len(rows), "loose": 0, "fail": 0}
    assert document["seed"] == SWEEP_SEED and document["failed"] is False
    print(f"sweep: {len(rows)} audits in {wall:.1f} s wall ({document['seconds']:.1f} s audit)")


def test_every_registered_metric_gets_one_row(
    collector: RunningCollector, registered: list[MetricSpec]
) -> None:
    at = ("--collector", collector.url)
    result = run(*at, "audit", "--samples", "3000", "--seed", "5", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]
    assert sorted(r["metric"] for r in rows) == sorted(s.name for s in registered)
    assert all(r["samples"] == 3000 for r in rows)  # --samples is per input
    by_name = {r["metric"]: r for r in rows}
    for spec in registered:
        assert (by_name[spec.name]["mechanism"], by_name[spec.name]["epsilon"]) == (
            spec.mechanism,
            spec.epsilon,
        )
        assert by_name[spec.name]["verdict"] == "pass"
    named = run(
        *at, "audit", "load_ms", "dark_mode", "--samples", "3000", "--seed", "5", "--jobs", "1"
    )
    assert named.exit_code == 0, named.output
    table = named.stdout
    assert "load_ms" in table and "dark_mode" in table and "browser" not in table
    assert "2 metric(s) audited" in table


def test_a_broken_randomizer_fails_the_audit_with_exit_status_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def too_truthful(self: BRR, value: int, rng: Randomness) -> int:
        value = self.check_value(value)
        return value if rng.random() < self.p + 0.01 else 1 - value

    monkeypatch.setattr(BRR, "randomize", too_truthful)
    result = run("audit", "--spec", BOOLEAN, "--seed", "3")
    assert result.exit_code == 1, result.output
    assert "fail" in result.stdout and "leaks more than it claims" in result.stdout
    assert result.stderr.startswith("audit failed: dark_mode")


def test_a_spec_file_is_audited_without_a_collector(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(BOOLEAN)
    result = run("audit", "--spec", f"@{path}", "--samples", "2000", "--seed", "2")
    assert result.exit_code == 0, result.output
    assert "dark_mode" in result.stdout and "1 metric(s) audited" in result.stdout
    missing = run("audit", "--spec", f"@{tmp_path / 'none.json'}")
    assert one_line_error(missing).startswith("error: no such file")


def test_bad_input_is_one_line_on_stderr(collector: RunningCollector) -> None:
    unknown = run("--collector", collector.url, "audit", "no_such_metric")
    assert "unknown metric 'no_such_metric'" in one_line_error(unknown)
    malformed = run("audit", "--spec", BOOLEAN[:-1])
    assert one_line_error(malformed).startswith("error: --spec is not valid JSON")
    invalid = run("audit", "--spec", BOOLEAN.replace("1}", "99}"))
    assert "epsilon must be at most 20" in one_line_error(invalid)
    both = run("audit", "dark_mode", "--all-mechanisms")
    assert both.exit_code == 2 and "Traceback" not in both.output
    epsilons = run("audit", "--all-mechanisms", "--epsilons", "1,x")
    assert epsilons.exit_code == 2 and "'x' is not a number" in epsilons.stderr


def test_an_unreachable_collector_is_one_line() -> None:
    result = run("--collector", loopback_url(spare_port()), "audit")
    assert "cannot reach the collector" in one_line_error(result)


USED = (
    '{"name": "used", "type": "boolean", "epsilon": 1, "events": {"aggregate": "any", "window": 7}}'
)
"""An event metric: 7-day actives, each report one window of the device's events."""


def test_an_event_metric_is_audited_through_its_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    honest = run("audit", "--spec", USED, "--samples", "20000", "--seed", "2", "--format", "json")
    assert honest.exit_code == 0, honest.output
    (result,) = json.loads(honest.stdout)["results"]
    assert result["metric"] == "used" and result["verdict"] == "pass", result

    def as_for_twice_eps(self: BRR, value: int, rng: Randomness) -> int:
        value = self.check_value(value)
        return value if rng.random() < 0.88 else 1 - value  # e^2 / (e^2 + 1)

    monkeypatch.setattr(BRR, "randomize", as_for_twice_eps)
    dishonest = run("audit", "--spec", USED, "--samples", "20000", "--seed", "2")
    assert dishonest.exit_code == 1, dishonest.output
    assert dishonest.stderr.startswith("audit failed: used")


def test_the_js_sampler_refuses_an_event_metric_rather_than_audit_record() -> None:
    from deniable.cli.jsreports import js_reports
    from deniable.client.errors import InvalidInput

    spec = MetricSpec.boolean("used", epsilon=1).with_events("any", window=7)
    with pytest.raises(InvalidInput, match="window path"):
        js_reports(spec, True, 10)
