"""The one kind of failure the CLI reports to a user: a single line on stderr, exit status 1.

Commands raise :class:`CliError` for mistakes and unavailable services; :func:`one_line`
folds any multi-line message so that the user never sees more than one line.
"""

from __future__ import annotations

from typing import IO, Any

import click


def one_line(message: str) -> str:
    """Collapse whitespace and line breaks so a message fits on one line."""
    return " ".join(str(message).split())


class CliError(click.ClickException):
    """A user mistake or an unreachable collector: printed as ``error: ...``, exit status 1."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    def show(self, file: IO[Any] | None = None) -> None:
        """Print the message as one line on stderr."""
        click.echo(f"error: {self.format_message()}", err=True, file=file)
