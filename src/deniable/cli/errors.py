"""How the CLI shows a failure to a user: a single line on stderr, exit status 1.

Commands and the helpers they call raise the :class:`~deniable.client.errors.DeniableError`
family for failures meant for the user; ``main`` wraps those in :class:`CliError`, the click
exception that prints them. :func:`one_line` folds any multi-line message so that the user
never sees more than one line, and :func:`storage_errors` turns a database driver's failure
into :class:`~deniable.client.errors.StorageUnavailable`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click

from deniable.client.errors import StorageUnavailable

DRIVER_MESSAGE_CHARS = 300
"""How much of a database driver's message a user sees (the rest is rarely more than SQL)."""


def one_line(message: str) -> str:
    """Collapse whitespace and line breaks so a message fits on one line."""
    return " ".join(str(message).split())


class CliError(click.ClickException):
    """A failure shown to the user: printed as ``error: ...``, exit status 1."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        """Keep ``message`` on one line."""
        super().__init__(one_line(message))

    def show(self, file: IO[Any] | None = None) -> None:
        """Print the message as one line on stderr."""
        click.echo(f"error: {self.format_message()}", err=True, file=file)


@contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Raise :class:`StorageUnavailable` ``"<what>: <driver error>"`` for a database failure
    inside the block (the driver's own exception and message, never the SQL statement)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        detail = str(reason)[:DRIVER_MESSAGE_CHARS]
        raise StorageUnavailable(f"{what}: {type(reason).__name__}: {detail}") from None
