"""What a log line may say about a request that failed on the server: never an exception's text.

An exception's message can quote what a server must never log. A database error holds its
statement's parameters (the collector's engines hide them, see
``deniable.collector.storage.engine``) and, from PostgreSQL, a DETAIL line that quotes the
failing row: a report's id and payload. A Python error may quote the value it choked on. So a fault is logged as its exception chain's types, error
codes, SQL statements and stack frames, which name code only.
"""

from __future__ import annotations

import traceback

STATEMENT_CHARS = 300
"""How much of a failed SQL statement a log line shows (the statement, never its parameters)."""

WITHHELD = "Traceback (exception messages withheld: they may quote report data):\n"


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return chain


def _label(exc: BaseException) -> str:
    """The exception's type and, where it has them, its database error code, the table and
    constraint it concerns (PostgreSQL) and its SQL statement: names from the schema, no data."""
    label = f"{type(exc).__module__}.{type(exc).__qualname__}"
    code = getattr(exc, "sqlstate", None) or getattr(exc, "sqlite_errorname", None)
    if isinstance(code, str):
        label += f" [{code}]"
    diag = getattr(exc, "diag", None)
    for name in ("table_name", "constraint_name"):
        value = getattr(diag, name, None)
        if isinstance(value, str):
            label += f" {name.split('_')[0]} {value}"
    statement = getattr(exc, "statement", None)
    if isinstance(statement, str):
        label += f" in SQL: {' '.join(statement.split())[:STATEMENT_CHARS]}"
    return label


def redacted_traceback(exc: BaseException) -> str:
    """Where ``exc`` and its causes were raised and what they are, without their messages."""
    parts = ["".join(traceback.format_tb(e.__traceback__)) + _label(e) for e in _chain(exc)]
    return WITHHELD + "\nwhich was raised from or while handling:\n".join(parts)
