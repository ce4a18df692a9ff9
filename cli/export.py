"""``deniable export``: a metric's raw randomized reports to Parquet or CSV, through polars.

Reports come from the collector's admin export endpoint or, with ``--database URL``, straight
from the collector's database (read-only, through its storage module). The file has the
agreed schema (id, metric, fingerprint, period, then ``payload`` or ``a``, ``b``, ``y``), and a
Parquet file carries the metric's spec in its metadata so ``estimate --from-file`` needs
nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from .options import Settings, pass_settings, range_options
from .progress import progress_bar

PAGE_SIZE = 10_000
"""Reports read per request or query."""

FORMATS_BY_SUFFIX = {".parquet": "parquet", ".csv": "csv"}
"""The file format each known extension names."""


def output_format(output: Path, fmt: str | None) -> str:
    """The format to write: ``fmt`` if given, else the extension's, else Parquet.

    An explicit format that contradicts a known extension is a usage error, so that a
    ``.csv`` file never holds Parquet (or the reverse).
    """
    by_suffix = FORMATS_BY_SUFFIX.get(output.suffix.lower())
    if fmt is None:
        return by_suffix or "parquet"
    if by_suffix is not None and by_suffix != fmt:
        raise click.UsageError(
            f"--format {fmt} does not match the extension of {output.name};"
            f" name the file *.{fmt} or drop --format"
        )
    return fmt


def _write(frames: list[Any], spec: Any, path: Path, fmt: str) -> int:
    """Write the collected pages in the agreed schema; returns the number of rows."""
    import polars as pl

    from .offline import SPEC_METADATA_KEY
    from .reportframe import empty_frame

    frame = pl.concat(frames, how="vertical") if frames else empty_frame(spec)
    tmp = path.with_name(path.name + ".partial")
    if fmt == "parquet":
        frame.write_parquet(tmp, metadata={SPEC_METADATA_KEY: json.dumps(spec.to_dict())})
    else:
        frame.write_csv(tmp)
    tmp.replace(path)
    return frame.height


@click.command(short_help="Export raw randomized reports to Parquet or CSV.")
@click.argument("name")
@range_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("parquet", "csv")),
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
@pass_settings
def export(
    settings: Settings,
    name: str,
    start: str | None,
    end: str | None,
    last: int | None,
    fmt: str | None,
    output: Path,
    database: str | None,
) -> None:
    """Export a metric's raw randomized reports (never a true value: there are none).

    \b
    Examples:
      deniable export browser --output browser.parquet
      deniable export browser --last 7 -o week.csv
      deniable export browser -o browser.parquet --database sqlite:///deniable.db
    """
    from .periods import resolve_range
    from .reportframe import frame_of
    from .reportsource import open_source

    fmt = output_format(output, fmt)
    with open_source(settings, name, database) as source:
        spec = source.spec
        start, end = resolve_range(spec, start, end, last)
        total = source.count(start, end)
        frames = []
        with progress_bar() as bar:
            task = bar.add_task(f"{name}: reading reports", total=total)
            for page in source.pages(start, end, PAGE_SIZE):
                frames.append(frame_of(spec, page))
                bar.advance(task, len(page))
    rows = _write(frames, spec, output, fmt)
    click.echo(f"wrote {rows:,} randomized report(s) of {name} to {output}", err=True)
