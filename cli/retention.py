"""``deniable retention``: delete raw reports of periods before a date, on the collector."""

from __future__ import annotations

import datetime as dt

import click

from .options import Settings, pass_settings
from .render import print_json


def _date(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date like 2026-08-01", ctx, param) from None


@click.command(short_help="Delete expired raw reports on the collector.")
@click.option(
    "--before",
    callback=_date,
    metavar="DATE",
    help="Delete raw reports of periods entirely before this UTC date (YYYY-MM-DD);"
    " default: today minus the collector's retention window.",
)
@click.option(
    "--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True
)
@pass_settings
def retention(settings: Settings, before: str | None, fmt: str) -> None:
    """Delete expired raw reports on the collector (needs the admin token).

    Only reports older than the retention window (DENIABLE_RETENTION_DAYS) can go: later
    periods still accept reports. The per-period counts stay, so estimates over deleted
    periods still work; only export and the report-level mle of those periods are lost.
    Safe to run daily from cron.

    \b
    Examples:
      deniable retention
      deniable retention --before 2026-08-01 --format json
    """
    with settings.api() as api:
        result = api.retention(before)
    if fmt == "json":
        print_json(result)
        return
    click.echo(
        f"deleted {result.get('deleted', 0):,} raw report(s) of periods before {result.get('before', before)}"
    )
