"""``deniable privacy``: the most eps one device spends on the registered metrics, in a table
and in plain words an app can publish.

The document is the collector's ``GET /v1/privacy`` (built by
:mod:`deniable.estimators.privacy`), for the SDK settings given as options (default: the SDK's
defaults); ``--format json`` prints it unchanged. Warnings go to stderr as ``warning:`` lines.
"""

from __future__ import annotations

import textwrap
from typing import Any

import click

from deniable.client.account import MAX_LIFETIME_EPSILON
from deniable.estimators.privacy import eps_text
from deniable.estimators.shufflingaccount import batches_text, devices_text

from ..options import GlobalOptions, format_option, pass_global_options, shuffle_options
from ..render import console, print_json

WINDOW_COLUMNS = (
    ("per_period", "per period"),
    ("per_day", "day"),
    ("per_7_days", "7 days"),
    ("per_30_days", "30 days"),
    ("lifetime", "lifetime"),
    ("per_value_lifetime", "per value, lifetime"),
)
"""The account's figures, as the table heads them: over any two histories, then what the
reports of unchanging values reveal over the lifetime."""


def memoize_query(memoize: bool, names: tuple[str, ...]) -> str | None:
    """The ``memoize`` query from ``--memoize`` or ``--memoize-metric`` (None: the default)."""
    if memoize and names:
        raise click.UsageError("give --memoize (every metric) or --memoize-metric NAME, not both")
    if memoize:
        return "true"
    return ",".join(names) if names else None


def _figure(value: float | None) -> str:
    """An eps figure of the table; None is an unbounded lifetime."""
    return "unbounded" if value is None else eps_text(value)


def settings_text(settings: dict[str, Any]) -> str:
    """The settings the account is for, in words."""
    r = settings["max_reports_per_period"]
    memoize = settings["memoize"]
    memo = (
        "every metric memoized"
        if memoize is True
        else f"memoized: {', '.join(memoize)}"
        if memoize
        else "no memoization"
    )
    if memoize:
        ratio = settings.get("instantaneous_ratio")
        memo += (
            " without a fresh layer"
            if ratio is None
            else f" with a fresh layer at {eps_text(ratio)} × ε"
        )
    cap = settings["lifetime_epsilon"]
    lifetime = "no lifetime cap" if cap is None else f"lifetime_epsilon {eps_text(cap)} per metric"
    defaults = " (the SDK defaults)" if settings["sdk_defaults"] else ""
    return f"{r:,} report{'s' if r > 1 else ''} per metric and period, {memo}, {lifetime}{defaults}"


def shuffled_table(shuffled: dict[str, Any]) -> Any:
    """The shuffled batches as a table: per batch the central eps against an analyst beside
    the local eps against the shuffler."""
    from rich.table import Table

    assumed = shuffled["source"] == "assumed"
    table = Table(
        title="through a shuffler: central ε against an analyst, per batch"
        + (" (batch size assumed)" if assumed else ""),
        title_justify="left",
        caption="central ε: against whoever sees only released batches; local ε: against the"
        " shuffler, or the shuffler and the collector together",
        caption_justify="left",
    )
    from ..render import number_column, words_column

    words_column(table, "metric")
    words_column(table, "mechanism")
    words_column(table, "batch", justify="right")
    number_column(table, "δ")
    number_column(table, "central ε", justify="left")
    number_column(table, "local ε", justify="left")
    words_column(table, "bound")
    for row in shuffled["batches"]:
        table.add_row(
            row["metric"],
            row["mechanism"],
            devices_text(row),
            f"{row['delta']:g}",
            f"{row['central_epsilon']:.4g}",
            eps_text(row["local_epsilon"]),
            row["bound"],
        )
    return table


def released_note(shuffled: dict[str, Any]) -> str:
    """Which released batches the table lists, and each metric's weakest, which covers all of
    them (empty unless the batches are released ones)."""
    if shuffled["source"] != "released":
        return ""
    listed, total = len(shuffled["batches"]), shuffled.get("batch_count", 0)
    head = (
        f"the {listed:,} most recent of {total:,} released batches; "
        if listed < total
        else f"{total:,} released batches; "
    )
    weakest = "; ".join(
        f"{m['metric']}: central ε ≤ {m['central_epsilon']:.4g} ({batches_text(m)})"
        for m in shuffled["metrics"]
    )
    return head + "per metric, the weakest, which holds for every batch: " + weakest


SPENT_COLUMNS = WINDOW_COLUMNS[:4]
"""The account's figures over a window of time, in the main table."""
LIFETIME_COLUMNS = WINDOW_COLUMNS[4:]
"""The account's figures over a lifetime, in a table of their own when any is bounded."""
HEADINGS = {"per period": "per\nperiod", "per value, lifetime": "per value,\nlifetime"}
"""Headings broken between words, so that a figure's column is no wider than its figures."""


def account_table(document: dict[str, Any]) -> Any:
    """The account as a table: one row per metric, then the totals, over a period, a day, 7
    and 30 days (the lifetime figures: :func:`lifetime_table`, or the caption when every one
    is unbounded). Names wrap, figures never do: it fits 80 columns."""
    from rich.table import Table

    from ..render import number_column, words_column

    caption = f"settings: {settings_text(document['settings'])}"
    if lifetime_table(document) is None:
        caption += "; over a lifetime every metric's ε is unbounded (no cap, no memoization)"
    table = Table(
        title="privacy account: the most ε one device spends (worst case)",
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    words_column(table, "metric")
    number_column(table, "ε")
    words_column(table, "period")
    number_column(table, "memoized", justify="left")
    for _, heading in SPENT_COLUMNS:
        number_column(table, HEADINGS.get(heading, heading))
    for row in document["metrics"]:
        table.add_row(
            row["metric"],
            eps_text(row["epsilon"]),
            row["period"],
            "yes" if row["memoized"] else "no",
            *(_figure(row[key]) for key, _ in SPENT_COLUMNS),
        )
    total = document["total"]
    table.add_section()
    table.add_row(
        "total", "", "", "", *(_figure(total[key]) for key, _ in SPENT_COLUMNS), style="bold"
    )
    return table


def lifetime_table(document: dict[str, Any]) -> Any | None:
    """What one device spends over its lifetime, per metric and in total (None when every
    figure is unbounded: the account's caption says so in words)."""
    from rich.table import Table

    from ..render import number_column, words_column

    rows = [*document["metrics"], document["total"]]
    if all(row[key] is None for row in rows for key, _ in LIFETIME_COLUMNS):
        return None
    table = Table(title="over a lifetime (worst case)", title_justify="left")
    words_column(table, "metric")
    for _, heading in LIFETIME_COLUMNS:
        number_column(table, HEADINGS.get(heading, heading))
    for row in document["metrics"]:
        table.add_row(row["metric"], *(_figure(row[key]) for key, _ in LIFETIME_COLUMNS))
    table.add_section()
    total = document["total"]
    table.add_row("total", *(_figure(total[key]) for key, _ in LIFETIME_COLUMNS), style="bold")
    return table


def window_words(row: dict[str, Any]) -> str:
    """An event metric's window as the table shows it: ``rolling 7 days`` or ``calendar
    week``."""
    if row["rolling"]:
        days = row["window_days"]
        return f"rolling {days:,} day{'s' if days > 1 else ''}"
    return f"calendar {row['period']}"


def events_table(document: dict[str, Any]) -> Any | None:
    """The event metrics' windows as a table (``None`` without event metrics): per metric its
    aggregation and window, one window's ε, what the reports that see one day's events spend
    together and, memoized, what an unchanged aggregate reveals."""
    from rich.table import Table

    rows = [row for row in document["metrics"] if "per_window" in row]
    if not rows:
        return None
    table = Table(
        title="event metrics: one report per window, whatever the number of events",
        title_justify="left",
        caption="a day's events: every report whose window covers one day, together (a rolling"
        " window of N days is reported daily, so N reports); unchanged: all reports of an"
        " aggregate that does not change, memoized",
        caption_justify="left",
    )
    from ..render import number_column, words_column

    for column in ("metric", "aggregate", "window"):
        words_column(table, column)
    for column in ("per\nwindow", "a day's\nevents", "unchanged"):
        number_column(table, column)
    for row in rows:
        unchanged = row["permanent_epsilon"]
        table.add_row(
            row["metric"],
            row["aggregate"],
            window_words(row),
            eps_text(row["per_window"]),
            _figure(row["per_day_of_events"]),
            "–" if unchanged is None else eps_text(unchanged),
        )
    return table


@click.command(short_help="The most ε one device spends, and a statement to publish.")
@click.option(
    "--max-reports-per-period",
    type=click.IntRange(min=1),
    metavar="N",
    help="The SDK's max_reports_per_period (default 1, the SDK's).",
)
@click.option("--memoize", is_flag=True, help="Every metric memoized (the SDK's memoize=True).")
@click.option(
    "--memoize-metric",
    "memoize_metrics",
    multiple=True,
    metavar="NAME",
    help="A memoized metric (repeatable; the SDK's memoize={...}).",
)
@click.option(
    "--lifetime-epsilon",
    type=click.FloatRange(min=0, min_open=True, max=MAX_LIFETIME_EPSILON),
    metavar="X",
    help="The SDK's lifetime_epsilon, per metric, at most 1,000,000 (default none, the SDK's).",
)
@click.option(
    "--instantaneous-ratio",
    metavar="R|none",
    help="The SDK's instantaneous_ratio: memoized reports' fresh layer at R × ε (R > 1; default"
    " 2, the SDK's), or none.",
)
@shuffle_options(
    "shuffle-",
    "Assume a shuffler releasing batches of N devices: each metric's central ε against an"
    " analyst at N, in place of the batches a shuffler released.",
    "The δ of the central guarantee, released or assumed batches",
)
@format_option("table", "json")
@pass_global_options
def privacy(
    global_options: GlobalOptions,
    max_reports_per_period: int | None,
    memoize: bool,
    memoize_metrics: tuple[str, ...],
    lifetime_epsilon: float | None,
    instantaneous_ratio: str | None,
    shuffle_batch: int | None,
    shuffle_delta: float | None,
    fmt: str,
) -> None:
    """The privacy account: the most ε one device spends on the registered metrics, per period,
    day, 7 and 30 days and over its lifetime, per metric and in total, for the SDK settings
    given (default: the SDK's defaults). Needs the viewer or the admin token.

    Metrics add up (sequential composition). The windows bound what the reports reveal over
    any two histories of values; "per value, lifetime" is what the reports of unchanging
    values reveal, which memoization bounds (its fresh layer bounds a change of value;
    without it, no ε does). A lifetime cap stops each metric at lifetime_epsilon. A warning
    says when a device's 30-day total exceeds the warning level (docs/privacy.md). Event
    metrics send one report per window; a second table gives their window, one window's ε
    and what the reports that see one day's events spend together.

    Through a shuffler (the batches it released, or --shuffle-batch N assumed for every
    metric), each batch also has a central (ε, δ) against an analyst who sees only released
    batches; against the shuffler, or the shuffler and the collector together, only the local
    ε holds. Per metric, the smallest released batch's ε holds for all of its batches; the 20
    most recent are listed.

    \b
    Examples:
      deniable privacy
      deniable privacy --memoize --lifetime-epsilon 10
      deniable privacy --max-reports-per-period 3 --memoize-metric browser --format json
      deniable privacy --shuffle-batch 100000
    """
    query = memoize_query(memoize, memoize_metrics)
    with global_options.api() as api:
        document = api.privacy(
            max_reports_per_period=max_reports_per_period,
            memoize=query,
            lifetime_epsilon=lifetime_epsilon,
            instantaneous_ratio=instantaneous_ratio,
            shuffle_batch=shuffle_batch,
            shuffle_delta=shuffle_delta,
        )
    for warning in document.get("warnings", []):
        click.echo(f"warning: {warning}", err=True)
    if fmt == "json":
        print_json(document)
        return
    out = console()
    out.print(account_table(document))
    lifetime = lifetime_table(document)
    if lifetime is not None:
        out.print(lifetime)
    out.print()
    events = events_table(document)
    if events is not None:
        out.print(events)
        out.print()
    shuffled = document.get("shuffled") or {"batches": [], "statement": ""}
    if shuffled["batches"]:
        out.print(shuffled_table(shuffled))
        note = released_note(shuffled)
        if note:
            out.print(note, highlight=False)
    else:
        out.print(shuffled["statement"], highlight=False)
    out.print()
    out.print("statement (plain words for your app's privacy notice):")
    out.print(textwrap.fill(document["statement"], width=min(out.width, 100)), highlight=False)
