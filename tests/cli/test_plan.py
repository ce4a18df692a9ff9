"""``deniable plan`` never contradicts its own table (issue 14): the row it marks needs the
fewest reports (or gives the smallest margin) of every row, over a grid of (k, eps)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from deniable.cli.main import cli
from deniable.estimators.advisor import plan_document

KS = (2, 3, 8, 20, 100, 1000)
EPSILONS = (0.5, 1.0, 3.0, 8.0)


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
    """k=10, eps=1, ±1 point per category: krr has the least variance near f = 0 but needs
    more reports than oue in the worst case (the Wald plan said 318,306 and 179,884)."""
    args = ["plan", "--categories", "10", "--epsilon", "1", "--margin", "0.01", "--per-category"]
    document = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).stdout)
    needed = {r["mechanism"]: r["reports_needed"] for r in document["mechanisms"]}
    assert 170_000 < needed["oue"] < needed["krr"] < 320_000
    assert (document["advised"], document["auto"]) == ("oue", "krr")
    table = CliRunner().invoke(cli, args).stdout
    marked = next(line for line in table.splitlines() if "fewest reports" in line)
    assert "oue" in marked and f"{needed['oue']:,}" in marked
    assert "auto resolves to krr" in table.replace("\n", " ")


def test_the_default_plans_all_categories_at_once_as_the_estimates_show_them() -> None:
    """k = 5, eps 1, ±2 points (issue 23): the default answers for all categories at once,
    as the dashboard's Plan page does; --per-category answers for each alone, with fewer."""
    args = ["plan", "--categories", "5", "--epsilon", "1", "--margin", "0.02", "--format", "json"]
    default = json.loads(CliRunner().invoke(cli, args).stdout)
    alone = json.loads(CliRunner().invoke(cli, [*args, "--per-category"]).stdout)
    assert default == plan_document(
        5, 1.0, margin=0.02, reports=None, confidence=0.95, simultaneous=True
    )
    assert default["simultaneous"] and not alone["simultaneous"]
    for together, each in zip(default["mechanisms"], alone["mechanisms"], strict=True):
        assert together["reports_needed"] > 1.5 * each["reports_needed"]


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
    assert "bytes: the largest report" in table.stdout


def test_a_margin_is_in_percentage_points_singular_at_one_and_v_star_is_explained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 25: "±1 points", an unexplained "V* per report", titles wrapped mid-phrase."""
    monkeypatch.setenv("COLUMNS", "80")
    one = CliRunner().invoke(cli, ["plan", "--categories", "5", "--epsilon", "1", "--margin",
                                   "0.01"]).stdout  # fmt: skip
    lines = [line.rstrip() for line in one.splitlines()]
    assert "k=5 ε=1: reports needed for ±1 percentage point" in lines
    assert "points" not in one.replace("percentage point", "")
    assert all(len(line) <= 80 for line in lines), one
    assert "V* is the noise one report carries" in one
    prose = " ".join(line.strip() for line in lines)
    assert "with variance V*/n, so the smaller V*, the fewer reports a margin needs" in prose
    two = CliRunner().invoke(cli, ["plan", "--categories", "5", "--epsilon", "1", "--margin",
                                   "0.02"]).stdout  # fmt: skip
    assert "±2 percentage points" in two


SHUFFLED = ["plan", "--shuffled", "--categories", "10", "--central-epsilon", "0.5"]


def test_the_shuffled_plan_prints_the_advisors_document_and_both_margins() -> None:
    from deniable.estimators.advisor import shuffled_plan_document

    result = CliRunner().invoke(cli, [*SHUFFLED, "--batch", "20000", "--format", "json"])
    assert result.exit_code == 0, result.output
    expected = shuffled_plan_document(
        10, 0.5, batch=20_000, delta=1e-6, reports=None, confidence=0.95, simultaneous=True
    )
    assert json.loads(result.stdout) == json.loads(json.dumps(expected))
    table = CliRunner().invoke(cli, [*SHUFFLED, "--batch", "20000"])
    assert table.exit_code == 0, table.output
    for row in expected["mechanisms"]:
        assert f"±{row['margin'] * 100:.2f}" in table.stdout
        assert f"±{row['local_only_margin'] * 100:.2f}" in table.stdout
    assert "against the shuffler" in table.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["plan", "--shuffled", "--categories", "10"], "--central-epsilon"),
        (["plan", "--shuffled", "--central-epsilon", "0.5"], "--categories"),
        ([*SHUFFLED, "--epsilon", "1"], "--central-epsilon"),
        ([*SHUFFLED, "--margin", "0.01"], "--margin"),
        ([*SHUFFLED, "--batch", "1"], "--batch"),
        ([*SHUFFLED, "--delta", "0.5"], "--delta"),
        (
            [
                "plan",
                "--categories",
                "10",
                "--central-epsilon",
                "0.5",
                "--epsilon",
                "1",
                "--margin",
                "0.01",
            ],
            "--shuffled",
        ),
        (["plan", "--categories", "10", "--margin", "0.01"], "--epsilon"),
    ],
)
def test_shuffled_plan_usage_errors_name_the_option(args: list[str], words: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and words in result.output
