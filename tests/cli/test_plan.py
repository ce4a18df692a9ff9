"""``deniable plan`` never contradicts its own table (issue 14): the row it marks needs the
fewest reports (or gives the smallest margin) of every row, over a grid of (k, eps)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from deniable.cli.main import cli
from deniable.estimators.advisor import plan_document

KS = (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 32, 50, 64, 100, 200, 256, 500, 1000)
EPSILONS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)


@pytest.mark.parametrize("simultaneous", [False, True])
def test_the_marked_row_is_never_beaten_in_its_own_table(simultaneous: bool) -> None:
    for k in KS:
        for epsilon in EPSILONS:
            needed = plan_document(
                k, epsilon, margin=0.01, reports=None, confidence=0.95, simultaneous=simultaneous
            )
            rows = [r for r in needed["mechanisms"] if r["supported"] and r["reports_needed"]]
            marked = next(r for r in rows if r["mechanism"] == needed["advised"])
            assert all(marked["reports_needed"] <= r["reports_needed"] for r in rows), (k, epsilon)
            given = plan_document(
                k, epsilon, margin=None, reports=10_000, confidence=0.9, simultaneous=simultaneous
            )
            rows = [r for r in given["mechanisms"] if r["supported"]]
            best = next(r for r in rows if r["mechanism"] == given["advised"])
            assert all(best["margin"] <= r["margin"] for r in rows), (k, epsilon)


def test_the_reported_case_marks_oue_and_says_auto_differs() -> None:
    """k=10, eps=1, ±1 point: krr has the least variance near f = 0 but needs 318,306 reports
    in the worst case; oue needs 179,884."""
    args = ["plan", "--categories", "10", "--epsilon", "1", "--margin", "0.01"]
    document = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).stdout)
    needed = {r["mechanism"]: r["reports_needed"] for r in document["mechanisms"]}
    assert needed["krr"] == 318_306 and needed["oue"] == 179_884
    assert (document["advised"], document["auto"]) == ("oue", "krr")
    table = CliRunner().invoke(cli, args).stdout
    marked = next(line for line in table.splitlines() if "fewest reports" in line)
    assert "oue" in marked and "179,884" in marked
    assert "auto resolves to krr" in table.replace("\n", " ")


def test_the_table_shows_each_mechanisms_report_size() -> None:
    """At k = 1000 an OUE report carries k/8 bytes (base64 on the wire), OLH's a few dozen."""
    result = CliRunner().invoke(
        cli,
        ["plan", "--categories", "1000", "--epsilon", "1", "--margin", "0.01", "--format", "json"],
    )
    size = {r["mechanism"]: r["report_bytes"] for r in json.loads(result.stdout)["mechanisms"]}
    assert size["oue"] >= 1000 // 8 and size["olh"] < 64 and size["krr"] == len("999")
    table = CliRunner().invoke(
        cli, ["plan", "--categories", "1000", "--epsilon", "1", "--margin", "0.01"]
    )
    assert "bytes per report" in table.stdout
