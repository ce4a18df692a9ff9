"""The one CSV writer (``deniable.estimators.csvtext``): formula-leading text is neutralized,
numbers stay numbers, and CR or LF in a cell never splits a row (docs/security.md)."""

from __future__ import annotations

import csv
import io

import pytest

from deniable.estimators.csvtext import FORMULA_LEADS, csv_cell, write_csv

HOSTILE = ["=cmd|' /C calc'!A0", "+1+2", "-2+3", "@SUM(1+1)", "\tlead", "\rlead", "a\rb", "c\nd"]


@pytest.mark.parametrize("label", ["=1", "+x", "-x", "@x", "\tx", "\rx"])
def test_each_formula_lead_gets_a_quote(label: str) -> None:
    assert label[0] in FORMULA_LEADS
    assert csv_cell(label) == "'" + label


@pytest.mark.parametrize("value", [-1, -2.5, 0.0, 3, "-1.5", "+2", "-1e-05", "plain", "a=b", ""])
def test_numbers_and_harmless_text_are_kept(value: object) -> None:
    assert csv_cell(value) == value


def test_none_is_an_empty_cell() -> None:
    assert csv_cell(None) == ""


def test_rows_read_back_whole_with_every_label_neutralized() -> None:
    out = io.StringIO()
    rows = [[label, -0.25, None] for label in HOSTILE]
    write_csv(out, ["category", "frequency", "ci_low"], rows)
    back = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert back[0] == ["category", "frequency", "ci_low"]
    assert len(back) == len(HOSTILE) + 1 and all(len(row) == 3 for row in back)
    for label, row in zip(HOSTILE, back[1:], strict=True):
        expected = "'" + label if label.startswith(FORMULA_LEADS) else label
        assert row == [expected, "-0.25", ""]
