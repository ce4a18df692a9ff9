"""``deniable serve``: run the collector with uvicorn, configured by its ``Settings``.

The settings flags are made from the collector's ``Settings`` fields (see
:mod:`deniable.cli.settings_options`), so their help and defaults are the collector's own; a
flag left out leaves the setting to its ``DENIABLE_*`` variable.
"""

from __future__ import annotations

import click

from deniable.collector import (
    DEFAULT_HOST,
    DEFAULT_LOG_LEVEL,
    DEFAULT_PORT,
    DEFAULT_WORKERS,
    LOG_LEVELS,
    Listening,
)

from ..settings_options import (
    settings_from_command_line,
    settings_option,
    warn_about_visible_secrets,
)


@click.command(short_help="Run the collector.")
@click.option(
    "--host",
    envvar="DENIABLE_HOST",
    default=DEFAULT_HOST,
    show_default=True,
    help="Address to listen on (env DENIABLE_HOST); a non-loopback address needs --admin-token.",
)
@click.option(
    "--port",
    envvar="DENIABLE_PORT",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port (env DENIABLE_PORT).",
)
@settings_option("database_url", "--database", metavar="URL")
@settings_option("pool_size", metavar="N")
@settings_option("admin_token", metavar="TOKEN")
@settings_option("admin_token_file", metavar="FILE")
@settings_option("viewer_token", metavar="TOKEN")
@settings_option("viewer_token_file", metavar="FILE")
@settings_option("ingest_key", metavar="KEY")
@settings_option("ingest_key_file", metavar="FILE")
@settings_option("retention_days", metavar="DAYS")
@click.option(
    "--workers",
    envvar="DENIABLE_WORKERS",
    type=click.IntRange(min=1),
    default=DEFAULT_WORKERS,
    show_default=True,
    help="uvicorn worker processes (env DENIABLE_WORKERS).",
)
@settings_option("shutdown_timeout", metavar="SECONDS")
@click.option(
    "--log-level",
    envvar="DENIABLE_LOG_LEVEL",
    type=click.Choice(LOG_LEVELS),
    default=DEFAULT_LOG_LEVEL,
    show_default=True,
    help="How much the collector logs (env DENIABLE_LOG_LEVEL).",
)
@click.pass_context
def serve(
    context: click.Context, host: str, port: int, workers: int, log_level: str, **_settings: object
) -> None:
    """Run the collector (FastAPI under uvicorn) until interrupted.

    Every other setting (the previous admin token and ingest key of a rotation, limits,
    timeouts) comes from its DENIABLE_* environment variable; see docs/operations.md.

    \b
    Examples:
      deniable serve
      DENIABLE_ADMIN_TOKEN_FILE=/run/secrets/admin deniable serve --host 0.0.0.0 \\
          --port 8080 --database postgresql://deniable@db/deniable --workers 4
    """
    from deniable.collector.serve import serve as run

    warn_about_visible_secrets(context)
    settings = settings_from_command_line(context)
    run(settings, Listening(host, port, workers, log_level))
