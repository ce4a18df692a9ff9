"""``deniable simulate``: N simulated devices report a metric through the real SDK."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import click

from deniable.estimators import DEFAULT_QUANTILES

from ..kindrender import render_of
from ..options import DATE, GlobalOptions, format_option, pass_global_options
from ..progress import progress_bar
from ..render import console, percent, print_json
from ..specs import spec_from_served


def number_truth(devices: Any) -> dict[str, Any]:
    """What the devices of a numeric or histogram metric hold: their mean, or their buckets'
    shares and quantiles."""
    if render_of(devices.spec).mean:
        return {"mean": devices.mean}
    quantiles = {f"{q:g}": devices.quantile(q) for q in DEFAULT_QUANTILES}
    return {"shares": devices.shares, "quantiles": quantiles}


def truth_table(shares: dict[str, float]) -> Any:
    """A table of the true shares the simulated devices hold."""
    from rich.table import Table

    table = Table()
    table.add_column("category")
    table.add_column("true share", justify="right")
    for category, share in shares.items():
        table.add_row(category, percent(share))
    return table


@click.command(short_help="Simulate N devices reporting a metric through the SDK.")
@click.option("--metric", "name", required=True, help="The registered metric to report.")
@click.option(
    "--clients",
    type=click.IntRange(min=1, max=10_000_000),
    required=True,
    metavar="N",
    help="How many simulated devices.",
)
@click.option(
    "--distribution",
    default="zipf",
    show_default=True,
    metavar="zipf|uniform|JSON|FILE",
    help="True shares: zipf, uniform, a JSON object of weights such as"
    """ '{"chrome": 3, "safari": 1}', or a file holding one or 'category,weight' lines."""
    " Numeric and histogram metrics: devices hold lognormal numbers (leave this out).",
)
@click.option(
    "--seed",
    type=int,
    help="Seed the true values and the randomizers (reproducible; for testing only).",
)
@click.option(
    "--date",
    type=DATE,
    help="UTC date the devices report on (default today); must be inside the collector's window.",
)
@click.option(
    "--ingest-key",
    envvar="DENIABLE_INGEST_KEY",
    metavar="KEY",
    help="The collector's ingest key, if it has one (env DENIABLE_INGEST_KEY; default: the admin token, which the collector also accepts for uploads).",
)
@format_option("table", "json")
@pass_global_options
def simulate(
    global_options: GlobalOptions,
    name: str,
    clients: int,
    distribution: str,
    seed: int | None,
    date: dt.date | None,
    ingest_key: str | None,
    fmt: str,
) -> None:
    """Simulate N devices that each send one randomized report of a metric through the SDK.

    Every device holds a true value drawn from the distribution (exact shares, shuffled)
    and reports once in the period of DATE; the true distribution is printed so that you
    can compare it with `deniable estimate`. Each device's report is randomized by the SDK
    with fresh randomness; batches of 1,000 devices share one SDK Client with memoization
    off, which sends exactly what 1,000 separate devices would.

    \b
    Examples:
      deniable simulate --metric browser --clients 20000 --distribution zipf --seed 7
      deniable simulate --metric browser --clients 5000 --distribution shares.csv
      deniable simulate --metric dark_mode --clients 1000 --distribution '{"true": 1, "false": 3}'
    """
    from ..simulated_devices import distribution as true_shares
    from ..simulated_devices import is_inline, number_population, population, run_devices

    if distribution not in ("zipf", "uniform") and not is_inline(distribution):
        from pathlib import Path

        if not Path(distribution).is_file():
            raise click.BadParameter(
                f"{distribution!r} is neither zipf, uniform, a JSON object nor an existing file",
                param_hint="'--distribution'",
            )
    with global_options.api() as api:
        spec = spec_from_served(api.get_metric(name))
    render = render_of(spec)
    if render.number_range is not None:
        if distribution != "zipf":
            raise click.UsageError(
                f"{name} is a {spec.type} metric: its devices hold lognormal numbers; leave out"
                " --distribution"
            )
        devices = number_population(spec, clients, random.Random(seed))
    else:
        weights = true_shares(distribution, spec.categories)
        devices = population(spec, clients, weights, random.Random(seed))
    moment = dt.datetime.combine(date, dt.time(12), dt.UTC) if date else dt.datetime.now(dt.UTC)
    with progress_bar() as bar:
        task = bar.add_task(f"{name}: devices reporting", total=clients)
        delivery = run_devices(
            global_options.collector_url,
            [devices],
            ingest_key=ingest_key or global_options.token,
            seed=seed,
            moment=moment,
            on_batch=lambda done: bar.advance(task, done),
        )
    period = spec.period_of(moment)
    if fmt == "json":
        print_json(
            {
                "metric": name,
                "period": period,
                "clients": clients,
                "distribution": "lognormal" if devices.numbers else distribution,
                "seed": seed,
                "truth": number_truth(devices) if devices.numbers else devices.shares,
                "delivered": delivery.delivered,
                "duplicates": delivery.duplicates,
            }
        )
        return
    out = console()
    if render.mean:
        out.print(
            f"true mean of {name} among the {clients:,} simulated devices: {devices.mean:,.1f}"
            f" (lognormal values clamped to [{spec.lower:g}, {spec.upper:g}])"
        )
    else:
        out.print(f"true distribution of {name} among the {clients:,} simulated devices:")
        out.print(truth_table(devices.shares))
    if render.quantiles:
        quantiles = ", ".join(f"p{q * 100:g} {devices.quantile(q):,.1f}" for q in DEFAULT_QUANTILES)
        out.print(f"true quantiles: {quantiles}")
    click.echo(
        f"{delivery.delivered:,} randomized report(s) of {name} delivered for period {period}"
        f" ({clients:,} devices); estimate with: deniable estimate {name} --start {period} --end {period}"
    )
