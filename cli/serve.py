"""``deniable serve``: run the collector with uvicorn; environment variables mirror the flags."""

from __future__ import annotations

import click
from deniable.collector import DEFAULT_PORT

from .errors import CliError


def warn_about_visible_secrets(context: click.Context, names: tuple[str, ...]) -> None:
    """Warn on stderr for each secret given as a flag: any user of the host sees it in ``ps``."""
    for name in names:
        if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            flag = "--" + name.replace("_", "-")
            click.echo(
                f"warning: {flag} is visible to every user of this host (ps, /proc);"
                f" prefer {flag}-file or the environment variable DENIABLE_{name.upper()}",
                err=True,
            )


@click.command(short_help="Run the collector.")
@click.option(
    "--host",
    envvar="DENIABLE_HOST",
    default="127.0.0.1",
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
@click.option(
    "--database",
    envvar="DENIABLE_DATABASE_URL",
    metavar="URL",
    help="sqlite:///deniable.db (default) or postgresql://... (env DENIABLE_DATABASE_URL).",
)
@click.option(
    "--pool-size",
    envvar="DENIABLE_POOL_SIZE",
    type=click.IntRange(1, 1000),
    help="Most database connections each worker process holds (env DENIABLE_POOL_SIZE, default 5).",
)
@click.option(
    "--admin-token",
    envvar="DENIABLE_ADMIN_TOKEN",
    metavar="TOKEN",
    help="Token for admin calls (env DENIABLE_ADMIN_TOKEN).",
)
@click.option(
    "--admin-token-file",
    envvar="DENIABLE_ADMIN_TOKEN_FILE",
    type=click.Path(dir_okay=False),
    help="File holding the admin token, e.g. a mounted secret (env DENIABLE_ADMIN_TOKEN_FILE).",
)
@click.option(
    "--ingest-key",
    envvar="DENIABLE_INGEST_KEY",
    metavar="KEY",
    help="Key devices must send with reports (env DENIABLE_INGEST_KEY).",
)
@click.option(
    "--ingest-key-file",
    envvar="DENIABLE_INGEST_KEY_FILE",
    type=click.Path(dir_okay=False),
    help="File holding the ingest key (env DENIABLE_INGEST_KEY_FILE).",
)
@click.option(
    "--retention-days",
    envvar="DENIABLE_RETENTION_DAYS",
    type=click.IntRange(min=1),
    help="Days raw reports are kept, and how late they may arrive (env DENIABLE_RETENTION_DAYS, default 90).",
)
@click.option(
    "--workers",
    envvar="DENIABLE_WORKERS",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="uvicorn worker processes (env DENIABLE_WORKERS).",
)
@click.option(
    "--shutdown-timeout",
    envvar="DENIABLE_SHUTDOWN_TIMEOUT",
    type=click.IntRange(1, 3600),
    metavar="SECONDS",
    help="Seconds in-flight requests get after SIGTERM (env DENIABLE_SHUTDOWN_TIMEOUT, default 25).",
)
@click.option(
    "--log-level",
    envvar="DENIABLE_LOG_LEVEL",
    type=click.Choice(("critical", "error", "warning", "info", "debug")),
    default="info",
    show_default=True,
)
def serve(
    host: str,
    port: int,
    database: str | None,
    pool_size: int | None,
    admin_token: str | None,
    admin_token_file: str | None,
    ingest_key: str | None,
    ingest_key_file: str | None,
    retention_days: int | None,
    workers: int,
    shutdown_timeout: int | None,
    log_level: str,
) -> None:
    """Run the collector (FastAPI under uvicorn) until interrupted.

    The previous admin token and ingest key of a rotation come from the environment only
    (DENIABLE_ADMIN_TOKEN_PREVIOUS, DENIABLE_INGEST_KEY_PREVIOUS), like every other setting.

    \b
    Examples:
      deniable serve
      deniable serve --host 0.0.0.0 --port 8080 --admin-token "$TOKEN" \\
          --database postgresql://deniable@db/deniable --workers 4
    """
    from deniable.collector.serve import RefusedToServe
    from deniable.collector.serve import serve as run
    from deniable.collector.settings import Settings, settings_problem
    from pydantic import ValidationError

    warn_about_visible_secrets(click.get_current_context(), ("admin_token", "ingest_key"))
    values: dict[str, object] = {}
    if database is not None:
        values["database_url"] = database
    if pool_size is not None:
        values["pool_size"] = pool_size
    if admin_token:
        values["admin_token"] = admin_token
    if ingest_key:
        values["ingest_key"] = ingest_key
    if admin_token_file:
        values["admin_token_file"] = admin_token_file
    if ingest_key_file:
        values["ingest_key_file"] = ingest_key_file
    if retention_days is not None:
        values["retention_days"] = retention_days
    if shutdown_timeout is not None:
        values["shutdown_timeout"] = shutdown_timeout
    try:
        settings = Settings(**values)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise CliError(settings_problem(exc)) from None
    try:
        run(settings, host=host, port=port, workers=workers, log_level=log_level)
    except RefusedToServe as exc:
        raise CliError(str(exc)) from None
