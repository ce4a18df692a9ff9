"""A progress bar on stderr, so that stdout stays clean for --format json and csv."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def progress_bar(transient: bool = True) -> Progress:
    """A rich progress bar writing to stderr; it draws only on a terminal (elsewhere it writes
    nothing at all, so a pipe's stderr holds only messages)."""
    stderr = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=transient,
        disable=not stderr.is_terminal,
    )
