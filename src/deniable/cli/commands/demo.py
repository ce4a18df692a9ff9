"""``deniable demo``: a complete round trip with nothing set up, in well under 30 seconds.

Starts a collector on a temporary SQLite database, registers a boolean, a categorical, a
numeric and a histogram metric, has 20,000 simulated devices report them all through the SDK,
and prints each estimate beside the truth with its 95% (simultaneous) interval: shares, a
mean, and a histogram's quantiles. The boolean has a public dimension (the devices' platform,
sent in the clear): the demo also prints its breakdown by platform and the difference between
two platforms with its interval and verdict.

Two event metrics follow (issue 40): the devices count crashes and uses of a search feature on
the device with ``event()`` over the seven days before today, and each sends one report per
window it was active in, whatever its number of events: crashes per device-day (a histogram
of yesterday's counts) and the share of the 7-day actives that used search, each estimate
beside the truth and counted in devices.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from deniable.client.account import max_periods_touched
from deniable.client.spec import OTHER
from deniable.estimators import DEFAULT_QUANTILES, quantile_bounds
from deniable.estimators.privacy import PRIVACY_DOC

from ..api import CollectorAPI
from ..kindrender import render_of
from ..options import DEFAULT_CONFIDENCE, format_option
from ..progress import progress_bar
from ..render import (
    axis_label,
    bar_with_whisker,
    console,
    fit_bar,
    interval,
    level_text,
    mean_texts,
    mean_whisker,
    number_column,
    percent,
    print_json,
    reports_text,
    words_column,
)
from ..specs import spec_from_served

if TYPE_CHECKING:
    from rich.table import Table

DEMO_PLATFORMS: dict[str, tuple[float, float]] = {
    "ios": (0.45, 0.44),
    "android": (0.40, 0.35),
    "web": (0.15, 0.28),
}
"""Each platform's share of the simulated devices and its true share of dark mode (together
the 38% of :data:`DEMO_TRUTH`; exactly, for the default 20,000 devices)."""
DEMO_COMPARED = ("ios", "android")
"""The two platforms whose difference the demo prints."""

DEMO_METRICS: tuple[dict[str, Any], ...] = (
    {
        "name": "dark_mode",
        "type": "boolean",
        "epsilon": 1.0,
        "mechanism": "auto",
        "period": "day",
        "dimensions": {"platform": list(DEMO_PLATFORMS)},
    },
    {
        "name": "browser",
        "type": "categorical",
        "categories": ["chrome", "safari", "edge", "firefox", "other"],
        "epsilon": 2.0,
        "mechanism": "auto",
        "period": "week",
    },
    {
        "name": "load_ms",
        "type": "numeric",
        "lower": 0,
        "upper": 5000,
        "epsilon": 1.0,
        "mechanism": "auto",
        "period": "week",
    },
    {
        "name": "load_hist",
        "type": "histogram",
        "edges": [0, 100, 250, 500, 1000, 2000, 5000],
        "epsilon": 1.0,
        "mechanism": "auto",
        "period": "week",
    },
)
"""The metrics the demo registers: browser and load times weekly (they change slowly), so that
one device's 30-day total with the SDK's defaults stays under the warning level with the event
metrics' two daily reports (docs/privacy.md, "The warning level"); each still reports today."""

DEMO_EVENT_METRICS: tuple[dict[str, Any], ...] = (
    {
        "name": "crashes",
        "type": "histogram",
        "edges": [0, 1, 2, 3, 5, 10],
        "epsilon": 1.0,
        "mechanism": "auto",
        "period": "day",
        "events": {"aggregate": "count", "window": "period"},
    },
    {
        "name": "search_used",
        "type": "boolean",
        "epsilon": 1.0,
        "mechanism": "auto",
        "period": "day",
        "events": {"aggregate": "any", "window": 7},
    },
)
"""The event metrics the demo registers: crashes per device per day (``count``) and whether a
device used search in the last 7 days (``any``, rolling)."""

EVENT_DEVICES = 2
"""One device in this many counts events too (the first ones): a device's week of days costs
more than its recorded values, and the demo keeps its runtime."""

EVENT_DAYS = 7
"""The days before today the devices count events on; today they open the app once more and
the windows that closed are sent."""

DEMO_ACTIVITY: tuple[tuple[float, float], ...] = ((0.45, 0.95), (0.35, 0.55), (0.20, 0.2))
"""Shares of the devices and the chance each is active (the app open) on a day."""

DEMO_SEARCH: tuple[tuple[float, float], ...] = ((0.3, 0.5), (0.4, 0.08), (0.3, 0.0))
"""Shares of the devices and the chance each uses search on a day it is active."""

DEMO_CRASH_RATE = 0.6
"""Mean crashes per device-day; each device's own rate is this times a gamma draw of mean 1
(shape 1/2), so most devices rarely crash and a few often."""

DEMO_TRUTH: dict[str, list[float]] = {
    "dark_mode": [0.62, 0.38],
    "browser": [0.46, 0.24, 0.13, 0.10, 0.07],
}
"""The true shares the simulated devices hold, in category order."""


ACCOUNT_DAYS = 30
"""The window of the account's total the demo states (the warning level's)."""

HEADINGS = {"truth inside": "truth\ninside"}
"""Headings broken between words, so that a column is no wider than its cells."""


def _comparison_table(
    spec: dict[str, Any], truth: dict[str, float], document: dict[str, Any]
) -> Any:
    """A metric's estimates beside the truth, each interval drawn over its bar."""
    from rich.table import Table

    rows = document["estimates"]
    scale = min(1.0, max(max(r["ci_high"] for r in rows), max(truth.values()), 0.01))
    table = Table(
        title=f"{spec['name']} · {document.get('mechanism')} ε={document.get('epsilon')} · "
        f"{reports_text(document)} · {level_text(DEFAULT_CONFIDENCE)} simultaneous intervals",
        title_justify="left",
    )
    headers = ["category", "truth", "estimate", "interval", "truth inside"]
    texts = [_truth_texts(row["category"], truth[row["category"]], row) for row in rows]
    width = fit_bar(headers, texts)
    _share_columns(table, headers, scale)
    for row, text in zip(rows, texts, strict=True):
        table.add_row(
            *text, bar_with_whisker(row["frequency"], row["ci_low"], row["ci_high"], scale, width)
        )
    return table


def _truth_texts(name: str, true: float, estimate: dict[str, Any]) -> list[str]:
    """The text cells of a share's ``estimate`` row beside its ``true`` share: the name, the
    truth, the estimate, its interval, and whether the interval holds the truth."""
    low, high = estimate["ci_low"], estimate["ci_high"]
    inside = low <= true <= high
    return [
        name,
        percent(true),
        percent(estimate["frequency"]),
        interval(low, high),
        "✓" if inside else "✗",
    ]


def _share_columns(table: Table, headers: list[str], scale: float) -> None:
    """Add ``headers`` to ``table`` (the first, the row's name, to the left; the numbers to
    the right), then the bar column drawn from 0 to ``scale``."""
    words_column(table, headers[0])
    for header in headers[1:]:
        number_column(table, HEADINGS.get(header, header))
    table.add_column(f"0 … {percent(scale)}", no_wrap=True)


def _mean_table(spec: dict[str, Any], truth: float, document: dict[str, Any]) -> Any:
    """A numeric metric's mean beside the truth, its interval drawn on the metric's range."""
    from rich.table import Table

    lower, upper = float(document["lower"]), float(document["upper"])
    mean = document["mean"]
    table = Table(
        title=f"{spec['name']} · {document.get('mechanism')} ε={document.get('epsilon')} · "
        f"{reports_text(document)} · mean · {level_text(DEFAULT_CONFIDENCE)} interval",
        title_justify="left",
    )
    headers = ["truth", "estimate", "margin", "interval", "truth inside"]
    shown, margin, between = mean_texts(mean, lower, upper)
    inside = mean["ci_low"] <= truth <= mean["ci_high"]
    texts = [f"{truth:,.1f}", shown, margin, between, "✓" if inside else "✗"]
    width = fit_bar(headers, [texts])
    for header in headers:
        number_column(table, HEADINGS.get(header, header))
    table.add_column(axis_label(lower, upper), no_wrap=True)
    table.add_row(*texts, mean_whisker(mean, lower, upper, width))
    return table


def _quantiles_table(
    spec: dict[str, Any], truth: dict[str, float], document: dict[str, Any]
) -> Any:
    """A histogram's quantile intervals beside the true quantiles."""
    from rich.table import Table

    table = Table(
        title=f"{spec['name']} · quantiles · {level_text(DEFAULT_CONFIDENCE)} jointly",
        title_justify="left",
    )
    for header in ("quantile", "truth", "at least", "at most", "truth inside"):
        number_column(table, HEADINGS.get(header, header))
    for entry in document["quantiles"]:
        true = truth[f"{entry['q']:g}"]
        table.add_row(
            f"p{entry['q'] * 100:g}",
            f"{true:,.1f}",
            *quantile_bounds(entry, document["edges"], "{:,g}".format),
            "✓" if _quantile_inside(entry, true) else "✗",
        )
    return table


def _quantile_inside(entry: dict[str, Any], true: float) -> bool:
    """Whether a quantile interval (an open end is null) holds ``true``."""
    low, high = entry["low"], entry["high"]
    return (low is None or low <= true) and (high is None or true <= high)


def platform_devices(
    clients: int, rng: random.Random
) -> tuple[list[dict[str, str]], dict[str, list[int]]]:
    """Each device's context (its platform, in :data:`DEMO_PLATFORMS`' shares) and dark mode
    value (0 or 1, in its platform's true share), devices grouped by platform."""
    from ..simulated_devices import allocate

    names = list(DEMO_PLATFORMS)
    counts = [0] * len(names)
    for index in allocate(clients, [share for share, _ in DEMO_PLATFORMS.values()], rng):
        counts[index] += 1
    contexts: list[dict[str, str]] = []
    values: dict[str, list[int]] = {}
    for name, count in zip(names, counts, strict=True):
        dark = DEMO_PLATFORMS[name][1]
        values[name] = allocate(count, [1 - dark, dark], rng)
        contexts.extend({"platform": name} for _ in range(count))
    return contexts, values


def demo_populations(
    specs: list[Any], clients: int, rng: random.Random
) -> tuple[list[Any], list[dict[str, str]], dict[str, float]]:
    """Every demo metric's devices, each device's context, and dark mode's true share per
    platform: dark mode's values follow each platform's truth, the others the whole
    population's."""
    from ..simulated_devices import Population, number_population, population

    contexts, by_platform = platform_devices(clients, rng)
    dark = [value for values in by_platform.values() for value in values]
    populations = [
        number_population(s, clients, rng)
        if render_of(s).number_range is not None
        else Population(s, dark)
        if s.name == "dark_mode"
        else population(s, clients, DEMO_TRUTH[s.name], rng)
        for s in specs
    ]
    truths = {name: sum(values) / len(values) for name, values in by_platform.items() if values}
    return populations, contexts, truths


def demo_event_devices(clients: int, rng: random.Random) -> list[Any]:
    """Each device's :data:`EVENT_DAYS` days: the days it is active on (its level of
    :data:`DEMO_ACTIVITY`), its searches on them (at most one counted a day: ``any`` needs
    no more; its level of :data:`DEMO_SEARCH`), and its crashes yesterday (Poisson at its own
    rate, :data:`DEMO_CRASH_RATE`), the only day the crashes metric is known on."""
    from ..simulated_devices import allocate
    from ..simulated_events import DeviceDays, poisson

    activity = allocate(clients, [share for share, _ in DEMO_ACTIVITY], rng)
    search = allocate(clients, [share for share, _ in DEMO_SEARCH], rng)
    last = EVENT_DAYS - 1
    devices = []
    for level, user in zip(activity, search, strict=True):
        chance, uses = DEMO_ACTIVITY[level][1], DEMO_SEARCH[user][1]
        active = tuple(d for d in range(EVENT_DAYS) if rng.random() < chance)
        searches = {d: 1 + poisson(rng, 1.0) for d in active if rng.random() < uses}
        rate = DEMO_CRASH_RATE * rng.gammavariate(0.5, 2.0)
        crashes = {last: poisson(rng, rate)} if last in active else {}
        devices.append(DeviceDays(active, {"search_used": searches, "crashes": crashes}))
    return devices


def demo_event_populations(specs: list[Any], devices: list[Any]) -> list[Any]:
    """What the devices that report each event metric's window hold: yesterday's crash counts
    of the devices active yesterday, and whether each device active in the last 7 days used
    search (1) or not (0)."""
    from ..simulated_devices import Population
    from ..simulated_events import window_truth

    populations = []
    for spec in specs:
        first = 0 if spec.events.rolling else EVENT_DAYS - 1
        values = window_truth(spec, devices, first, EVENT_DAYS - 1)
        populations.append(Population(spec, [int(v) if isinstance(v, bool) else v for v in values]))
    return populations


def _devices_line(result: dict[str, Any]) -> str:
    """The estimated number of devices where an ``any`` event occurred beside the truth."""
    document, truth = result["estimate"], result["truth"]
    found, n = document["devices_with_event"], document["active_devices"]
    level = level_text(DEFAULT_CONFIDENCE)
    return (
        f"{result['spec']['name']}: {found['estimate']:,.0f} of {n:,} devices active in the 7"
        f" days to {document['start']} ({level} interval {found['low']:,.0f} to"
        f" {found['high']:,.0f}); truth {round(truth['true'] * n):,}"
    )


def _breakdown_table(document: dict[str, Any], truths: dict[str, float]) -> Any:
    """dark_mode's true share per platform beside its estimate and interval (all holding at
    once); a suppressed slice says so and shows no number."""
    from rich.table import Table

    rows = document["slices"]
    shown = [(row, _true_row(row)) for row in rows]
    highs = [estimate["ci_high"] for _, estimate in shown if estimate is not None]
    scale = min(1.0, max([*highs, *truths.values(), 0.01]))
    table = Table(
        title=f"{document['metric']} by platform · share true · every interval holds at once"
        f" ({level_text(document['confidence'])})",
        title_justify="left",
    )
    headers = ["platform", "truth", "estimate", "interval", "truth inside"]
    texts = []
    for row, estimate in shown:
        name = row["values"]["platform"]
        if estimate is None:
            texts.append([name, row["note"], "", "", ""])
            continue
        texts.append(_truth_texts(name, truths[name], estimate))
    width = fit_bar(headers, [t for t in texts if t[2]])
    _share_columns(table, headers, scale)
    hidden = []
    for (_, estimate), text in zip(shown, texts, strict=True):
        if estimate is None:
            name = text[0] + (" (a platform not listed)" if text[0] == OTHER else "")
            hidden.append(f"{name}: {text[1]}")
            continue
        bar = bar_with_whisker(
            estimate["frequency"], estimate["ci_low"], estimate["ci_high"], scale, width
        )
        table.add_row(*text, bar)
    table.caption = "; ".join(hidden) or None
    table.caption_justify = "left"
    return table


def _true_row(row: dict[str, Any]) -> dict[str, Any] | None:
    """A shown slice's row for the category true (None for a suppressed slice)."""
    if row["estimate"] is None:
        return None
    return next(r for r in row["estimate"]["estimates"] if r["category"] == "true")


def comparable(document: dict[str, Any]) -> bool:
    """Whether both :data:`DEMO_COMPARED` platforms are shown (a suppressed one has nothing to
    compare)."""
    shown = {row["values"]["platform"] for row in document["slices"] if not row["suppressed"]}
    return set(DEMO_COMPARED) <= shown


def comparison_line(document: dict[str, Any], truths: dict[str, float]) -> str:
    """The difference between the two compared platforms' dark mode shares, in plain words."""
    compared = document.get("comparison")
    if compared is None:
        first, second = DEMO_COMPARED
        return f"{first} − {second}: not compared, a platform is suppressed"
    first, second = compared["first"]["platform"], compared["second"]["platform"]
    row = next(r for r in compared["rows"] if r["category"] == "true")
    true = truths[first] - truths[second]
    level = level_text(compared["confidence"])
    return (
        f"{first} − {second}, share true: {row['difference'] * 100:+.1f} points ({level} interval"
        f" {row['ci_low'] * 100:+.1f} to {row['ci_high'] * 100:+.1f}): {row['verdict']}"
        f" (truth {true * 100:+.1f})"
    )


def coverage_line(results: list[dict[str, Any]], slices_inside: bool) -> str:
    """How many of the printed sets of intervals hold their truth, with the miss rate their
    level expects: at 95% about 1 set in 20 misses, so a ✗ is no fault on its own."""
    sets = len(results) + 1
    held = sum(1 for result in results if result["all_inside"]) + int(slices_inside)
    level = level_text(DEFAULT_CONFIDENCE)
    miss = round(1 / (1 - DEFAULT_CONFIDENCE))
    return (
        f"truth inside: every interval holds its truth (✓) in {held} of {sets} estimates."
        f" Each estimate's intervals hold together with {level} confidence, so about 1"
        f" estimate in {miss} is expected to miss somewhere (✗) by chance alone."
    )


def _truth(pop: Any) -> Any:
    """What the demo's devices hold for one metric: shares, a mean, or shares and quantiles."""
    render = render_of(pop.spec)
    if render.mean:
        return pop.mean
    if render.quantiles:
        quantiles = {f"{q:g}": pop.quantile(q) for q in DEFAULT_QUANTILES}
        return {"shares": pop.shares, "quantiles": quantiles}
    return pop.shares


def _slices_inside(document: dict[str, Any], truths: dict[str, float]) -> bool:
    """Whether every shown slice's interval of the share true holds its platform's truth."""
    rows = [(row["values"]["platform"], _true_row(row)) for row in document["slices"]]
    return all(r["ci_low"] <= truths[name] <= r["ci_high"] for name, r in rows if r is not None)


def _all_inside(truth: Any, document: dict[str, Any]) -> bool:
    """Whether every interval of ``document`` holds its truth."""
    if "mean" in document:
        return bool(document["mean"]["ci_low"] <= truth <= document["mean"]["ci_high"])
    shares = truth["shares"] if "quantiles" in document else truth
    inside = all(
        r["ci_low"] <= shares[r["category"]] <= r["ci_high"] for r in document["estimates"]
    )
    for entry in document.get("quantiles", []):
        inside &= _quantile_inside(entry, truth["quantiles"][f"{entry['q']:g}"])
    return inside


def privacy_line(account: dict[str, Any]) -> str:
    """What one device's reports of the demo's metrics add up to with the SDK's defaults (the
    collector's privacy ``account``), against the warning level, and what keeps it there: the
    metrics reported less often than daily, and their share of the 30-day total."""
    total, level = account["total"], account["warning_level_30_days"]
    month = total["per_30_days"]
    said = (
        f"Privacy: with the SDK's defaults one device's reports of these"
        f" {len(account['metrics'])} metrics add up to at most ε {total['per_day']:g} a day and"
    )
    if month is None:
        return f"{said} no finite ε over 30 days ({PRIVACY_DOC}; `deniable privacy` says why)."
    side = "under" if month <= level else "above"
    said += f" {month:g} over 30 days, {side} the warning level of {level:g}"
    days = max_periods_touched("day", ACCOUNT_DAYS)
    clauses = []
    for period in ("week", "month"):
        sparse = [m["metric"] for m in account["metrics"] if m["period"] == period]
        if sparse:
            names = f"{', '.join(sparse[:-1])} and {sparse[-1]}" if sparse[1:] else sparse[0]
            share = sum(m["per_30_days"] or 0 for m in account["metrics"] if m["period"] == period)
            clauses.append(
                f"{names} report once a {period}, so any {ACCOUNT_DAYS} days hold at most"
                f" {max_periods_touched(period, ACCOUNT_DAYS)} of each one's reports, not {days}"
                f" (ε {share:g} of the {month:g})"
            )
    if clauses:
        said += ": " + "; ".join(clauses)
    return (
        f'{said}. {PRIVACY_DOC} ("The warning level") says what lowers a total; `deniable'
        " privacy` prints the account."
    )


@click.command(short_help="Start a collector, simulate 20,000 devices, compare with the truth.")
@click.option("--seed", type=int, help="Seed the simulation for a reproducible run (testing only).")
@click.option(
    "--clients",
    type=click.IntRange(min=100, max=1_000_000),
    default=20_000,
    show_default=True,
    metavar="N",
    help="Simulated devices.",
)
@click.option(
    "--dashboard",
    "keep_dashboard",
    is_flag=True,
    help="Leave the collector running with its dashboard (and print a viewer token) until Ctrl-C"
    " or SIGTERM.",
)
@click.option(
    "--port",
    type=click.IntRange(min=1, max=65535),
    help="Loopback port for the collector (default: a free one).",
)
@format_option("table", "json")
def demo(seed: int | None, clients: int, keep_dashboard: bool, port: int | None, fmt: str) -> None:
    """Run a collector, simulate devices through the SDK, and compare estimates with the truth.

    Nothing to set up: the collector uses a temporary SQLite database on a loopback port (a
    free one unless --port names it) and is stopped at the end; with --dashboard it stays up,
    with its dashboard, until Ctrl-C or SIGTERM (sign in with the viewer token it prints
    once). Either way its database is removed.

    \b
    Examples:
      deniable demo
      deniable demo --dashboard --port 8000
      deniable demo --seed 42 --format json
    """
    from ..localcollector import LocalCollector

    viewer = secrets.token_urlsafe(24) if keep_dashboard else None
    collector = LocalCollector(viewer_token=viewer, port=port)
    with _interrupted_by_termination() as shield:
        try:
            _run_demo(collector, seed, clients, fmt)
            if keep_dashboard and viewer is not None:
                _seed_history(collector, seed, clients)
                _keep_serving(collector, viewer)
        finally:
            shield()
            collector.stop()


@contextlib.contextmanager
def _interrupted_by_termination() -> Iterator[Callable[[], None]]:
    """Inside the block, SIGTERM and SIGHUP interrupt like Ctrl-C (a ``KeyboardInterrupt``), so
    the demo's collector is stopped and its temporary database removed however the demo is
    asked to end. The block gets a ``shield()`` to call before that clean-up: from then on
    these signals and Ctrl-C are ignored until the block ends, so a second one cannot cut the
    clean-up short. Only the main thread can set signal handlers; elsewhere the block runs as
    it is."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    signals = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])

    def shield() -> None:
        for each in (*signals, signal.SIGINT):
            signal.signal(each, signal.SIG_IGN)

    def interrupt(signum: int, frame: object) -> None:
        shield()
        raise KeyboardInterrupt

    previous = {each: signal.getsignal(each) for each in (*signals, signal.SIGINT)}
    for each in signals:
        signal.signal(each, interrupt)
    try:
        yield shield
    finally:
        for each, handler in previous.items():
            if handler is not None:  # None: set outside Python, so not ours to restore
                signal.signal(each, handler)


def _keep_serving(collector: Any, viewer: str) -> None:
    """Print the dashboard's URL and the viewer token (once), then wait for Ctrl-C or SIGTERM."""
    from deniable.client.errors import CollectorUnavailable

    click.echo("")
    click.echo(f"Dashboard: {collector.url}/dashboard/")
    click.echo(f"Viewer token (paste it on the sign-in page; shown only now): {viewer}")
    click.echo(
        "The collector keeps running with the demo's data; press Ctrl-C (or send SIGTERM) to"
        " stop it."
    )
    try:
        while collector.running():
            time.sleep(0.5)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
        return
    raise CollectorUnavailable("the demo collector stopped unexpectedly")


HISTORY_DAYS = 6
"""Days before today that ``demo --dashboard`` fills too, so the dashboard has a week to draw."""


def _seed_history(collector: Any, seed: int | None, clients: int) -> None:
    """Have a tenth of ``clients`` devices (fresh values from the same distributions) report
    every demo metric on each of the :data:`HISTORY_DAYS` days before today."""
    from ..simulated_devices import run_devices

    devices = max(100, clients // 10)
    rng = random.Random(None if seed is None else seed + 1)
    now = dt.datetime.now(dt.UTC)
    with CollectorAPI(collector.url, collector.token) as api:
        specs = [spec_from_served(api.get_metric(m["name"])) for m in DEMO_METRICS]
    with progress_bar() as bar:
        task = bar.add_task(
            f"{HISTORY_DAYS} earlier days, {devices:,} devices each", total=HISTORY_DAYS
        )
        for back in range(HISTORY_DAYS, 0, -1):
            populations, contexts, _ = demo_populations(specs, devices, rng)
            day_seed = None if seed is None else seed + back
            run_devices(
                collector.url,
                populations,
                seed=day_seed,
                moment=now - dt.timedelta(days=back),
                contexts=contexts,
            )
            bar.advance(task)


def _run_demo(collector: Any, seed: int | None, clients: int, fmt: str) -> None:
    """Start ``collector``, seed it with ``clients`` simulated devices as of now, and print
    each estimate beside the truth (as tables or JSON)."""
    from ..simulated_devices import run_devices
    from ..simulated_events import run_event_devices

    started = time.monotonic()
    rng = random.Random(seed)
    moment = dt.datetime.now(dt.UTC)
    with progress_bar() as bar:
        boot = bar.add_task("starting a collector", total=1)
        collector.start()
        bar.advance(boot)
        with CollectorAPI(collector.url, collector.token) as api:
            registered = [api.create_metric(m) for m in DEMO_METRICS]
            specs = [spec_from_served(served) for served in registered]
            populations, contexts, platform_truths = demo_populations(specs, clients, rng)
            task = bar.add_task(f"{clients:,} devices reporting", total=clients)
            delivery = run_devices(
                collector.url,
                populations,
                seed=seed,
                moment=moment,
                on_batch=lambda done: bar.advance(task, done),
                contexts=contexts,
            )
            registered += [api.create_metric(m) for m in DEMO_EVENT_METRICS]
            event_specs = [spec_from_served(served) for served in registered[len(specs) :]]
            counting = max(100, clients // EVENT_DEVICES)
            event_devices = demo_event_devices(counting, rng)
            event_task = bar.add_task(
                f"{counting:,} devices counting events for {EVENT_DAYS} days", total=counting
            )
            first_day = moment.date() - dt.timedelta(days=EVENT_DAYS)
            events = run_event_devices(
                collector.url,
                event_specs,
                event_devices,
                first_day=first_day,
                days=EVENT_DAYS,
                known={"crashes": EVENT_DAYS - 2},
                seed=None if seed is None else seed + 1,
                on_batch=lambda done: bar.advance(event_task, done),
            )
            event_populations = demo_event_populations(event_specs, event_devices)
            yesterday = moment - dt.timedelta(days=1)
            results = []
            for spec, pop, when in [
                *((s, p, moment) for s, p in zip(specs, populations, strict=True)),
                *((s, p, yesterday) for s, p in zip(event_specs, event_populations, strict=True)),
            ]:
                period = spec.period_of(when)
                shares = {} if render_of(spec).mean else {"simultaneous": True}
                document = api.estimate(
                    spec.name,
                    start=period,
                    end=period,
                    confidence=DEFAULT_CONFIDENCE,
                    **shares,
                )
                truth = _truth(pop)
                results.append(
                    {
                        "spec": spec.to_dict(),
                        "truth": truth,
                        "estimate": document,
                        "all_inside": _all_inside(truth, document),
                    }
                )
            today = specs[0].period_of(moment)
            query = {"start": today, "end": today, "confidence": DEFAULT_CONFIDENCE}
            sliced = api.estimate("dark_mode", by="platform", **query)
            if comparable(sliced):
                pair = ",".join(DEMO_COMPARED)
                sliced = api.estimate("dark_mode", by="platform", compare=pair, **query)
            account = api.privacy()
    elapsed = time.monotonic() - started
    warnings = [warning for served in registered for warning in served.get("warnings", [])]
    if fmt == "json":
        print_json(
            {
                "seed": seed,
                "clients": clients,
                "delivered": delivery.delivered + events.delivered,
                "event_devices": counting,
                "event_reports": events.delivered,
                "confidence": DEFAULT_CONFIDENCE,
                "simultaneous": True,
                "elapsed_seconds": round(elapsed, 2),
                "metrics": results,
                "breakdown": {
                    "truth": platform_truths,
                    "estimate": sliced,
                    "all_inside": _slices_inside(sliced, platform_truths),
                },
                "privacy": account,
                "registration_warnings": warnings,
            }
        )
        return
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    out = console()
    for result in results:
        spec, truth, document = result["spec"], result["truth"], result["estimate"]
        if "mean" in document:
            out.print(_mean_table(spec, truth, document))
        elif "quantiles" in document:
            out.print(_comparison_table(spec, truth["shares"], document))
            out.print(_quantiles_table(spec, truth["quantiles"], document))
        else:
            out.print(_comparison_table(spec, truth, document))
    out.print(_breakdown_table(sliced, platform_truths))
    click.echo(comparison_line(sliced, platform_truths))
    click.echo(coverage_line(results, _slices_inside(sliced, platform_truths)))
    for result in results:
        if result["estimate"].get("devices_with_event") is not None:
            click.echo(_devices_line(result))
    click.echo("")
    click.echo(
        f"{clients:,} simulated devices sent {delivery.delivered:,} randomized reports through the SDK"
        f" in {elapsed:.1f} s; the collector never saw a true value."
    )
    click.echo(
        f"Each metric's intervals hold all its categories (or quantiles) at once with"
        f" {DEFAULT_CONFIDENCE:.0%} confidence; load_ms is a numeric metric (a mean),"
        " load_hist load times counted in buckets. dark_mode is broken down by platform, a public"
        " dimension each device sends in the clear; a slice with fewer than"
        f" {sliced['min_slice_reports']:,} reports is suppressed."
    )
    click.echo(
        f"Over the {EVENT_DAYS} days before today {counting:,} of the devices also counted"
        " events on the device (event(), any number of times): crashes and search use. Each"
        f" sent one report per window it was active in, {events.delivered:,} in all, so those"
        " estimates count"
        " devices: crashes per device-day is yesterday's histogram over the devices active"
        " yesterday, search_used the share of the devices active in the 7 days to yesterday"
        " that used search."
    )
    click.echo(privacy_line(account))
    click.echo("Next: `deniable serve`, then `deniable metrics create --help`.")
