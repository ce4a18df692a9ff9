"""``deniable migrate``: bring the collector's database schema up to date, then exit."""

from __future__ import annotations

import click

from ..errors import storage_errors
from ..settings_options import settings_from_command_line, settings_option


@click.command(short_help="Apply the collector's database migrations.")
@settings_option("database_url", "--database", metavar="URL")
@click.pass_context
def migrate(context: click.Context, database_url: str) -> None:
    """Apply the collector's schema migrations (safe to run from several hosts at once).

    Run it once before starting replicated collectors with DENIABLE_MIGRATE_ON_START=false.

    \b
    Example:
      DENIABLE_DATABASE_URL=postgresql://deniable@db/deniable deniable migrate
    """
    from deniable.collector.storage import migrate as run

    settings = settings_from_command_line(context)
    with storage_errors("database error"):
        run(settings.database_url)
    click.echo("database schema is up to date", err=True)
