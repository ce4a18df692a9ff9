"""``deniable plan``: how many reports a margin of error costs, per mechanism, before collecting any.

Pure arithmetic over the estimators' advisor; it needs no collector. The row marked is the
mechanism that needs the fewest reports for the margin asked (the worst case over the true
shares, as every row states it), so no other row of the table beats it; when ``auto`` (least
variance as f -> 0) would resolve to another mechanism, the plan says so.
"""

from __future__ import annotations

from typing import Any

import click
from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import MECHANISMS

from ..options import confidence_option, epsilon_option, format_option, simultaneous_option
from ..render import console, print_json, write_csv


def candidate_mechanisms(k: int) -> list[str]:
    """The client's mechanisms that can carry a k-category metric: brr only for k = 2, where
    krr is the same mechanism and is left out."""
    left_out = "krr" if k == 2 else "brr"
    return [name for name in MECHANISMS if name != left_out]


def build_plan(
    k: int,
    epsilon: float,
    *,
    margin: float | None,
    reports: int | None,
    confidence: float,
    simultaneous: bool,
) -> dict[str, Any]:
    """Reports needed for ``margin`` (or the margin ``reports`` give), per mechanism, and the advisor's pick."""
    from deniable.client.mechanisms import least_variance, make_mechanism
    from deniable.estimators import (
        TooManyReports,
        fewest_reports,
        margin_of_error,
        report_bytes,
        reports_needed,
    )

    candidates = candidate_mechanisms(k)
    rows = []
    for name in candidates:
        try:
            mechanism = make_mechanism(name, k, epsilon)
        except ValueError as exc:
            rows.append({"mechanism": name, "supported": False, "reason": str(exc)})
            continue
        row: dict[str, Any] = {
            "mechanism": name,
            "supported": True,
            "v_star": mechanism.v_star,
            "report_bytes": report_bytes(mechanism),
        }
        if margin is not None:
            try:
                row["reports_needed"] = reports_needed(
                    k,
                    epsilon,
                    margin,
                    confidence=confidence,
                    mechanism=name,
                    simultaneous=simultaneous,
                )
            except TooManyReports as exc:
                row.update(reports_needed=None, reason=str(exc))
        else:
            row["margin"] = float(
                margin_of_error(
                    k,
                    epsilon,
                    reports,
                    confidence=confidence,
                    mechanism=name,
                    simultaneous=simultaneous,
                )
            )
        rows.append(row)
    return {
        "categories": k,
        "epsilon": epsilon,
        "confidence": confidence,
        "simultaneous": simultaneous,
        **({"margin": margin} if margin is not None else {"reports": reports}),
        "advised": fewest_reports(k, epsilon, candidates),
        "auto": least_variance(k, epsilon),
        "mechanisms": rows,
    }


def _render(plan_doc: dict[str, Any]) -> None:
    """Print the plan as a table, the mechanism needing the fewest reports marked, and a note
    when ``auto`` would resolve to another one."""
    from rich.table import Table

    inverse = "reports" in plan_doc
    kind = "all categories at once" if plan_doc["simultaneous"] else "each category"
    level = f"{plan_doc['confidence'] * 100:g}%"
    if inverse:
        title = (
            f"k={plan_doc['categories']} ε={plan_doc['epsilon']:g}: margin of error with "
            f"{plan_doc['reports']:,} reports ({level}, {kind}, worst case)"
        )
    else:
        title = (
            f"k={plan_doc['categories']} ε={plan_doc['epsilon']:g}: reports needed for "
            f"±{plan_doc['margin'] * 100:g} points ({level}, {kind}, worst case)"
        )
    table = Table(title=title, title_justify="left")
    table.add_column("mechanism")
    table.add_column("V* per report", justify="right")
    table.add_column("margin" if inverse else "reports needed", justify="right")
    table.add_column("bytes per report", justify="right")
    table.add_column("")
    for row in plan_doc["mechanisms"]:
        pick = (
            "← advisor's pick (fewest reports)" if row["mechanism"] == plan_doc["advised"] else ""
        )
        if not row["supported"]:
            table.add_row(row["mechanism"], "—", "—", "—", row["reason"])
            continue
        if inverse:
            value = f"±{row['margin'] * 100:.2f} points"
        elif row["reports_needed"] is None:
            value = f"more than {_max_reports():.0e}"
        else:
            value = f"{row['reports_needed']:,}"
        table.add_row(
            row["mechanism"], f"{row['v_star']:.4g}", value, f"{row['report_bytes']}", pick
        )
    out = console()
    out.print(table)
    if plan_doc["auto"] != plan_doc["advised"]:
        out.print(
            f"note: --mechanism auto resolves to {plan_doc['auto']} (least variance for shares"
            f" near 0); for this worst-case margin {plan_doc['advised']} needs fewer reports:"
            f" register with --mechanism {plan_doc['advised']} to get it"
        )


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
    required=True,
    metavar="K",
    help="Number of categories (2 for a boolean).",
)
@epsilon_option
@click.option(
    "--margin",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Wanted half-width of the interval, as a share (0.01 = ±1 point).",
)
@click.option(
    "--reports",
    type=click.IntRange(min=1),
    metavar="N",
    help="Instead of --margin: the margin N reports give.",
)
@confidence_option
@simultaneous_option
@format_option()
def plan(fmt: str, **request: Any) -> None:
    """Reports needed for a margin of error, per mechanism, and which one needs the fewest.

    Margins are the worst case over the true shares; the mark goes to the mechanism that needs
    the fewest reports for it. Bytes per report is the largest payload on the wire: OUE's
    grows as k/8, a reason to take OLH at large k even where OUE needs a few reports fewer.

    \b
    Examples:
      deniable plan --categories 4 --epsilon 1 --margin 0.01
      deniable plan --categories 20 --epsilon 2 --reports 50000 --simultaneous
    """
    margin, reports = request["margin"], request["reports"]
    if (margin is None) == (reports is None):
        raise click.UsageError("give exactly one of --margin or --reports")
    _check_reports(reports)
    document = build_plan(**request)
    if margin is not None and all(r.get("reports_needed") is None for r in document["mechanisms"]):
        raise InvalidInput(
            f"a margin of ±{margin:g} at ε={request['epsilon']:g} needs more than"
            f" {_max_reports():.0e} reports with every mechanism: ask for a wider margin"
        )
    if fmt == "json":
        print_json(document)
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
        _render(document)
