"""``deniable migrate``: bring the collector's database schema up to date, then exit."""

from __future__ import annotations

import click


@click.command(short_help="Apply the collector's database migrations.")
@click.option(
    "--database",
    envvar="DENIABLE_DATABASE_URL",
    metavar="URL",
    help="sqlite:///FILE or postgresql://... (env DENIABLE_DATABASE_URL; default sqlite:///deniable.db).",
)
def migrate(database: str | None) -> None:
    """Apply the collector's schema migrations (safe to run from several hosts at once).

    Run it once before starting replicated collectors with DENIABLE_MIGRATE_ON_START=false.

    \b
    Example:
      DENIABLE_DATABASE_URL=postgresql://deniable@db/deniable deniable migrate
    """
    from deniable.collector.settings import Settings
    from deniable.collector.storage import migrate as run

    run(database or Settings().database_url)
    click.echo("database schema is up to date", err=True)
