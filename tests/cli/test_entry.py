"""The ``deniable`` console script without the server extra (issue 25): ``pip install
deniable`` installs the SDK and the script, and the script must say in one line how to get
the CLI rather than crash with ``ModuleNotFoundError: click``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUN_SCRIPT = """
import importlib, sys
for name in sys.argv[2:]:
    sys.modules[name] = None  # as if not installed: importing it raises ModuleNotFoundError
module, _, function = sys.argv[1].partition(":")
sys.argv = ["deniable", "--help"]
getattr(importlib.import_module(module), function)()
"""
"""Run the console script's target (argv[1], ``module:function``) with the modules named
after it hidden."""


def console_script() -> str:
    """The ``deniable`` script's target as pyproject.toml declares it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["scripts"]["deniable"]


def run_script(*hidden: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_SCRIPT, console_script(), *hidden],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_without_the_server_extra_the_command_says_what_to_install() -> None:
    for hidden in (("click",), ("click", "rich", "numpy", "fastapi")):
        result = run_script(*hidden)
        assert result.returncode == 1, result
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert "pip install 'deniable[server]'" in lines[0] and "click" in lines[0]
        assert "Traceback" not in result.stderr


def test_with_the_server_extra_the_same_script_is_the_cli() -> None:
    result = run_script()
    assert result.returncode == 0, result.stderr
    assert "Usage: deniable" in result.stdout and "estimate" in result.stdout
