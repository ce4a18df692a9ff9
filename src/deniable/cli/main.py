"""The ``deniable`` command: a click group with the global options and the error policy.

Every failure meant for the user (a :class:`~deniable.client.errors.DeniableError`, an
unreachable host, a missing file) ends as one line on stderr with exit status 1 (usage errors
exit 2, as click does). Anything else is a bug and says so, as an internal error. Nobody sees
a traceback unless DENIABLE_DEBUG=1 asks for it.
"""

from __future__ import annotations

import errno
import importlib.metadata
import logging
import os
from typing import Any

import click

from deniable.client.errors import DeniableError

from .api import DEFAULT_COLLECTOR_URL
from .commands import COMMANDS
from .errors import CliError
from .options import GlobalOptions


def _as_cli_error(exc: Exception) -> CliError:
    """The one line the user sees for an exception escaping a command, chosen by its type."""
    import httpx

    if isinstance(exc, DeniableError):
        return CliError(str(exc) or type(exc).__name__)
    if isinstance(exc, httpx.HTTPError):
        return CliError(f"HTTP error: {exc}")
    if isinstance(exc, FileNotFoundError):
        return CliError(f"no such file: {exc.filename}")
    if isinstance(exc, PermissionError):
        return CliError(f"permission denied: {exc.filename}")
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return CliError(f"{where}{exc.strerror or exc}")
    return CliError(
        f"internal error: {type(exc).__name__}: {exc} (set DENIABLE_DEBUG=1 to see the traceback)"
    )


class DeniableGroup(click.Group):
    """A click group whose commands never show a traceback for an expected failure."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; report what escapes it as one line (see :func:`_as_cli_error`)."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, click.ClickException):
            raise
        except Exception as exc:
            broken_pipe = isinstance(exc, OSError) and exc.errno == errno.EPIPE
            if broken_pipe or os.environ.get("DENIABLE_DEBUG"):
                raise
            raise _as_cli_error(exc) from None


def quiet_sdk_log() -> None:
    """Keep the SDK's log lines (``simulate`` and ``demo`` run it in process) off stderr unless
    a handler is configured: the command reports the outcome in its own one line, and Python's
    last-resort handler would print every SDK warning before it."""
    sdk = logging.getLogger("deniable.client")
    if not any(isinstance(handler, logging.NullHandler) for handler in sdk.handlers):
        sdk.addHandler(logging.NullHandler())


def _version() -> str:
    """The installed distribution's version, or ``unknown`` when run from a source tree."""
    try:
        return importlib.metadata.version("deniable")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@click.group(cls=DeniableGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--collector",
    envvar="DENIABLE_COLLECTOR_URL",
    default=DEFAULT_COLLECTOR_URL,
    show_default=True,
    metavar="URL",
    help="The collector to talk to (env DENIABLE_COLLECTOR_URL).",
)
@click.option(
    "--token",
    envvar=["DENIABLE_ADMIN_TOKEN", "DENIABLE_VIEWER_TOKEN"],
    metavar="TOKEN",
    help="The collector's viewer token, which reads (estimate, series, privacy), or its admin"
    " token, which also registers and archives metrics, exports and deletes reports"
    " (env DENIABLE_ADMIN_TOKEN, else DENIABLE_VIEWER_TOKEN).",
)
@click.version_option(_version(), prog_name="deniable")
@click.pass_context
def cli(ctx: click.Context, collector: str, token: str | None) -> None:
    """deniable: local-differential-privacy telemetry.

    Devices randomize every value before it leaves them; the collector stores only
    randomized reports; these commands turn them into population shares with honest
    confidence intervals.

    \b
    Example, with nothing set up:
      deniable demo
    Against a running collector, reading with its viewer token:
      deniable --collector http://127.0.0.1:8000 --token $VIEWER_TOKEN estimate browser
    """
    quiet_sdk_log()
    ctx.obj = GlobalOptions(collector_url=collector, token=token)


for _command in COMMANDS:
    cli.add_command(_command)

if __name__ == "__main__":
    cli()
