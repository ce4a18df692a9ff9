"""``deniable metrics``: register metrics and read their specs, fingerprints and expected precision."""

from __future__ import annotations

from typing import Any

import click

from ..options import (
    GlobalOptions,
    confidence_option,
    epsilon_option,
    format_option,
    mechanism_option,
    pass_global_options,
    period_kind_option,
)
from ..render import console, print_json, write_csv

PLANNING_SIZES = (1_000, 10_000, 100_000)
"""Report counts at which ``metrics show`` states the expected margin of error."""

SPEC_FIELDS = ("name", "type", "categories", "epsilon", "mechanism", "period", "fingerprint")


def spec_from_options(
    name: str, categories: str | None, boolean: bool, epsilon: float, mechanism: str, period: str
) -> dict[str, Any]:
    """The JSON spec to register, validated locally with the SDK's MetricSpec first."""
    from deniable.client.spec import MetricSpec

    if boolean == (categories is not None):
        raise click.UsageError("give exactly one of --categories a,b,c or --boolean")
    if boolean:
        spec = MetricSpec.boolean(name, epsilon=epsilon, mechanism=mechanism, period=period)  # type: ignore[arg-type]
        body: dict[str, Any] = {"name": name, "type": "boolean"}
    else:
        names = [c.strip() for c in (categories or "").split(",")]
        spec = MetricSpec.categorical(
            name, names, epsilon=epsilon, mechanism=mechanism, period=period
        )  # type: ignore[arg-type]
        body = {"name": name, "type": "categorical", "categories": list(spec.categories)}
    body.update({"epsilon": epsilon, "mechanism": spec.mechanism, "period": period})
    return body


def margins(spec: dict[str, Any], confidence: float) -> list[dict[str, Any]]:
    """Expected margin of error (per category and all at once) at each planning size."""
    from deniable.estimators import margin_of_error

    k = len(spec["categories"]) if spec.get("categories") else 2
    rows = []
    for n in PLANNING_SIZES:
        rows.append(
            {
                "reports": n,
                "margin": float(
                    margin_of_error(
                        k, spec["epsilon"], n, confidence=confidence, mechanism=spec["mechanism"]
                    )
                ),
                "simultaneous_margin": float(
                    margin_of_error(
                        k,
                        spec["epsilon"],
                        n,
                        confidence=confidence,
                        mechanism=spec["mechanism"],
                        simultaneous=True,
                    )
                ),
            }
        )
    return rows


def _spec_table(spec: dict[str, Any]) -> Any:
    """A two-column table of a served spec."""
    from rich.table import Table

    table = Table(show_header=False, title=f"metric {spec['name']}", title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    categories = spec.get("categories") or ["false", "true"]
    table.add_row("type", str(spec.get("type")))
    table.add_row("categories", ", ".join(categories) + f"  (k={len(categories)})")
    table.add_row("epsilon", f"{spec.get('epsilon')}")
    table.add_row("mechanism", str(spec.get("mechanism")))
    table.add_row("period", str(spec.get("period")))
    table.add_row("fingerprint", str(spec.get("fingerprint")))
    return table


@click.group()
def metrics() -> None:
    """Register metrics and read their specs.

    \b
    Examples:
      deniable metrics create browser --categories chrome,firefox,safari,other --epsilon 1
      deniable metrics create dark_mode --boolean --epsilon 0.5
      deniable metrics list
      deniable metrics show browser
    """


@metrics.command("create", short_help="Register a metric (admin).")
@click.argument("name")
@click.option(
    "--categories", metavar="A,B,C", help="Comma-separated categories of a categorical metric."
)
@click.option("--boolean", is_flag=True, help="A yes/no metric (categories false, true).")
@epsilon_option
@mechanism_option
@period_kind_option
@format_option("table", "json")
@pass_global_options
def create(
    global_options: GlobalOptions,
    name: str,
    categories: str | None,
    boolean: bool,
    epsilon: float,
    mechanism: str,
    period: str,
    fmt: str,
) -> None:
    """Register a metric (needs the admin token); its spec can never change afterwards.

    \b
    Examples:
      deniable metrics create browser --categories chrome,firefox,safari,other --epsilon 1
      deniable metrics create dark_mode --boolean --epsilon 0.5 --period week
    """
    body = spec_from_options(name, categories, boolean, epsilon, mechanism, period)
    with global_options.api() as api:
        stored = api.create_metric(body)
    if fmt == "json":
        print_json(stored)
    else:
        console().print(_spec_table(stored))
        click.echo(
            f"registered {stored.get('name', name)} (fingerprint {stored.get('fingerprint')})"
        )


@metrics.command("list", short_help="List registered metrics.")
@format_option()
@pass_global_options
def list_(global_options: GlobalOptions, fmt: str) -> None:
    """List every registered metric.

    \b
    Example:
      deniable metrics list --format csv
    """
    from rich.table import Table

    with global_options.api() as api:
        specs = api.list_metrics()
    if fmt == "json":
        print_json(specs)
        return
    if fmt == "csv":
        write_csv(
            SPEC_FIELDS,
            (
                [("|".join(s.get(f) or []) if f == "categories" else s.get(f)) for f in SPEC_FIELDS]
                for s in specs
            ),
        )
        return
    if not specs:
        click.echo("no metrics registered yet; create one with `deniable metrics create`")
        return
    table = Table(title=f"{len(specs)} metric(s)", title_justify="left")
    for column in ("name", "type", "k", "ε", "mechanism", "period", "fingerprint"):
        table.add_column(column, justify="right" if column in ("k", "ε") else "left")
    for s in specs:
        table.add_row(
            s["name"],
            s.get("type", ""),
            str(len(s.get("categories") or ["false", "true"])),
            f"{s.get('epsilon')}",
            s.get("mechanism", ""),
            s.get("period", ""),
            s.get("fingerprint", ""),
        )
    console().print(table)


@metrics.command("show", short_help="Show a spec and its expected margin of error.")
@click.argument("name")
@confidence_option
@format_option("table", "json")
@pass_global_options
def show(global_options: GlobalOptions, name: str, confidence: float, fmt: str) -> None:
    """Show a metric's resolved mechanism, fingerprint and expected margin of error.

    The margin is the half-width of the interval the estimators will give with 1,000,
    10,000 and 100,000 reports (worst case over the true shares).

    \b
    Example:
      deniable metrics show browser
    """
    from rich.table import Table

    with global_options.api() as api:
        spec = api.get_metric(name)
    rows = margins(spec, confidence)
    if fmt == "json":
        print_json({**spec, "expected_margin": {"confidence": confidence, "by_reports": rows}})
        return
    out = console()
    out.print(_spec_table(spec))
    table = Table(
        title=f"expected margin of error ({confidence * 100:g}% interval)", title_justify="left"
    )
    table.add_column("reports", justify="right")
    table.add_column("each category", justify="right")
    table.add_column("all categories at once", justify="right")
    for row in rows:
        table.add_row(
            f"{row['reports']:,}",
            f"±{row['margin'] * 100:.2f} points",
            f"±{row['simultaneous_margin'] * 100:.2f} points",
        )
    out.print(table)
