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
    intervals_option,
    method_option,
    pass_global_options,
    pooling_option,
    range_options,
)
from ..periods import resolve_range
from ..render import SERIES_TOP, print_estimate, print_series
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
@intervals_option
@from_file_options
@format_option()
@pass_global_options
def estimate(global_options: GlobalOptions, name: str, fmt: str, **query: Any) -> None:
    """Estimate each category's share of a metric over a range of periods.

    The table is sorted by estimate and draws each interval as a whisker over the bar. By
    default the estimates are consistent (non-negative, summing to 100%) and the intervals
    simultaneous (they hold for every category shown at once).

    \b
    Examples:
      deniable estimate browser --start 2026-11-01 --end 2026-11-21
      deniable estimate dark_mode --last 7
      deniable estimate dark_mode --start 2026-11-16 --end 2026-11-22 --per-category --format json
      deniable estimate browser --from-file browser.parquet --method mle
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
    help="Chart only this category (repeatable; default: the --top largest, or just 'true' for"
    " a boolean).",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    metavar="N",
    help=f"Chart (or write as CSV) the N largest categories by estimate over the range"
    f" (default: all, at most {SERIES_TOP} in a chart).",
)
@intervals_option
@from_file_options
@format_option()
@pass_global_options
def series(
    global_options: GlobalOptions,
    name: str,
    fmt: str,
    categories: tuple[str, ...],
    top: int | None,
    **query: Any,
) -> None:
    """One estimate per period, drawn as charts on one axis: the dot is the estimate, ├─┤ its
    interval.

    \b
    Examples:
      deniable series dark_mode --last 14
      deniable series browser --category chrome --category safari --format csv
      deniable series browser --from-file browser.parquet --top 5
      deniable series browser --last 7 --per-category
    """
    document = fetch_document(global_options, "series", name, **query)
    print_series(document, fmt, categories or None, top)
