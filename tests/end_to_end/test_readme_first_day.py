"""The README as a new user reads it (issue 41): the heavy-hitter pitch carries the floor table
(the project's own planner computes every figure, and the printed command prints them) and what a
shuffler does to it; ``pip install deniable`` lists the real dependencies; the quick start shows
``--port``, and its ``deniable serve --port`` command starts a collector on that port."""

from __future__ import annotations

import re
import signal
import subprocess
import time
import tomllib
from pathlib import Path

import httpx
from click.testing import CliRunner

from deniable.cli.main import cli
from deniable.client.guarantees import PureDP
from deniable.client.mechanisms import PrefixSketch
from deniable.estimators.heavyhitters import floor_plan
from deniable.estimators.shuffling import amplify
from testkit import loopback_url, spare_port
from testkit.service_process import DENIABLE, inherited_environment

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
COMMAND = "deniable plan --text --max-length 16 --epsilon 4 --reports 3000"


def words(text: str) -> str:
    return " ".join(text.split())


def test_the_floor_table_is_the_planners_and_its_command_prints_it() -> None:
    assert COMMAND in words(README)
    rows = dict(re.findall(r"^\| ([\d,]+) \| ([\d.]+)%", README, flags=re.M))
    document = floor_plan(PrefixSketch(16, 4.0), reports=3000)
    floors = {f"{row['reports']:,}": row["t95"] for row in document["floors"]}  # type: ignore[index, union-attr]
    assert set(rows) == {"3,000", "10,000", "100,000", "1,000,000"}
    for reports, shown in rows.items():
        assert shown == f"{floors[reports]:.2%}".rstrip("%"), reports
    assert "20.94% (about 21%)" in README and "10.25% (about 10%)" in README
    printed = CliRunner(env={"COLUMNS": "100"}).invoke(cli, COMMAND.split()[1:])
    assert printed.exit_code == 0, printed.output
    for reports, shown in rows.items():
        assert re.search(rf"{reports}\s*│\s*{re.escape(shown)}%", printed.output), printed.output


def test_the_pitch_says_what_a_shuffler_does_to_the_floor() -> None:
    text = words(README)
    assert "A shuffler does not lower the floor either" in text
    for batch, shown in ((10_000, "0.60"), (100_000, "0.17")):
        assert f"{amplify(PureDP(4.0), batch).epsilon:.2f}" == shown
        assert f"central ε of about {shown}" in text or f"and {shown} in batches" in text, shown
    assert "against the shuffler itself the local ε 4 still holds" in text


def test_pip_install_lists_the_real_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=\[ ]", dep)[0] for dep in project["dependencies"]]
    sentence = words(README[README.index("Only the SDK, for an app") :].split("\n\n")[0])
    assert "standard library and httpx only" not in sentence
    count = {1: "one", 2: "two", 3: "three"}.get(len(names), str(len(names)))
    assert f"its {count} dependencies" in sentence
    for name in names:
        assert name in sentence, name


def test_the_quick_start_shows_port_and_its_serve_command_listens_there(tmp_path: Path) -> None:
    quick = README[README.index("## Quick start") : README.index("Run the whole test suite")]
    assert "--port" in quick
    (command,) = [
        line
        for block in re.findall(r"```sh\n(.*?)```", quick, flags=re.S)
        for line in block.splitlines()
        if "deniable serve --port" in line
    ]
    shown = re.search(r"--port (\d+)", command)
    assert shown is not None and f"http://127.0.0.1:{shown.group(1)}" in quick
    port = spare_port()
    args = command.replace(".venv/bin/deniable", "").split()
    args[args.index("--port") + 1] = str(port)
    server = subprocess.Popen(
        [*DENIABLE, *args],
        cwd=tmp_path,
        env=inherited_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(loopback_url(port) + "/healthz", trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
    finally:
        server.send_signal(signal.SIGTERM)
        output = server.communicate(timeout=30)[0]
    assert f"deniable collector on {loopback_url(port)}" in output
    assert (tmp_path / "collector.db").exists()
