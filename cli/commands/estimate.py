"""``deniable estimate`` and ``deniable series``: population shares with their intervals.

``estimate`` pools a range of periods (or reads an exported file offline); ``series`` gives one
estimate per period and draws it as a small chart so that a trend is seen, not read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import click

from ..api import CollectorAPI
from ..options import (
    GlobalOptions,
    confidence_option,
    format_option,
    from_file_options,
    method_option,
    pass_global_options,
    pooling_option,
    range_options,
    simultaneous_option,
)
from ..periods import resolve_range
from ..render import print_estimate, print_series
from ..specs import spec_from_served


def online_range(
    api: CollectorAPI, name: str, start: str | None, end: str | None, last: int | None
) -> tuple[str | None, str | None]:
    """The range to ask for; with ``--last`` the metric's period kind decides the labels."""
    if last is None:
        return start, end
    return resolve_range(spec_from_served(api.get_metric(name)), start, end, last)


def fetch_document(
    global_options: GlobalOptions,
    kind: Literal["estimate", "series"],
    name: str,
    *,
    from_file: Path | None,
    spec_file: Path | None,
    start: str | None,
    end: str | None,
    last: int | None,
    **options: Any,
) -> dict[str, Any]:
    """The ``kind`` document: computed from ``from_file`` offline, else asked of the collector;
    ``options`` are the estimate's (confidence, method, pooling, simultaneous)."""
    if from_file is not None:
        from ..offline import file_document, load_reports

        reports = load_reports(name, from_file, spec_file, start, end, last)
        return file_document(kind, reports, **options)
    if spec_file is not None:
        raise click.UsageError("--spec goes with --from-file")
    with global_options.api() as api:
        start, end = online_range(api, name, start, end, last)
        ask = api.estimate if kind == "estimate" else api.series
        return ask(name, start=start, end=end, **options)


@click.command(short_help="Estimate a metric's shares with intervals over a range of periods.")
@click.argument("name")
@range_options
@confidence_option
@method_option
@pooling_option
@simultaneous_option
@from_file_options
@format_option()
@pass_global_options
def estimate(global_options: GlobalOptions, name: str, fmt: str, **query: Any) -> None:
    """Estimate each category's share of a metric over a range of periods.

    The table is sorted by estimate and draws each interval as a whisker over the bar.

    \b
    Examples:
      deniable estimate browser --start 2026-11-01 --end 2026-11-21
      deniable estimate dark_mode --last 7
      deniable estimate dark_mode --start 2026-11-16 --end 2026-11-22 --simultaneous --format json
      deniable estimate browser --from-file browser.parquet --method consistent
    """
    document = fetch_document(global_options, "estimate", name, **query)
    print_estimate(document, fmt)


@click.command(short_help="Estimate per period, drawn as a chart of intervals.")
@click.argument("name")
@range_options
@confidence_option
@method_option
@click.option(
    "--category",
    "categories",
    multiple=True,
    metavar="CATEGORY",
    help="Chart only this category (repeatable; default all, or just 'true' for a boolean).",
)
@simultaneous_option
@from_file_options
@format_option()
@pass_global_options
def series(
    global_options: GlobalOptions, name: str, fmt: str, categories: tuple[str, ...], **query: Any
) -> None:
    """One estimate per period, drawn as a chart: the dot is the estimate, ├─┤ its interval.

    \b
    Examples:
      deniable series dark_mode --last 14
      deniable series browser --category chrome --category safari --format csv
      deniable series browser --from-file browser.parquet
      deniable series browser --last 7 --simultaneous
    """
    document = fetch_document(global_options, "series", name, **query)
    print_series(document, fmt, categories or None)
