"""CSV as every document is written for people's spreadsheets: the CLI's ``--format csv`` and
the dashboard's downloads both write through :func:`write_csv` (docs/security.md).

Category labels are chosen by whoever registers a metric, so a cell may read
``=cmd|' /C calc'!A0``: a spreadsheet opening the file would run it as a formula (CSV formula
injection, OWASP). A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return gets a leading ``'``, which spreadsheets show as text and never evaluate; numbers (and
text that is a plain number, such as ``-1.5``) stay as they are, so they stay numbers. Rows end
in CRLF (RFC 4180), so the csv module quotes any cell holding a CR or LF and a label can never
split a row.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
"""The first characters that make a spreadsheet read a cell as a formula (OWASP's list)."""

PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
"""Text that is only a number, which no spreadsheet evaluates as a formula."""


def csv_cell(value: Any) -> Any:
    """A value as a safe CSV cell: None empty, formula-leading text behind a ``'``, the rest as
    it is."""
    if value is None:
        return ""
    formula = isinstance(value, str) and value.startswith(FORMULA_LEADS)
    return "'" + value if formula and not PLAIN_NUMBER.fullmatch(value) else value


def write_csv(stream: TextIO, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Write ``header`` and ``rows`` to ``stream`` as CSV, every cell through :func:`csv_cell`."""
    writer = csv.writer(stream, lineterminator="\r\n")
    writer.writerow([csv_cell(name) for name in header])
    for row in rows:
        writer.writerow([csv_cell(value) for value in row])
