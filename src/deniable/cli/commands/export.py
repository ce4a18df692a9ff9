"""``deniable export``: a metric's raw randomized reports to Parquet or CSV, through polars.

Reports come from the collector's admin export endpoint or, with ``--database URL``, straight
from the collector's database (read-only, through its storage package's public queries). The
file is in the estimators' export format (:mod:`deniable.sources.reportfile`), and a
Parquet file carries the metric's spec in its metadata so ``estimate --from-file`` needs
nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import click

from deniable.sources.reportfile import FileFormat, file_format

from ..options import GlobalOptions, format_option, pass_global_options, stored_range_options
from ..progress import progress_bar

PAGE_SIZE = 10_000
"""Reports read per request or query."""


def output_format(output: Path, fmt: FileFormat | None) -> FileFormat:
    """The format to write: ``fmt`` if given, else the extension's, else Parquet.

    An explicit format that contradicts a known extension is a usage error, so that a
    ``.csv`` file never holds Parquet (or the reverse).
    """
    by_suffix = file_format(output)
    if fmt is None:
        return by_suffix or "parquet"
    if by_suffix is not None and by_suffix != fmt:
        raise click.UsageError(
            f"--format {fmt} does not match the extension of {output.name};"
            f" name the file *.{fmt} or drop --format"
        )
    return fmt


@click.command(short_help="Export raw randomized reports to Parquet or CSV.")
@click.argument("name")
@stored_range_options
@format_option(
    *get_args(FileFormat),
    default=None,
    help="parquet keeps the spec inside the file; csv is for other tools."
    " Default: from the extension (.parquet or .csv), else parquet.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    required=True,
    metavar="FILE",
    help="Where to write (replaced atomically when complete).",
)
@click.option(
    "--database",
    metavar="URL",
    help="Read the collector's database directly instead of asking the collector (read-only).",
)
@pass_global_options
def export(
    global_options: GlobalOptions,
    name: str,
    start: str | None,
    end: str | None,
    last: int | None,
    fmt: FileFormat | None,
    output: Path,
    database: str | None,
) -> None:
    """Export a metric's raw randomized reports (never a true value: there are none).

    Needs the admin token (the viewer token only reads estimates), unless --database reads
    the collector's database directly. Without --start, --end or --last, every stored
    report. For brr/krr the file also names each report's randomized category
    (reported_category) beside its index.

    \b
    Examples:
      deniable export browser --output browser.parquet
      deniable export browser --last 7 -o week.csv
      deniable export browser -o browser.parquet --database sqlite:///deniable.db
    """
    from deniable.sources.reportfile import frame_of, write_report_file

    from ..periods import resolve_range
    from ..reportsource import open_source

    fmt = output_format(output, fmt)
    with open_source(global_options, name, database) as source:
        spec = source.spec
        start, end = resolve_range(spec, start, end, last)
        total = source.count(start, end)
        frames = []
        with progress_bar() as bar:
            task = bar.add_task(f"{name}: reading reports", total=total)
            for page in source.pages(start, end, PAGE_SIZE):
                frames.append(frame_of(spec, page))
                bar.advance(task, len(page))
    rows = write_report_file(frames, spec, output, fmt)
    click.echo(f"wrote {rows:,} randomized report(s) of {name} to {output}", err=True)
