"""``deniable estimate`` and ``deniable series``: population shares (or a numeric metric's
mean, a histogram's quantiles) with their intervals.

``estimate`` pools a range of periods (or reads an exported file offline); ``series`` gives one
estimate per period and draws it as a small chart so that a trend is seen, not read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import click

from deniable.client.errors import InvalidInput
from deniable.client.spec import MetricSpec

from ..kindrender import render_of
from ..options import (
    GlobalOptions,
    confidence_option,
    format_option,
    from_file_options,
    intervals_option,
    method_option,
    pass_global_options,
    pooling_option,
    quantiles_option,
    range_options,
)
from ..periods import resolve_range
from ..render import SERIES_TOP, console, print_estimate, print_facts
from ..slicerender import print_breakdown, print_changes, print_slice_series
from ..specs import spec_from_served


def online_range(
    spec: MetricSpec, start: str | None, end: str | None, last: int | None
) -> tuple[str | None, str | None]:
    """The range to ask for; with ``--last`` the metric's period kind decides the labels."""
    if last is None:
        return start, end
    return resolve_range(spec, start, end, last)


def options_for(spec: MetricSpec, options: dict[str, Any]) -> dict[str, Any]:
    """The estimate's options as ``spec``'s kind takes them (its render's ``options``): a
    numeric metric's mean takes no method (one given is refused) and no simultaneous; shares
    default to :data:`~deniable.estimators.DEFAULT_METHOD`; only a histogram takes quantiles
    and only a text metric candidates."""
    chosen = dict(options)
    quantiles = chosen.pop("quantiles", ())
    candidates = chosen.pop("candidates", ())
    render = render_of(spec)
    if quantiles and not render.quantiles:
        raise InvalidInput(f"--quantile is for histogram metrics; {spec.name} is {spec.type}")
    if candidates and not render.strings:
        raise InvalidInput(f"--candidate is for text metrics; {spec.name} is {spec.type}")
    render.options(spec, chosen, quantiles)
    if candidates:
        chosen["candidates"] = list(candidates)
    return chosen


def fetch_with_spec(
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
) -> tuple[MetricSpec, dict[str, Any]]:
    """The metric's spec and its ``kind`` document: computed from ``from_file`` offline, else asked of the collector;
    ``options`` are the estimate's (confidence, method, pooling, simultaneous, quantiles), as
    the metric's type takes them (:func:`options_for`)."""
    if from_file is not None:
        from ..offline import file_document, load_reports

        reports = load_reports(name, from_file, spec_file, start, end, last)
        render = render_of(reports.spec)
        if render.strings:
            raise InvalidInput(
                f"{name} is a text metric: its heavy hitters are decoded from the collector's"
                " counts; estimate it online (without --from-file)"
            )
        chosen = options_for(reports.spec, options)
        if render.mean:
            chosen["method"] = "unbiased"
        return reports.spec, file_document(kind, reports, **chosen)
    if spec_file is not None:
        raise click.UsageError("--spec goes with --from-file")
    with global_options.api() as api:
        spec = spec_from_served(api.get_metric(name))
        start, end = online_range(spec, start, end, last)
        chosen = options_for(spec, options)
        if "quantiles" in chosen:
            chosen["q"] = chosen.pop("quantiles")
        ask = api.estimate if kind == "estimate" else api.series
        return spec, ask(name, start=start, end=end, **chosen)


def fetch_document(
    global_options: GlobalOptions, kind: Literal["estimate", "series"], name: str, **options: Any
) -> dict[str, Any]:
    """The ``kind`` document of :func:`fetch_with_spec`, without the spec."""
    return fetch_with_spec(global_options, kind, name, **options)[1]


@click.command(short_help="Estimate a metric's shares with intervals over a range of periods.")
@click.argument("name")
@range_options
@confidence_option
@method_option
@pooling_option
@intervals_option
@quantiles_option
@click.option(
    "--candidate",
    "candidates",
    multiple=True,
    metavar="STRING",
    help="Text metrics: score this string instead of discovering (repeatable).",
)
@click.option(
    "--by",
    "by",
    multiple=True,
    metavar="DIMENSION",
    help="Break the estimate down by this dimension of the metric (repeatable, at most 2).",
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="NAME:VALUE",
    help="Keep only this value of a dimension, e.g. platform:ios (repeatable).",
)
@click.option(
    "--compare-to",
    "compare_to",
    metavar="previous|START..END",
    help="Show the change from this window to the range: each category's (or the mean's)"
    " difference with an interval valid whatever devices report in both, and a verdict"
    " (previous: as many periods just before the range).",
)
@from_file_options
@click.option(
    "--from-archive",
    "from_archive",
    metavar="URL",
    help="Re-analyse the Parquet archive that `retention --archive-to URL` wrote (a directory,"
    " file://, s3://...) instead of asking the collector; default range: every archived period.",
)
@click.option(
    "--engine",
    type=click.Choice(["duckdb", "dask"]),
    default="duckdb",
    show_default=True,
    help="With --from-archive: DuckDB in this process, or a Dask cluster (deniable[dask]).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="With --engine dask: the Dask scheduler, e.g. tcp://scheduler:8786 (default: a local"
    " cluster on this machine).",
)
@format_option()
@pass_global_options
def estimate(global_options: GlobalOptions, name: str, fmt: str, **query: Any) -> None:
    """Estimate each category's share of a metric over a range of periods, or a numeric
    metric's mean.

    The table is sorted by estimate and draws each interval as a whisker over the bar. By
    default the estimates are consistent (non-negative, summing to 100%) and the intervals
    simultaneous (they hold for every category shown at once). A numeric metric prints its
    mean ± margin and interval in the metric's units; a histogram its buckets' shares and
    intervals for its quantiles (--quantile). A text metric prints the strings found in one
    period (--end, default today) ranked by share with their intervals and the run's
    detection floor; --candidate scores listed strings instead.

    \b
    Examples:
      deniable estimate browser --start 2026-11-01 --end 2026-11-21
      deniable estimate dark_mode --last 7
      deniable estimate dark_mode --start 2026-11-16 --end 2026-11-22 --per-category --format json
      deniable estimate browser --from-file browser.parquet --method mle
      deniable estimate load_ms --last 7
      deniable estimate load_hist -q 0.5 -q 0.95
      deniable estimate search_term --end 2026-11-21
      deniable estimate search_term --candidate "dark mode" --candidate "font size"
      deniable estimate dark_mode --by platform
      deniable estimate dark_mode --by platform --where country:fr
      deniable estimate dark_mode --last 7 --compare-to previous
      deniable estimate load_ms --start 2026-11-16 --end 2026-11-22 --compare-to 2026-11-09..2026-11-15
      deniable estimate browser --from-archive s3://telemetry-archive/deniable --start 2026-01-01

    With --by or --where, one estimate per slice of the metric's dimensions, every interval
    holding at once; a slice with too few reports says "suppressed" and shows no number (in
    --format csv too: its row's number cells are empty).
    With --compare-to, the change from that window: higher, lower, or no detectable change
    (--format csv: a row per slice and category).
    """
    by, where, compare_to = query.pop("by"), query.pop("where"), query.pop("compare_to")
    archive, engine, scheduler = (
        query.pop("from_archive"),
        query.pop("engine"),
        query.pop("scheduler"),
    )
    if archive is not None:
        if compare_to is not None:
            raise InvalidInput(
                "--compare-to reads the collector's counts; leave out --from-archive"
            )
        estimate_from_archive(archive, name, fmt, engine, scheduler, list(by), list(where), query)
        return
    if engine != "duckdb" or scheduler is not None:
        raise InvalidInput("--engine and --scheduler go with --from-archive")
    if compare_to is not None:
        if query["from_file"] is not None:
            raise InvalidInput("--compare-to reads the collector's counts; leave out --from-file")
        if query.get("quantiles"):
            raise InvalidInput("--compare-to compares shares or means; leave out --quantile")
        document = fetch_document(
            global_options, "estimate", name, compare_to=compare_to, **_slicing(by, where), **query
        )
        print_changes(document, fmt)
        return
    if by or where:
        slicing = _collector_slicing(by, where, query)
        document = fetch_document(global_options, "estimate", name, **slicing, **query)
        print_breakdown(document, fmt)
        return
    spec, document = fetch_with_spec(global_options, "estimate", name, **query)
    render_of(spec).print_estimate(document, fmt)


def _slicing(by: tuple[str, ...], where: tuple[str, ...]) -> dict[str, list[str]]:
    """The --by and --where given, as the collector's query parameters (lists; one not given
    is left out)."""
    return {key: list(value) for key, value in (("by", by), ("where", where)) if value}


def _collector_slicing(
    by: tuple[str, ...], where: tuple[str, ...], query: dict[str, Any]
) -> dict[str, list[str]]:
    """:func:`_slicing` for a breakdown, refused beside --from-file: slices are cut from the
    collector's counts, which a file does not hold."""
    if query["from_file"] is not None:
        raise InvalidInput("--by and --where read the collector's counts; leave out --from-file")
    return _slicing(by, where)


def estimate_from_archive(
    url: str,
    name: str,
    fmt: str,
    engine: str,
    scheduler: str | None,
    by: list[str],
    where: list[str],
    query: dict[str, Any],
) -> None:
    """Print the estimate (or breakdown) of ``name`` re-analysed from the archive at ``url``."""
    from ..fromarchive import archive_document

    if query.pop("from_file") is not None or query.pop("spec_file") is not None:
        raise InvalidInput("give --from-archive or --from-file, not both")
    if (by or where) and fmt == "csv":
        raise InvalidInput("--by and --where print a table or JSON (--format json), not CSV")
    start, end, last = query.pop("start"), query.pop("end"), query.pop("last")
    document = archive_document(
        url,
        name,
        start=start,
        end=end,
        last=last,
        engine=engine,
        scheduler=scheduler,
        by=by,
        where=where,
        **query,
    )
    if fmt == "table":
        print_facts(console(), archive_line(url, engine), "bold")
    if by or where:
        print_breakdown(document, fmt)
        return
    print_estimate(document, fmt)


def archive_line(url: str, engine: str) -> str:
    """The line above a table re-analysed from an archive: where its reports came from (not
    the collector, whose raw reports of these periods may be deleted)."""
    return f"from the archive at {url} (re-analysed with {engine}; the collector was not asked)"


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
@click.option(
    "--by",
    "by",
    multiple=True,
    metavar="DIMENSION",
    help="One series per slice of this dimension (repeatable, at most 2).",
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="NAME:VALUE",
    help="The series of this value of a dimension only, e.g. platform:ios.",
)
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
      deniable series dark_mode --where platform:ios --format csv

    With --by or --where, each period's breakdown (a table or CSV: a row per period, slice and
    category; a boolean's table shows true only); a slice with too few reports in a period is
    suppressed there, with no number.
    """
    by, where = query.pop("by"), query.pop("where")
    if by or where:
        slicing = _collector_slicing(by, where, query)
        if categories or top is not None:
            raise InvalidInput(
                "--by and --where give every category of each slice: leave out --category and --top"
            )
        document = fetch_document(global_options, "series", name, **slicing, **query)
        print_slice_series(document, fmt)
        return
    spec, document = fetch_with_spec(global_options, "series", name, **query)
    render_of(spec).print_series(document, fmt, categories or None, top)
