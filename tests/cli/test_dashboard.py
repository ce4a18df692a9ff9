"""``deniable dashboard`` and ``deniable demo --dashboard`` against real collectors."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner

from deniable.cli.main import cli
from testkit import DatabaseFactory, RunningCollector, collector_settings, spare_port

VIEWER = "viewer-token-for-cli-tests-1"


@pytest.fixture(scope="module")
def server(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector with a viewer token, in a thread."""
    running = RunningCollector(
        collector_settings(databases.new("sqlite"), viewer_token=VIEWER)
    ).start()
    yield running
    running.stop()


def test_no_open_prints_the_url_and_opens_nothing(
    server: RunningCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    for args in (
        ["--collector", server.url, "dashboard", "--no-open"],
        ["dashboard", "--collector", server.url + "/", "--no-open"],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert result.output.strip() == f"{server.url}/dashboard/"
    assert opened == []


def test_the_browser_opens_the_dashboard_without_a_token(
    server: RunningCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    result = CliRunner().invoke(
        cli, ["--collector", server.url, "--token", "admin-secret-for-tests", "dashboard"]
    )
    assert result.exit_code == 0, result.output
    assert opened == [f"{server.url}/dashboard/"]
    assert "secret" not in opened[0]


def test_an_unreachable_collector_is_one_line_on_stderr() -> None:
    url = f"http://127.0.0.1:{spare_port()}"
    result = CliRunner().invoke(cli, ["dashboard", "--collector", url, "--no-open"])
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no collector answers" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_demo_dashboard_serves_the_seeded_dashboard_until_interrupted() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "deniable.cli.main", "demo", "--dashboard", "--clients", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        found: dict[str, str] = {}
        deadline = time.monotonic() + 120
        while len(found) < 2 and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            if match := re.match(r"Dashboard: (\S+)", line):
                found["url"] = match.group(1)
            if match := re.match(r"Viewer token .*: (\S+)$", line.strip()):
                found["token"] = match.group(1)
        assert set(found) == {"url", "token"}, process.stderr.read() if process.stderr else ""
        base = found["url"].removesuffix("/dashboard/")
        with httpx.Client(base_url=base, trust_env=False, timeout=30) as browser:
            assert browser.get("/dashboard/").status_code == 303
            signed = browser.post("/dashboard/sign-in", data={"token": found["token"]})
            assert signed.status_code == 303
            overview = browser.get("/dashboard/")
        assert overview.status_code == 200
        for name in ("dark_mode", "browser", "load_ms", "load_hist"):
            assert f'<tr data-metric="{name}">' in overview.text
        viewer = {"Authorization": f"Bearer {found['token']}"}
        with httpx.Client(base_url=base, trust_env=False, timeout=30, headers=viewer) as api:
            week = api.get("/v1/metrics/dark_mode/series").json()["series"]
        assert len(week) == 7 and all(point["n"] > 0 for point in week), week
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def help_text(*command: str) -> str:
    """``deniable COMMAND --help``, its lines joined (click wraps them at any width)."""
    result = CliRunner().invoke(cli, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def test_the_help_says_which_token_does_what_as_the_collector_does(
    server: RunningCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: the dashboard's help said the admin token signs in (it is refused with 403);
    the global --token help said "Admin token for estimates" (the viewer token reads)."""
    from testkit import ADMIN_TOKEN

    dashboard_help = help_text("dashboard")
    assert "viewer token" in dashboard_help and "the admin token is refused" in dashboard_help
    with httpx.Client(base_url=server.url, trust_env=False) as browser:
        assert browser.post("/dashboard/sign-in", data={"token": ADMIN_TOKEN}).status_code == 403
        assert browser.post("/dashboard/sign-in", data={"token": VIEWER}).status_code == 303
    token_help = help_text().split("--token TOKEN")[1].split("--version")[0]
    assert "Admin token for estimates" not in token_help
    assert "viewer token, which reads" in token_help and "DENIABLE_VIEWER_TOKEN" in token_help
    monkeypatch.delenv("DENIABLE_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("DENIABLE_VIEWER_TOKEN", VIEWER)
    reads = CliRunner().invoke(cli, ["--collector", server.url, "privacy", "--format", "json"])
    assert reads.exit_code == 0, reads.output
    admin_help = help_text("serve").split("--admin-token TOKEN")[1].split("--admin-token-file")[0]
    assert "(estimates" not in admin_help and "never signs in to the dashboard" in admin_help
    viewer_help = (
        help_text("serve").split("--viewer-token TOKEN")[1].split("--viewer-token-file")[0]
    )
    assert "signs in to the dashboard" in viewer_help
