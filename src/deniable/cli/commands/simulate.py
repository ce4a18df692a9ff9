"""``deniable simulate``: N simulated devices report a metric through the real SDK."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from typing import Any

import click

from deniable.estimators import DEFAULT_QUANTILES

from ..kindrender import render_of
from ..options import DATE, GlobalOptions, format_option, pass_global_options
from ..progress import progress_bar
from ..render import console, number_column, percent, print_json, words_column
from ..specs import spec_from_served


def number_truth(devices: Any) -> dict[str, Any]:
    """What the devices of a numeric or histogram metric hold: their mean, or their buckets'
    shares and quantiles."""
    if render_of(devices.spec).mean:
        return {"mean": devices.mean}
    quantiles = {f"{q:g}": devices.quantile(q) for q in DEFAULT_QUANTILES}
    return {"shares": devices.shares, "quantiles": quantiles}


@dataclass(frozen=True)
class Simulation:
    """The options of one ``deniable simulate`` run (see its ``--help``), which both the
    recorded-values and the event-metric simulation read."""

    clients: int
    distribution: str
    seed: int | None
    date: dt.date | None
    active: float
    rate: float | None
    ingest_key: str | None
    fmt: str


def truth_table(shares: dict[str, float]) -> Any:
    """A table of the true shares the simulated devices hold."""
    from rich.table import Table

    table = Table()
    words_column(table, "category")
    number_column(table, "true share")
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
    help="UTC date the devices report on (default today); must be inside the collector's window."
    " An event metric: its window reported is the last that ends on DATE or before (default"
    " yesterday).",
)
@click.option(
    "--active",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=0.7,
    show_default=True,
    metavar="P",
    help="Event metrics: the chance a device is active (the app open) on each day of the"
    " window; a device active on no day of it sends nothing.",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    metavar="R",
    help="Event metrics: for an any metric the chance the event occurs on an active day (each"
    " device its own, beta-distributed with mean R; default 0.3); otherwise the mean number"
    " of event() calls or observations per active day (each device its own rate,"
    " gamma-distributed with mean R, then Poisson; default 1).",
)
@click.option(
    "--ingest-key",
    envvar="DENIABLE_INGEST_KEY",
    metavar="KEY",
    help="The collector's ingest key, if it has one (env DENIABLE_INGEST_KEY; default: the admin token, which the collector also accepts for uploads).",
)
@format_option("table", "json")
@pass_global_options
def simulate(global_options: GlobalOptions, name: str, **options: Any) -> None:
    """Simulate N devices that each send one randomized report of a metric through the SDK.

    Every device holds a true value drawn from the distribution (exact shares, shuffled)
    and reports once in the period of DATE; the true distribution is printed so that you
    can compare it with `deniable estimate`. Each device's report is randomized by the SDK
    with fresh randomness; batches of 1,000 devices share one SDK Client with memoization
    off, which sends exactly what 1,000 separate devices would.

    An event metric (one registered with --aggregate) is simulated over days instead: each
    device is active on each day of the window with chance --active, calls event() (any,
    count) or observe() (the others) on its active days as --rate says, and the SDK
    aggregates them on the device and sends one report for the window: the last window that
    ends on DATE or before (default: yesterday), sent the day after it. Observed values are
    lognormal numbers in the metric's range, or for a mode metric categories drawn from
    --distribution. The truth printed is that window's value over the devices that report it,
    so the estimate of that one period counts devices.

    \b
    Examples:
      deniable simulate --metric browser --clients 20000 --distribution zipf --seed 7
      deniable simulate --metric browser --clients 5000 --distribution shares.csv
      deniable simulate --metric dark_mode --clients 1000 --distribution '{"true": 1, "false": 3}'
      deniable simulate --metric crashes --clients 5000 --rate 0.4 --active 0.8
      deniable simulate --metric search_used --clients 5000 --rate 0.2
    """
    from ..simulated_devices import distribution as true_shares
    from ..simulated_devices import is_inline, number_population, population, run_devices

    run = Simulation(**options)
    if run.distribution not in ("zipf", "uniform") and not is_inline(run.distribution):
        from pathlib import Path

        if not Path(run.distribution).is_file():
            raise click.BadParameter(
                f"{run.distribution!r} is neither zipf, uniform, a JSON object nor an existing file",
                param_hint="'--distribution'",
            )
    with global_options.api() as api:
        spec = spec_from_served(api.get_metric(name))
    render = render_of(spec)
    if spec.events is not None:
        simulate_events(global_options, spec, run)
        return
    if render.number_range is not None:
        if run.distribution != "zipf":
            raise click.UsageError(
                f"{name} is a {spec.type} metric: its devices hold lognormal numbers; leave out"
                " --distribution"
            )
        devices = number_population(spec, run.clients, random.Random(run.seed))
    else:
        weights = true_shares(run.distribution, spec.categories)
        devices = population(spec, run.clients, weights, random.Random(run.seed))
    moment = (
        dt.datetime.combine(run.date, dt.time(12), dt.UTC) if run.date else dt.datetime.now(dt.UTC)
    )
    with progress_bar() as bar:
        task = bar.add_task(f"{name}: devices reporting", total=run.clients)
        delivery = run_devices(
            global_options.collector_url,
            [devices],
            ingest_key=run.ingest_key or global_options.token,
            seed=run.seed,
            moment=moment,
            on_batch=lambda done: bar.advance(task, done),
        )
    period = spec.period_of(moment)
    if run.fmt == "json":
        print_json(
            {
                "metric": name,
                "period": period,
                "clients": run.clients,
                "distribution": "lognormal" if devices.numbers else run.distribution,
                "seed": run.seed,
                "truth": number_truth(devices) if devices.numbers else devices.shares,
                "delivered": delivery.delivered,
                "duplicates": delivery.duplicates,
            }
        )
        return
    out = console()
    if render.mean:
        out.print(
            f"true mean of {name} among the {run.clients:,} simulated devices: {devices.mean:,.1f}"
            f" (lognormal values clamped to [{spec.lower:g}, {spec.upper:g}])"
        )
    else:
        out.print(f"true distribution of {name} among the {run.clients:,} simulated devices:")
        out.print(truth_table(devices.shares))
    if render.quantiles:
        quantiles = ", ".join(f"p{q * 100:g} {devices.quantile(q):,.1f}" for q in DEFAULT_QUANTILES)
        out.print(f"true quantiles: {quantiles}")
    click.echo(
        f"{delivery.delivered:,} randomized report(s) of {name} delivered for period {period}"
        f" ({run.clients:,} devices); estimate with: deniable estimate {name} --start {period} --end {period}"
    )


def last_window(spec: Any, date: dt.date) -> Any:
    """The event metric's last window that ends on ``date`` or before (a
    :class:`~deniable.client.windows.Window`)."""
    from deniable.client.windows import day_number, window_ending

    day = day_number(date)
    while (window := window_ending(spec, spec.events, day)) is None:
        day -= 1
    return window


def simulate_events(global_options: GlobalOptions, spec: Any, run: Simulation) -> None:
    """Simulate ``clients`` devices counting an event metric's events over its last window
    to ``date`` (see ``simulate --help``) and print the window's truth."""
    from deniable.client.windows import day_date

    from ..simulated_devices import Population
    from ..simulated_devices import distribution as true_shares
    from ..simulated_events import event_streams, run_event_devices, window_truth

    rule = spec.events
    weights = None
    if rule.aggregate == "mode":
        weights = true_shares(run.distribution, spec.categories)
    elif run.distribution != "zipf":
        raise click.UsageError(
            f"{spec.name} aggregates events by {rule.aggregate}: its devices' values come from"
            " --rate (and lognormal numbers); leave out --distribution"
        )
    rate = run.rate if run.rate is not None else 0.3 if rule.aggregate == "any" else 1.0
    if rule.aggregate == "any" and rate >= 1:
        raise click.BadParameter("for an any metric it is a chance: below 1", param_hint="'--rate'")
    window = last_window(spec, run.date or dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1))
    days = window.last - window.first + 1
    rng = random.Random(run.seed)
    devices = event_streams(
        spec, run.clients, days, active=run.active, rate=rate, rng=rng, weights=weights
    )
    with progress_bar() as bar:
        task = bar.add_task(f"{spec.name}: devices counting events", total=run.clients)
        delivery = run_event_devices(
            global_options.collector_url,
            [spec],
            devices,
            first_day=day_date(window.first),
            days=days,
            ingest_key=run.ingest_key or global_options.token,
            seed=run.seed,
            on_batch=lambda done: bar.advance(task, done),
        )
    values = window_truth(spec, devices, 0, days - 1)
    reporting = Population(
        spec,
        [
            int(v) if isinstance(v, bool) else spec.categories.index(v) if isinstance(v, str) else v
            for v in values
        ],
    )
    render = render_of(spec)
    if run.fmt == "json":
        print_json(
            {
                "metric": spec.name,
                "period": window.label,
                "window": {
                    "first": str(day_date(window.first)),
                    "last": str(day_date(window.last)),
                },
                "events": rule.to_dict(),
                "clients": run.clients,
                "devices": len(values),
                "active": run.active,
                "rate": rate,
                "seed": run.seed,
                "truth": (number_truth(reporting) if reporting.numbers else reporting.shares)
                if values
                else None,
                "delivered": delivery.delivered,
                "duplicates": delivery.duplicates,
            }
        )
        return
    out = console()
    what = f"{rule.aggregate} per device over {day_date(window.first)} … {day_date(window.last)}"
    if not values:
        out.print(f"no device reports {spec.name}'s window ({what})")
    elif render.mean:
        out.print(
            f"true mean of {spec.name} ({what}) among the {len(values):,} devices that report"
            f" it: {reporting.mean:,.2f}"
        )
    else:
        out.print(
            f"true distribution of {spec.name} ({what}) among the {len(values):,} devices that"
            " report it:"
        )
        out.print(truth_table(reporting.shares))
    if values and render.quantiles:
        quantiles = ", ".join(
            f"p{q * 100:g} {reporting.quantile(q):,.1f}" for q in DEFAULT_QUANTILES
        )
        out.print(f"true quantiles: {quantiles}")
    click.echo(
        f"{delivery.delivered:,} randomized report(s) of {spec.name} delivered for period"
        f" {window.label} ({len(values):,} of {run.clients:,} devices: one per device active in the"
        f" window); estimate with: deniable estimate {spec.name} --start {window.label} --end"
        f" {window.label}"
    )
