"""``deniable plan``: how many reports a margin of error costs, per mechanism, before collecting any.

The estimators' advisor computes it (the dashboard's Plan page shows the same document); it
needs no collector. Every figure is the half-width of the interval the estimates themselves
compute, in the worst case over the true shares (or, for a mean, over the populations of
values), for all categories at once unless ``--per-category``. The row marked is the
mechanism that needs the fewest reports for the margin asked, so no other row of the table
beats it; when ``auto`` would resolve to another mechanism, the plan says so.

With ``--numeric --lower L --upper U`` it plans a numeric metric's mean instead: the margin is
in the metric's units, for duchi, pm and hybrid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from deniable.client.errors import InvalidInput
from deniable.estimators.shufflingaccount import DEFAULT_DELTA

from ..options import (
    _checked_epsilon,
    bounds_options,
    confidence_option,
    format_option,
    intervals_option,
    max_length_option,
    shuffle_options,
)
from ..render import (
    console,
    number_column,
    percentage_points,
    print_json,
    print_notes,
    words_column,
    write_csv,
)

if TYPE_CHECKING:
    from rich.table import Table

DEFAULT_BATCH = 100_000
"""``--batch``'s default: a shuffler's batch of 100,000 devices (§12's reference size)."""


def _optional_epsilon(ctx: click.Context, param: click.Parameter, value: float | None):
    """--epsilon checked like everywhere else, but optional: --shuffled takes
    --central-epsilon instead."""
    return None if value is None else _checked_epsilon(ctx, param, value)


DEVICES_NOTE = (
    "devices: an event metric reporting every window (any, count) gets one report per active"
    " device per window, so a window's n counts devices and each share is of active devices."
)
"""The note under a plan of an event metric (``--aggregate``)."""


def _render_numeric(plan_doc: dict[str, Any], counted: str = "reports") -> None:
    """Print a numeric plan as a table, the mechanism needing the fewest reports (or
    devices: ``counted``) marked, and a note when ``auto`` would resolve to another one."""
    inverse = "reports" in plan_doc
    level = f"{plan_doc['confidence'] * 100:g}%"
    span = f"mean on [{plan_doc['lower']:g}, {plan_doc['upper']:g}] ε={plan_doc['epsilon']:g}"
    if inverse:
        title = f"{span}: margin with {plan_doc['reports']:,} {counted}"
    else:
        title = f"{span}: {counted} needed for ±{plan_doc['margin']:g}"
    table = _mechanism_table("variance per report", "margin" if inverse else f"{counted} needed")
    for row in plan_doc["mechanisms"]:
        pick = f"← fewest {counted}" + (
            " (auto's pick)" if row["mechanism"] == plan_doc["auto"] else ""
        )
        value = f"±{row['margin']:,.4g}" if inverse else _needed_cell(row["reports_needed"])
        table.add_row(
            row["mechanism"],
            f"{row['worst_population_variance']:.4g}",
            value,
            pick if row["mechanism"] == plan_doc["advised"] else "",
        )
    notes = [
        "variance per report: the noise one report carries on the [-1, 1] axis, for the worst"
        " population; the margin is in the metric's units."
    ]
    if plan_doc["auto"] != plan_doc["advised"]:
        notes.append(
            f"note: --mechanism auto resolves to {plan_doc['auto']} (the least noise per report,"
            " best when the values are not split between the ends); for this worst-case margin"
            f" {plan_doc['advised']} needs fewer reports: register with --mechanism"
            f" {plan_doc['advised']} to get it"
        )
    if counted == "devices":
        notes.append(DEVICES_NOTE)
    subtitle = f"{level} interval, worst case: half the values at each end of the range"
    _print_plan(title, subtitle, table, notes)


def _render(plan_doc: dict[str, Any], counted: str = "reports") -> None:
    """Print the plan as a table, the mechanism needing the fewest reports (or devices:
    ``counted``) marked, and a note when ``auto`` would resolve to another one."""

    from deniable.estimators.advisor import V_STAR_MEANING

    inverse = "reports" in plan_doc
    kind = "all categories at once" if plan_doc["simultaneous"] else "each category"
    level = f"{plan_doc['confidence'] * 100:g}%"
    what = f"k={plan_doc['categories']} ε={plan_doc['epsilon']:g}"
    if inverse:
        title = f"{what}: margin of error with {plan_doc['reports']:,} {counted}"
    else:
        title = f"{what}: {counted} needed for {percentage_points(plan_doc['margin'], 'g')}"
    table = _mechanism_table(
        "V* per report", "margin (points)" if inverse else f"{counted} needed", "bytes"
    )
    for row in plan_doc["mechanisms"]:
        pick = f"← fewest {counted}" if row["mechanism"] == plan_doc["advised"] else ""
        if not row["supported"]:
            table.add_row(row["mechanism"], "—", "—", "—", row["reason"])
            continue
        value = f"±{row['margin'] * 100:.2f}" if inverse else _needed_cell(row["reports_needed"])
        table.add_row(
            row["mechanism"], f"{row['v_star']:.4g}", value, f"{row['report_bytes']}", pick
        )
    notes = [V_STAR_MEANING, "bytes: the largest report a mechanism puts on the wire."]
    if inverse:
        notes.append("A margin is a difference of shares, in percentage points.")
    if plan_doc["auto"] != plan_doc["advised"]:
        notes.append(
            f"note: --mechanism auto resolves to {plan_doc['auto']} (least variance for shares"
            f" near 0); for this worst-case margin {plan_doc['advised']} needs fewer reports:"
            f" register with --mechanism {plan_doc['advised']} to get it"
        )
    if counted == "devices":
        notes.append(DEVICES_NOTE)
    _print_plan(title, f"{level} intervals, {kind}, worst case over the true shares", table, notes)


def _mechanism_table(*numbers: str) -> Table:
    """An empty plan table: a row per mechanism, named first, then the ``numbers`` columns
    (right-aligned), then an unheaded column marking the pick or saying why a row is empty."""
    from rich.table import Table

    table = Table()
    number_column(table, "mechanism", justify="left")
    for header in numbers:
        number_column(table, header)
    words_column(table, "")
    return table


def _needed_cell(needed: int | None) -> str:
    """A mechanism's reports needed as the table shows them; ``None`` (the planner found no
    answer within its largest) as "more than" that largest."""
    return f"more than {_max_reports():.0e}" if needed is None else f"{needed:,}"


def _print_plan(title: str, subtitle: str, table: Table, notes: list[str]) -> None:
    """Print a plan's table under its title (bold) and subtitle (dim), then its notes."""
    from rich.text import Text

    out = console()
    out.print(Text(title, style="bold"))
    out.print(Text(subtitle, style="dim"))
    out.print(table)
    print_notes(out, notes)


def _max_reports() -> int:
    """The planner's largest answer (the estimators' MAX_REPORTS)."""
    from deniable.estimators import MAX_REPORTS

    return MAX_REPORTS


def _check_reports(reports: int | None) -> None:
    """Refuse more reports than the planner answers for."""
    if reports is not None and reports > _max_reports():
        raise click.BadParameter(f"at most {_max_reports():.0e} reports", param_hint="'--reports'")


@click.command(short_help="Reports needed for a margin of error, per mechanism.")
@click.option(
    "--categories",
    "k",
    type=click.IntRange(min=2),
    metavar="K",
    help="Number of categories (2 for a boolean).",
)
@click.option(
    "--numeric", is_flag=True, help="Plan a numeric metric's mean (with --lower and --upper)."
)
@click.option(
    "--text", is_flag=True, help="Plan a text metric's detection floor (with --max-length)."
)
@max_length_option("With --text: the")
@click.option(
    "--floor",
    "target",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    metavar="SHARE",
    help="With --text: the reports needed for this floor (0.01 = strings held by 1%).",
)
@bounds_options("With --numeric: the metric's")
@click.option(
    "--epsilon",
    type=float,
    callback=_optional_epsilon,
    help="Privacy parameter ε per report (0.001 to 20); required unless --shuffled.",
)
@click.option(
    "--shuffled",
    is_flag=True,
    help="Plan through a shuffler: the margin at a central ε (--central-epsilon) beside the"
    " margin without one.",
)
@click.option(
    "--central-epsilon",
    type=float,
    callback=_optional_epsilon,
    metavar="E",
    help="With --shuffled: the central ε wanted against an analyst.",
)
@shuffle_options(
    "",
    f"With --shuffled: the shuffler's batch, in devices (default {DEFAULT_BATCH:,}).",
    "With --shuffled: the central guarantee's δ",
)
@click.option(
    "--margin",
    type=click.FloatRange(0, min_open=True),
    help="Wanted half-width of the interval: a share for categories (0.01 = ±1 point), the"
    " metric's units for --numeric (50 = ±50).",
)
@click.option(
    "--reports",
    type=click.IntRange(min=1),
    metavar="N",
    help="Instead of --margin: the margin N reports give.",
)
@click.option(
    "--aggregate",
    type=click.Choice(("any", "count")),
    help="Plan an event metric that every active device reports each window: any (did the"
    " event happen: a boolean, 2 categories) or count (how many times: with --numeric, or"
    " --categories for a histogram's buckets). Its n counts devices, so --reports N reads as"
    " N active devices and the plan says devices.",
)
@confidence_option
@intervals_option
@format_option()
def plan(
    fmt: str,
    aggregate: str | None,
    numeric: bool,
    text: bool,
    max_length: int | None,
    target: float | None,
    lower: float | None,
    upper: float | None,
    shuffled: bool,
    central_epsilon: float | None,
    batch: int | None,
    delta: float | None,
    **request: Any,
) -> None:
    """Reports needed for a margin of error, per mechanism, and which one needs the fewest.

    A margin is the half-width of the interval the estimates compute (for all categories at
    once, as they show them, unless --per-category), in the worst case over the true shares,
    with the reports of one period (or of a range pooled as independent); the mark goes to
    the mechanism that needs the fewest reports for it. Bytes per report is the largest
    payload on the wire: OUE's grows as k/8, a reason to take OLH at large k even where OUE
    needs a few reports fewer. With --numeric, the margin of a numeric metric's mean, in its
    units, worst case over the populations (half the values at each end of the range), for
    duchi, pm and hybrid.

    \b
    Examples:
      deniable plan --categories 4 --epsilon 1 --margin 0.01
      deniable plan --categories 20 --epsilon 2 --reports 50000 --per-category
      deniable plan --numeric --lower 0 --upper 5000 --epsilon 1 --margin 50
      deniable plan --text --max-length 16 --epsilon 4 --floor 0.01
      deniable plan --aggregate any --epsilon 1 --reports 20000

    With --aggregate any (or count), an event metric's plan: each active device sends one
    report per window, so the figures count devices (the share of 7-day actives at 20,000
    devices, say).

    With --text, the detection floor T95 of a text metric's discovery at several batch sizes:
    a string held by at least that share of a period's devices is found with probability
    0.95, and with probability 0.95 nothing absent is returned (--floor SHARE: the reports
    needed for it; --reports N: the floor at N).

    With --shuffled --central-epsilon E, the margin through a shuffler releasing batches of
    --batch devices: each mechanism's largest local ε whose central ε against an analyst is
    at most E, and the margin it gives (at --reports, default one batch), beside the margin
    at ε = E without a shuffler. Against the shuffler itself only the local ε holds.

    \b
      deniable plan --shuffled --categories 10 --central-epsilon 0.2 --batch 100000
    """
    shuffle_options = (central_epsilon, batch, delta)
    counted = "reports"
    if aggregate is not None:
        if shuffled or text:
            raise click.UsageError("--aggregate goes with --categories or --numeric")
        if aggregate == "any":
            if numeric or request["k"] not in (None, 2):
                raise click.UsageError("an any metric is a boolean: 2 categories, not --numeric")
            request["k"] = 2
        counted = "devices"
    if shuffled:
        _shuffled_plan(fmt, central_epsilon, batch, delta, request)
        return
    if any(option is not None for option in shuffle_options):
        raise click.UsageError("--central-epsilon, --batch and --delta go with --shuffled")
    if request["epsilon"] is None:
        raise click.UsageError("give --epsilon (or --shuffled --central-epsilon E)")
    if text:
        _text_plan(fmt, max_length, target, request)
        return
    if max_length is not None or target is not None:
        raise click.UsageError("--max-length and --floor go with --text")
    margin, reports = request["margin"], request["reports"]
    if (margin is None) == (reports is None):
        raise click.UsageError("give exactly one of --margin or --reports")
    _check_reports(reports)
    if numeric:
        _numeric_plan(fmt, lower, upper, request, counted)
        return
    if request["k"] is None:
        raise click.UsageError("give --categories K, or --numeric --lower L --upper U")
    if lower is not None or upper is not None:
        raise click.UsageError("--lower and --upper go with --numeric")
    if margin is not None and margin >= 1:
        raise click.BadParameter(
            "a share's margin is below 1 (0.01 = ±1 point)", param_hint="'--margin'"
        )
    from deniable.estimators.advisor import plan_document

    document = plan_document(**request)
    if margin is not None and all(r.get("reports_needed") is None for r in document["mechanisms"]):
        raise InvalidInput(
            f"a margin of ±{margin:g} at ε={request['epsilon']:g} needs more than"
            f" {_max_reports():.0e} reports with every mechanism: ask for a wider margin"
        )
    if fmt == "json":
        print_json(document if aggregate is None else {**document, "counted": counted})
    elif fmt == "csv":
        key = "margin" if reports is not None else "reports_needed"
        write_csv(
            ("mechanism", "v_star", key, "report_bytes", "advised"),
            (
                (
                    r["mechanism"],
                    r.get("v_star"),
                    r.get(key),
                    r.get("report_bytes"),
                    r["mechanism"] == document["advised"],
                )
                for r in document["mechanisms"]
            ),
        )
    else:
        _render(document, counted)


def _text_plan(
    fmt: str, max_length: int | None, target: float | None, request: dict[str, Any]
) -> None:
    """``plan --text``: the discovery floor at several batch sizes, printed as ``fmt``."""
    if max_length is None:
        raise click.UsageError("--text needs --max-length L (UTF-8 bytes, 1..64)")
    if request["k"] is not None or request["margin"] is not None:
        raise click.UsageError("--text takes no --categories or --margin (use --floor SHARE)")
    from deniable.client.mechanisms import PrefixSketch
    from deniable.estimators.heavyhitters import floor_plan

    document = floor_plan(
        PrefixSketch(max_length, request["epsilon"]), target=target, reports=request["reports"]
    )
    if fmt == "json":
        print_json(document)
        return
    rows = document["floors"]
    if fmt == "csv":
        write_csv(("reports", "t95", "tau"), ((r["reports"], r["t95"], r["tau"]) for r in rows))
        return
    from rich.table import Table

    table = Table(
        title=f"text, {max_length}-byte strings, ε={request['epsilon']:g}: discovery floor per"
        " period",
        title_justify="left",
    )
    number_column(table, "reports per\nperiod")
    number_column(table, "floor T95")
    number_column(table, "cut τ")
    for row in rows:
        t95 = "none: above 100%" if row["t95"] >= 1 else f"{row['t95']:.2%}"
        table.add_row(f"{row['reports']:,}", t95, f"{row['tau']:.2%}")
    out = console()
    out.print(table)
    print_notes(
        out,
        [
            "a string held by at least T95 of a period's devices is found with probability"
            " 0.95; with probability 0.95 nothing absent from the batch is returned"
        ],
    )
    if target is not None:
        needed = document["reports_needed"]
        out.print(
            f"a floor of {target:.2%} needs {needed:,} reports per period"
            if needed
            else f"a floor of {target:.2%} needs more than 1e12 reports per period"
        )


def _numeric_plan(
    fmt: str,
    lower: float | None,
    upper: float | None,
    request: dict[str, Any],
    counted: str = "reports",
) -> None:
    """``plan --numeric``: the mean's plan printed as ``fmt``, its n counting ``counted``."""
    if lower is None or upper is None:
        raise click.UsageError("--numeric needs --lower and --upper")
    given = click.get_current_context().get_parameter_source("simultaneous")
    if request["k"] is not None or given is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(
            "--numeric takes no --categories, --simultaneous or --per-category (one mean)"
        )
    from deniable.estimators.advisor import numeric_plan_document

    margin = request["margin"]
    document = numeric_plan_document(
        lower,
        upper,
        request["epsilon"],
        margin=margin,
        reports=request["reports"],
        confidence=request["confidence"],
    )
    if margin is not None and all(r.get("reports_needed") is None for r in document["mechanisms"]):
        raise InvalidInput(
            f"a margin of ±{margin:g} on [{lower:g}, {upper:g}] at ε={request['epsilon']:g}"
            f" needs more than {_max_reports():.0e} reports with every mechanism: ask for a"
            " wider margin"
        )
    if fmt == "json":
        print_json(document if counted == "reports" else {**document, "counted": counted})
    elif fmt == "csv":
        key = "margin" if margin is None else "reports_needed"
        write_csv(
            ("mechanism", "worst_population_variance", key, "advised", "auto"),
            (
                (
                    r["mechanism"],
                    r["worst_population_variance"],
                    r.get(key),
                    r["mechanism"] == document["advised"],
                    r["mechanism"] == document["auto"],
                )
                for r in document["mechanisms"]
            ),
        )
    else:
        _render_numeric(document, counted)


def _shuffled_plan(
    fmt: str,
    central_epsilon: float | None,
    batch: int | None,
    delta: float | None,
    request: dict[str, Any],
) -> None:
    """``plan --shuffled``: the margin at a central eps through a shuffler, beside the margin
    at that eps without one, printed as ``fmt``."""
    if central_epsilon is None:
        raise click.UsageError("--shuffled needs --central-epsilon E")
    if request["k"] is None:
        raise click.UsageError("--shuffled needs --categories K")
    if request["epsilon"] is not None or request["margin"] is not None:
        raise click.UsageError(
            "--shuffled takes --central-epsilon (not --epsilon) and plans the margin (not"
            " --margin; --reports N sets the reports, default one batch)"
        )
    _check_reports(request["reports"])
    from deniable.estimators.advisor import shuffled_plan_document

    document = shuffled_plan_document(
        request["k"],
        central_epsilon,
        batch=DEFAULT_BATCH if batch is None else batch,
        delta=DEFAULT_DELTA if delta is None else delta,
        reports=request["reports"],
        confidence=request["confidence"],
        simultaneous=request["simultaneous"],
    )
    rows = [r for r in document["mechanisms"] if r["supported"]]
    if fmt == "json":
        print_json(document)
        return
    keys = ("mechanism", "local_only_margin", "local_epsilon", "central_epsilon_reached", "bound")
    if fmt == "csv":
        write_csv(
            (*keys, "margin", "advised"),
            (
                (*(r[k] for k in keys), r["margin"], r["mechanism"] == document["advised"])
                for r in rows
            ),
        )
        return
    from rich.table import Table

    table = Table()
    number_column(table, "mechanism", justify="left")
    number_column(table, "no shuffler,\nmargin")
    number_column(table, "local\nε")
    number_column(table, "central\nε")
    number_column(table, "margin")
    words_column(table, "bound")
    for r in rows:
        table.add_row(
            r["mechanism"] + (" ←" if r["mechanism"] == document["advised"] else ""),
            f"±{r['local_only_margin'] * 100:.2f}",
            f"{r['local_epsilon']:g}",
            f"{r['central_epsilon_reached']:.4g}",
            f"±{r['margin'] * 100:.2f}",
            r["bound"],
        )
    level = f"{document['confidence'] * 100:g}%"
    kind = "all categories at once" if document["simultaneous"] else "each category"
    _print_plan(
        f"k={document['categories']}: central ε ≤ {central_epsilon:g} (δ ="
        f" {document['delta']:g}) through a shuffler releasing batches of"
        f" {document['batch']:,} devices, margins with {document['reports']:,} reports",
        f"{level} intervals, {kind}, worst case over the true shares",
        table,
        [
            "← the least margin through the shuffler.",
            f"no shuffler, margin: the margin at ε = {central_epsilon:g} without a shuffler.",
            "central ε: against an analyst who sees only the shuffler's released batches.",
            "local ε: what holds against the shuffler, or the shuffler and the collector"
            " together, and against a batch padded with fake reports; it must be acceptable"
            " on its own (docs/security.md).",
        ],
    )
