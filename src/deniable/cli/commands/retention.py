"""``deniable retention``: drop raw reports of periods before a date, on the collector, or
archive them to Parquet first, straight from its database (``--archive-to``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from deniable.client.errors import DeniableError, InvalidInput

from ..errors import storage_errors
from ..options import DATE, GlobalOptions, format_option, pass_global_options
from ..render import print_json
from ..settings_options import settings_from_command_line, settings_option


@click.command(short_help="Delete (or archive, then delete) expired raw reports.")
@click.option(
    "--before",
    type=DATE,
    help="Delete raw reports of periods entirely before this UTC date (YYYY-MM-DD);"
    " default: today minus the collector's retention window.",
)
@click.option(
    "--archive-to",
    "archive_to",
    metavar="URL",
    help="First archive those raw reports to Parquet at URL (a directory, file://..., or"
    " s3://bucket/prefix with deniable[s3]), verify each (metric, period) read back, and only"
    " then drop them; reads the database directly (--database), not the collector's API."
    " Resumable: run it again after an interruption.",
)
@settings_option("database_url", "--database", metavar="URL")
@format_option("table", "json")
@pass_global_options
@click.pass_context
def retention(
    context: click.Context,
    global_options: GlobalOptions,
    before: dt.date | None,
    archive_to: str | None,
    database_url: str,
    fmt: str,
) -> None:
    """Delete expired raw reports (needs the admin token), or with --archive-to archive them to
    Parquet, verify, then drop them (needs the database URL).

    Only reports older than the retention window (DENIABLE_RETENTION_DAYS) can go: later
    periods still accept reports. The per-period counts stay, so estimates over those
    periods still work, from the database, forever; an archive keeps the raw reports for
    re-analysis (`deniable estimate NAME --from-archive URL`). Safe to run daily from cron.

    Not to be confused with `deniable metrics archive NAME`, which retires a metric (it stops
    taking reports); this command moves old raw reports of every metric out of the database.

    \b
    Examples:
      deniable retention
      deniable retention --before 2026-08-01 --format json
      deniable retention --archive-to s3://telemetry-archive/deniable --database postgresql://...
      deniable retention --archive-to /var/lib/deniable/archive --database sqlite:///deniable.db
    """
    if archive_to is not None:
        settings = settings_from_command_line(context)
        result = archive_expired(
            settings.database_url, archive_to, before, settings.retention_days, fmt
        )
        if fmt == "json":
            print_json(result)
        return
    with global_options.api() as api:
        result = api.retention(before.isoformat() if before else None)
    if fmt == "json":
        print_json(result)
        return
    click.echo(
        f"deleted {result.get('deleted', 0):,} raw report(s) of periods before {result.get('before', before)}"
    )


def _open_archive(url: str) -> Any:
    """The archive at ``url``; a one-line error naming the extra a missing package is in."""
    try:
        import pyarrow.parquet  # noqa: F401

        from deniable.collector.storage.archive import Archive

        return Archive(url)
    except ImportError as exc:
        raise InvalidInput(
            f"--archive-to {url} needs {exc.name or 'a package'}: pip install 'deniable[archive]'"
            " (and 'deniable[s3]' for s3:// URLs)"
        ) from None
    except DeniableError:
        raise
    except ValueError as exc:
        raise InvalidInput(f"--archive-to {url}: {exc}") from None


def archive_expired(
    database_url: str, url: str, before: dt.date | None, retention_days: int, fmt: str
) -> dict[str, Any]:
    """Archive, verify and drop the raw reports of periods before ``before`` (default and
    latest allowed: today minus ``retention_days``); the run's document."""
    from deniable.collector.storage import open_database
    from deniable.collector.storage.partitions import create_ahead
    from deniable.collector.storage.queries import list_specs
    from deniable.collector.storage.retention import retain

    today = dt.datetime.now(dt.UTC).date()
    cutoff = today - dt.timedelta(days=retention_days)
    if before is None:
        before = cutoff
    if before > cutoff:
        raise InvalidInput(
            f"--before must be on or before {cutoff.isoformat()} (today minus the"
            f" {retention_days}-day retention window): later periods still accept reports"
        )
    archive = _open_archive(url)

    def show(done: Any) -> None:
        if fmt != "json":
            state = "kept from an earlier run" if done.kept else "written"
            click.echo(
                f"archived {done.metric} {done.period}: {done.rows:,} report(s), {state}",
                err=True,
            )

    with storage_errors(f"cannot archive from {database_url}"):
        database = open_database(database_url, pool_size=1)
        try:
            specs = list_specs(database)
            run = retain(database, specs, before, archive=archive, progress=show)
            create_ahead(database, today)
        finally:
            database.dispose()
    if fmt != "json":
        click.echo(
            f"archived {sum(p.rows for p in run.archived):,} raw report(s) of"
            f" {len(run.archived):,} (metric, period) to {url} and dropped"
            f" {run.deleted:,} from the database (periods before {before.isoformat()})"
        )
    return {
        "before": before.isoformat(),
        "archive": url,
        "deleted": run.deleted,
        "archived": [
            {
                "metric": p.metric,
                "period": p.period,
                "rows": p.rows,
                "sha256": p.sha256,
                "kept": p.kept,
            }
            for p in run.archived
        ],
    }
