"""The ``deniable`` command run in-process, for the CLI tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import click.testing
from click.testing import CliRunner

from deniable.cli.main import cli


def run_cli(*args: str, stdin: str | None = None) -> click.testing.Result:
    """``deniable ARGS`` through click's runner (stdout and stderr apart); an exception the
    command does not turn into an error line propagates, so a bug fails the test loudly."""
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


def simulated_truths(
    admin: Sequence[str], seeds: Mapping[str, int], devices: int
) -> dict[str, Any]:
    """``deniable simulate`` of ``devices`` devices for each metric with its seed (``admin``:
    the global options reaching the collector); every device must deliver. The truth each
    simulation reports, by metric."""
    truths = {}
    for name, seed in seeds.items():
        result = run_cli(
            *admin,
            "simulate",
            "--metric",
            name,
            "--clients",
            str(devices),
            "--seed",
            str(seed),
            "--format",
            "json",
        )
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert document["delivered"] == devices
        truths[name] = document["truth"]
    return truths
