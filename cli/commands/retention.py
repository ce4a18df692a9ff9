"""``deniable retention``: delete raw reports of periods before a date, on the collector."""

from __future__ import annotations

import datetime as dt

import click

from ..options import DATE, GlobalOptions, format_option, pass_global_options
from ..render import print_json


@click.command(short_help="Delete expired raw reports on the collector.")
@click.option(
    "--before",
    type=DATE,
    help="Delete raw reports of periods entirely before this UTC date (YYYY-MM-DD);"
    " default: today minus the collector's retention window.",
)
@format_option("table", "json")
@pass_global_options
def retention(global_options: GlobalOptions, before: dt.date | None, fmt: str) -> None:
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
    with global_options.api() as api:
        result = api.retention(before.isoformat() if before else None)
    if fmt == "json":
        print_json(result)
        return
    click.echo(
        f"deleted {result.get('deleted', 0):,} raw report(s) of periods before {result.get('before', before)}"
    )
