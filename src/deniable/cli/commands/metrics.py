"""``deniable metrics``: register and archive metrics, read their specs, fingerprints and
expected precision.

``create`` states the margin of error a spec will give before it registers it, and refuses a
weak spec (ε above what devices accept by default, or a margin of all categories at once wider
than :data:`WEAK_MARGIN` at 10,000 reports) unless ``--accept-weak`` says it is meant.
"""

from __future__ import annotations

from typing import Any

import click
from rich.text import Text

from deniable.client.errors import InvalidInput
from deniable.client.events import AGGREGATES, WINDOW_DAYS
from deniable.client.kinds import KINDS, BooleanSpec, CategoricalSpec, SetSpec, TextSpec
from deniable.client.mechanisms import NUMERIC_MECHANISMS
from deniable.client.sdk import DEFAULT_MAX_EPSILON
from deniable.client.spec import MetricSpec, PeriodKind
from deniable.estimators.documents import events_text, window_counts_devices

from ..kindrender import categories_rows, kind_named, render_named, render_of
from ..options import (
    DEFAULT_CONFIDENCE,
    MECHANISM_CHOICES,
    GlobalOptions,
    bounds_options,
    confidence_option,
    epsilon_option,
    format_option,
    max_length_option,
    number_list,
    pass_global_options,
    period_kind_option,
)
from ..render import (
    console,
    number_column,
    percentage_points,
    print_json,
    words_column,
    write_csv,
)
from ..specs import spec_from_served

PLANNING_SIZES = (1_000, 10_000, 100_000)
"""Report counts at which ``metrics create`` and ``metrics show`` state the expected margin."""

WEAK_MARGIN_REPORTS = 10_000
"""The report count at which ``metrics create`` judges a spec's margin of error."""

WEAK_MARGIN = 0.05
"""The widest margin of all categories at once (simultaneous, 95%) at
:data:`WEAK_MARGIN_REPORTS` reports that ``metrics create`` registers without --accept-weak."""

SPEC_FIELDS = ("name", "type", "categories", "epsilon", "mechanism", "period", "fingerprint")
ABOUT_FIELDS = ("unit", "description", "owner")
"""What a registration says of a metric beside its spec (not in its fingerprint)."""


def about_options(kind: str | None, unit: str | None, **texts: str | None) -> dict[str, str]:
    """The ``--unit``, ``--description`` and ``--owner`` given, as registration fields; a
    usage error for a unit on a metric that has no values in units (the collector checks
    the rest: lengths, control characters)."""
    render = render_named(kind)
    if unit is not None and (render is None or render.number_range is None):
        raise click.UsageError("--unit goes with --type numeric or --type histogram")
    given = {"unit": unit, **texts}
    return {key: value for key, value in given.items() if value is not None}


def parse_edges(text: str) -> list[float]:
    """``--edges 0,100,250`` as numbers; a usage error naming the item that is not one."""
    edges = number_list(text, lambda reason: click.UsageError(f"--edges: {reason}"))
    return [int(edge) if edge.is_integer() else edge for edge in edges]


def spec_from_options(
    name: str,
    categories: str | None,
    boolean: bool,
    epsilon: float,
    mechanism: str,
    period: PeriodKind,
    kind: str | None = None,
    lower: float | None = None,
    upper: float | None = None,
    edges: str | None = None,
) -> dict[str, Any]:
    """The JSON spec to register, validated locally with the SDK's MetricSpec first.

    ``kind`` (``--type``) numeric needs ``lower`` and ``upper``, histogram ``edges``; without
    it the type follows from --categories or --boolean.
    """
    numbers = {"--lower": lower, "--upper": upper, "--edges": edges}
    render = render_named(kind)
    wanted = () if render is None else render.number_flags
    if kind is not None and wanted:
        if boolean or categories is not None:
            raise click.UsageError(f"a {kind} metric takes no --categories or --boolean")
        missing = [flag for flag in wanted if numbers[flag] is None]
        extra = [
            flag for flag, value in numbers.items() if value is not None and flag not in wanted
        ]
        if missing or extra:
            raise click.UsageError(
                f"a {kind} metric needs {' and '.join(wanted)}"
                + (f", not {', '.join(extra)}" if extra else "")
            )
        fields = {
            "lower": lower,
            "upper": upper,
            "edges": parse_edges(edges) if edges is not None else None,
        }
        body: dict[str, Any] = {"name": name, "type": kind}
        body.update({flag[2:]: fields[flag[2:]] for flag in wanted})
        return _checked(body, epsilon, mechanism, period)
    given = [flag for flag, value in numbers.items() if value is not None]
    if given:
        raise click.UsageError(f"{given[0]} goes with --type numeric or --type histogram")
    if kind_named(kind) is BooleanSpec:
        boolean = True
    if boolean == (categories is not None):
        raise click.UsageError(
            "give exactly one of --categories a,b,c, --boolean, --type numeric --lower L"
            " --upper U or --type histogram --edges E0,E1,..."
        )
    if boolean:
        body = {"name": name, "type": BooleanSpec.type}
    else:
        names = [c.strip() for c in (categories or "").split(",")]
        body = {"name": name, "type": CategoricalSpec.type, "categories": names}
    return _checked(body, epsilon, mechanism, period)


def _checked(body: dict[str, Any], epsilon: float, mechanism: str, period: str) -> dict[str, Any]:
    """``body`` (name, type and domain) with its ε, resolved mechanism and period, checked by
    the SDK's spec of its kind first (read through the kind registry)."""
    spec = MetricSpec.from_dict(
        {**body, "epsilon": epsilon, "mechanism": mechanism, "period": period}
    )
    body.update({"epsilon": epsilon, "mechanism": spec.mechanism, "period": period})
    return body


def rules(delivery: str, events: dict[str, Any] | None) -> dict[str, Any]:
    """The body's delivery rule (only when not ``direct``, as a spec's JSON has it) and event
    rule (only when given)."""
    body: dict[str, Any] = {} if delivery == "direct" else {"delivery": delivery}
    if events is not None:
        body["events"] = events
    return body


def set_body(
    name: str,
    categories: str | None,
    boolean: bool,
    kind: str | None,
    numbers: tuple[float | None, float | None, str | None],
    max_items: int | None,
) -> dict[str, Any]:
    """The name, type, categories and max_items of a set metric to register; a usage error
    unless it has --categories and --max-items and nothing of another type."""
    render = render_named(kind)
    other = render is not None and not render.items_bound
    if other or boolean or numbers != (None, None, None):
        raise click.UsageError("--max-items goes with --categories (a set metric) only")
    if categories is None or max_items is None:
        raise click.UsageError("a set metric needs --categories a,b,c and --max-items L")
    names = [c.strip() for c in categories.split(",")]
    return {"name": name, "type": SetSpec.type, "categories": names, "max_items": max_items}


def margins(spec: MetricSpec, confidence: float) -> list[dict[str, Any]]:
    """Expected margin of error (per category and all at once, over the spec's k categories
    or buckets) at each planning size; for a numeric metric the mean's (value units, worst
    case over the populations), the same figure in both columns (one interval)."""
    from deniable.estimators import margin_of_error, mean_margin

    rows = []
    render = render_of(spec)
    bounds = render.number_range
    for n in PLANNING_SIZES:
        if render.planning_margin is not None:  # the kind's own (a set's: L times its oracle's)
            each, together = (
                render.planning_margin(spec, n, confidence, simultaneous)
                for simultaneous in (False, True)
            )
            rows.append({"reports": n, "margin": each, "simultaneous_margin": together})
            continue
        if render.mean and bounds is not None:
            lower, upper = bounds(spec)
            margin = mean_margin(
                lower,
                upper,
                spec.epsilon,
                n,
                confidence=confidence,
                mechanism=spec.numeric_randomizer,
            )
            rows.append({"reports": n, "margin": margin, "simultaneous_margin": margin})
            continue
        each, together = (
            float(
                margin_of_error(
                    spec.k,
                    spec.epsilon,
                    n,
                    confidence=confidence,
                    mechanism=spec.randomizer,
                    simultaneous=simultaneous,
                )
            )
            for simultaneous in (False, True)
        )
        rows.append({"reports": n, "margin": each, "simultaneous_margin": together})
    return rows


def _margin_table(rows: list[dict[str, Any]], confidence: float, spec: MetricSpec) -> Any:
    """A table of :func:`margins`' rows: the expected margin per category and all at once
    (a numeric metric's: of the mean, in its units), at so many reports (devices, for an
    event metric that reports every window: one window's reports are one per device)."""
    from rich.table import Table

    table = Table(
        title=f"expected margin of error ({confidence * 100:g}% interval, worst case)",
        title_justify="left",
    )
    render = render_of(spec)
    counted = "devices" if window_counts_devices(spec) else "reports"
    if render.mean:
        table.add_column(counted, justify="right")
        table.add_column(f"mean (on [{spec.lower:g}, {spec.upper:g}])", justify="right")
        for row in rows:
            table.add_row(f"{row['reports']:,}", f"±{row['margin']:,.3g}")
        return table
    table.title = (
        f"expected margin of error in percentage points ({confidence * 100:g}% interval,"
        " worst case)"
    )
    table.add_column(counted, justify="right")
    one, many = render.items
    table.add_column(f"each {one} ({spec.domain})", justify="right")
    table.add_column(f"all {many} at once", justify="right")
    for row in rows:
        table.add_row(
            f"{row['reports']:,}",
            f"±{row['margin'] * 100:.2f}",
            f"±{row['simultaneous_margin'] * 100:.2f}",
        )
    return table


def weaknesses(spec: MetricSpec, rows: list[dict[str, Any]]) -> list[str]:
    """Why ``spec`` (with its :func:`margins` ``rows`` at 95%) is weak, one phrase a reason;
    empty if it is not: ε above what devices accept by default, or a wide margin."""
    reasons = []
    if spec.epsilon > DEFAULT_MAX_EPSILON:
        reasons.append(
            f"ε={spec.epsilon:g} is above {DEFAULT_MAX_EPSILON:g}, so devices refuse the spec"
            " by default (the SDK's max_epsilon) and each report is barely randomized"
        )
    at = next(r for r in rows if r["reports"] == WEAK_MARGIN_REPORTS)
    render = render_of(spec)
    if render.mean:
        return reasons
    if at["simultaneous_margin"] > WEAK_MARGIN:
        reasons.append(
            f"with {WEAK_MARGIN_REPORTS:,} reports all {spec.domain} at once are known only to"
            f" {percentage_points(at['simultaneous_margin'], '.1f')}"
            f" (more than {percentage_points(WEAK_MARGIN, 'g')});"
            f" use fewer {render.items[1]} or a larger ε"
        )
    return reasons


def events_body(
    aggregate: str | None, window: str | None, report_empty: bool | None
) -> dict[str, Any] | None:
    """The ``events`` of the spec to register from ``--aggregate``, ``--window`` and
    ``--report-empty``; None without ``--aggregate`` (a usage error if the others are given
    alone)."""
    if aggregate is None:
        if window is not None or report_empty is not None:
            raise click.UsageError("--window and --report-empty go with --aggregate")
        return None
    rule: dict[str, Any] = {
        "aggregate": aggregate,
        "window": "period" if window in (None, "period") else int(window),
    }
    if report_empty is not None:
        rule["report_empty"] = report_empty
    return rule


def dimensions_body(given: tuple[str, ...]) -> dict[str, list[str]]:
    """``--dimension platform=ios,android`` options as the spec's ``dimensions`` object; a
    usage error naming an option that is not NAME=V1,V2 or a name given twice (the SDK's
    spec checks the names, values and cell cap)."""
    dimensions: dict[str, list[str]] = {}
    for text in given:
        name, sep, values = text.partition("=")
        listed = [value.strip() for value in values.split(",") if value.strip()]
        if not sep or not name.strip() or not listed:
            raise click.UsageError(
                f"--dimension {text!r}: give NAME=V1,V2,... such as platform=ios,android,web"
            )
        if name.strip() in dimensions:
            raise click.UsageError(f"--dimension {name.strip()} is given twice")
        dimensions[name.strip()] = listed
    return dimensions


def dimensions_text(raw: dict[str, Any]) -> str | None:
    """A served spec's dimensions in words, "platform: ios, android, web (or other)", a line
    per dimension; None without dimensions."""
    dimensions = raw.get("dimensions") or {}
    if not dimensions:
        return None
    return "\n".join(
        f"{name}: {', '.join(values)} (or other)" for name, values in dimensions.items()
    )


def served_events(raw: dict[str, Any]) -> str | None:
    """A served spec's event rule in words (:func:`events_text`), or None for a metric of
    recorded values (or a spec this CLI cannot read)."""
    if not raw.get("events"):
        return None
    try:
        return events_text(MetricSpec.from_dict(raw))
    except (ValueError, TypeError):
        return None


def category_count(raw: dict[str, Any]) -> str:
    """A served spec's number of categories (a histogram's buckets) as its spec counts them,
    "—" for a numeric metric (or a spec this CLI cannot read)."""
    try:
        spec = MetricSpec.from_dict(raw)
    except (ValueError, TypeError):
        return "—"
    return "—" if render_of(spec).mean else str(spec.k)


def _spec_table(spec: dict[str, Any]) -> Any:
    """A two-column table of a served spec."""
    from rich.table import Table

    table = Table(show_header=False, title=f"metric {spec['name']}", title_justify="left")
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("type", str(spec.get("type")))
    render = render_named(spec.get("type"))
    for field, value in (categories_rows if render is None else render.spec_rows)(spec):
        table.add_row(field, value)
    table.add_row("epsilon", f"{spec.get('epsilon')}")
    table.add_row("mechanism", str(spec.get("mechanism")))
    table.add_row("period", str(spec.get("period")))
    delivery = spec.get("delivery") or "direct"
    table.add_row(
        "delivery",
        "shuffled (only through a shuffler)" if delivery == "shuffled" else delivery,
    )
    events = served_events(spec)
    if events is not None:
        table.add_row("events", events)
    dimensions = dimensions_text(spec)
    if dimensions is not None:
        table.add_row("dimensions", dimensions)
    table.add_row("fingerprint", str(spec.get("fingerprint")))
    for field in ABOUT_FIELDS:
        if spec.get(field):
            table.add_row(field, str(spec[field]))
    return table


def _floors(plan: dict[str, object]) -> list[dict[str, Any]]:
    """The per-batch-size rows of a :func:`~deniable.estimators.heavyhitters.floor_plan`
    document, which types its values loosely (a JSON object)."""
    floors = plan["floors"]
    if not isinstance(floors, list):
        raise TypeError("a floor plan holds its floors as a list")
    return floors


def _show_text(spec: MetricSpec, served: dict[str, Any], fmt: str) -> None:
    """``metrics show`` of a text metric: its spec and its discovery floor per batch size."""
    from deniable.estimators.heavyhitters import floor_plan

    plan = floor_plan(spec.text_randomizer)
    if fmt == "json":
        print_json({**served, "floor": plan})
        return
    out = console()
    out.print(_spec_table(served))
    for row in _floors(plan):
        t95 = "above 100%" if row["t95"] >= 1 else f"{row['t95']:.2%}"
        out.print(f"discovery floor with {row['reports']:,} reports per period: {t95}")


@click.group()
def metrics() -> None:
    """Register metrics and read their specs.

    \b
    Examples:
      deniable metrics create browser --categories chrome,firefox,safari,other --epsilon 1
      deniable metrics create dark_mode --boolean --epsilon 0.5
      deniable metrics list
      deniable metrics show browser
      deniable metrics archive browsr
    """


@metrics.command("create", short_help="Register a metric (admin).")
@click.argument("name")
@click.option(
    "--categories", metavar="A,B,C", help="Comma-separated categories of a categorical metric."
)
@click.option("--boolean", is_flag=True, help="A yes/no metric (categories false, true).")
@click.option(
    "--type",
    "kind",
    type=click.Choice(tuple(KINDS)),
    help="numeric (a mean: with --lower and --upper) or histogram (a distribution: with"
    " --edges); boolean and categorical follow from --boolean and --categories, set from"
    " --categories with --max-items.",
)
@bounds_options("A numeric metric's")
@click.option(
    "--edges",
    metavar="E0,E1,...",
    help="A histogram's bucket edges, increasing: 0,100,250,500 makes [0, 100), [100, 250), ...",
)
@max_length_option("A text metric's")
@click.option(
    "--max-items",
    type=click.IntRange(1, 64),
    metavar="L",
    help="A set metric (with --categories): the most categories a device is expected to hold"
    " at once; a larger set is sampled down to L, so its categories' shares read low.",
)
@epsilon_option
@click.option(
    "--mechanism",
    type=click.Choice(MECHANISM_CHOICES + tuple(NUMERIC_MECHANISMS) + ("pem",)),
    default="auto",
    show_default=True,
    help="auto picks the least variance for (k, ε), or for a numeric metric the least"
    " worst-case variance of the mean (duchi, pm or hybrid).",
)
@period_kind_option
@click.option(
    "--delivery",
    type=click.Choice(("direct", "shuffled")),
    default="direct",
    show_default=True,
    help="shuffled: reports reach the collector only through a shuffler (the collector refuses"
    " direct uploads, SDKs without a shuffler do not send them), so the account can state the"
    " shuffler's central ε for every report; direct: devices may also send straight to it.",
)
@click.option(
    "--unit",
    metavar="UNIT",
    help="A numeric or histogram metric's unit (ms, KB, °C), shown beside its numbers.",
)
@click.option("--description", metavar="TEXT", help="What the metric measures, in one line.")
@click.option("--owner", metavar="WHO", help="Who answers for the metric: a team or a person.")
@click.option(
    "--aggregate",
    type=click.Choice(AGGREGATES),
    help="Make it an event metric: the app calls event() or observe() any number of times and"
    " each device sends ONE report per window, this aggregate of its events: any (did it"
    " happen at least once: --boolean), count (how many times: --type numeric or histogram),"
    " sum, min, max, mean, median, last (of observed values: numeric or histogram), mode (the"
    " most frequent category: --categories). Without it, the app records one value per"
    " period.",
)
@click.option(
    "--window",
    type=click.Choice(("period", *map(str, WINDOW_DAYS))),
    help="With --aggregate: period (default) aggregates each calendar --period (day, week or"
    " month) and reports it when it ends; 1, 7 or 28 aggregates the last N days, reported"
    " every day (needs --period day; 7: weekly actives, reported daily).",
)
@click.option(
    "--report-empty/--no-report-empty",
    default=None,
    help="With --aggregate: whether a device active in a window without any event reports it"
    " (false, 0). Always on for any and count, so their estimates are shares of active devices;"
    " optional for sum; impossible for the others (no value without an observation).",
)
@click.option(
    "--dimension",
    "dimensions",
    multiple=True,
    metavar="NAME=V1,V2,...",
    help="A dimension the estimates can be broken down by (--by, --where), with its listed"
    " values: platform=ios,android,web (repeatable). Each device sends its value in the clear,"
    " not randomized (one not listed counts as 'other'): a coarse public attribute many devices"
    " share, never an identifier.",
)
@click.option(
    "--accept-weak",
    is_flag=True,
    help=f"Register even if ε is above {DEFAULT_MAX_EPSILON:g} or all categories at once are"
    f" known only to more than {percentage_points(WEAK_MARGIN, 'g')} with"
    f" {WEAK_MARGIN_REPORTS:,} reports.",
)
@format_option("table", "json")
@pass_global_options
def create(
    global_options: GlobalOptions,
    name: str,
    categories: str | None,
    boolean: bool,
    kind: str | None,
    lower: float | None,
    upper: float | None,
    edges: str | None,
    max_length: int | None,
    max_items: int | None,
    epsilon: float,
    mechanism: str,
    period: PeriodKind,
    delivery: str,
    unit: str | None,
    description: str | None,
    owner: str | None,
    aggregate: str | None,
    window: str | None,
    report_empty: bool | None,
    dimensions: tuple[str, ...],
    accept_weak: bool,
    fmt: str,
) -> None:
    """Register a metric (needs the admin token); its spec can never change afterwards.

    --unit, --description and --owner are not part of the spec: create the identical metric
    again with other ones to change them (its fingerprint, which devices pin, stays).

    The expected margin of error at 1,000, 10,000 and 100,000 reports is shown first. A weak
    spec is refused unless --accept-weak is given: ε above 4 (devices refuse such specs
    unless their app raises max_epsilon), or a margin of all categories at once wider than
    ±5 percentage points with 10,000 reports (95%, worst case). Registering the identical
    spec again changes nothing else and says so. The collector's privacy warning (this metric
    takes one device's 30-day total with the SDK defaults above the warning level: `deniable
    privacy`) goes to stderr, once.

    \b
    Examples:
      deniable metrics create browser --categories chrome,firefox,safari,other --epsilon 1
      deniable metrics create dark_mode --boolean --epsilon 0.5 --period week
      deniable metrics create load_ms --type numeric --lower 0 --upper 5000 --epsilon 1 \\
          --unit ms --description "Page load time" --owner web-team
      deniable metrics create load_hist --type histogram --edges 0,100,250,500,1000,5000 --epsilon 1
      deniable metrics create search_term --type text --max-length 16 --epsilon 4
      deniable metrics create theme --categories light,dark --epsilon 2 --delivery shuffled
      deniable metrics create features --categories search,share,export --max-items 2 --epsilon 2
      deniable metrics create crashes --type histogram --edges 0,1,2,5,10 --epsilon 1 \
          --aggregate count
      deniable metrics create used_search --boolean --epsilon 1 --aggregate any --window 7
      deniable metrics create dark_mode --boolean --epsilon 1 --dimension platform=ios,android,web
    """
    events = events_body(aggregate, window, report_empty)
    declared = dimensions_body(dimensions)
    render = render_named(kind)
    strings = render is not None and render.strings
    if strings or max_length is not None:
        given = categories is not None or boolean or (lower, upper, edges) != (None, None, None)
        if not strings or max_length is None or given:
            raise click.UsageError("a text metric takes --type text --max-length L and no domain")
        body = {"name": name, "type": TextSpec.type, "max_length": max_length, "epsilon": epsilon}
        body.update({"mechanism": mechanism, "period": period, **rules(delivery, events)})
        if declared:
            body["dimensions"] = declared
        spec = MetricSpec.from_dict(body)
        body.update(about_options(TextSpec.type, unit, description=description, owner=owner))
        _create_text(global_options, spec, body, accept_weak, fmt)
        return
    if (render is not None and render.items_bound) or max_items is not None:
        body = set_body(name, categories, boolean, kind, (lower, upper, edges), max_items)
        body.update({"epsilon": epsilon, "mechanism": mechanism, "period": period})
        body["mechanism"] = MetricSpec.from_dict(body).mechanism
    else:
        body = spec_from_options(
            name, categories, boolean, epsilon, mechanism, period, kind, lower, upper, edges
        )
    body.update(rules(delivery, events))
    if declared:
        body["dimensions"] = declared
    spec = MetricSpec.from_dict(body)
    body.update(about_options(spec.type, unit, description=description, owner=owner))
    rows = margins(spec, DEFAULT_CONFIDENCE)
    reasons = weaknesses(spec, rows)
    if fmt != "json":
        console().print(_margin_table(rows, DEFAULT_CONFIDENCE, spec))
    if reasons and not accept_weak:
        raise InvalidInput(
            f"not registered: {'; '.join(reasons)}; pass --accept-weak to register it anyway"
        )
    with global_options.api() as api:
        stored, created = api.register_metric(body)
    for reason in [*reasons, *stored.get("warnings", [])]:
        click.echo(f"warning: {reason}", err=True)
    if fmt == "json":
        expected = {"confidence": DEFAULT_CONFIDENCE, "by_reports": rows}
        print_json({**stored, "expected_margin": expected, "already_registered": not created})
        return
    console().print(_spec_table(stored))
    what = "registered" if created else "already registered (identical)"
    click.echo(f"{what} {stored.get('name', name)} (fingerprint {stored.get('fingerprint')})")


def _create_text(
    global_options: GlobalOptions,
    spec: MetricSpec,
    body: dict[str, Any],
    accept_weak: bool,
    fmt: str,
) -> None:
    """``metrics create --type text``: the floor per batch size first; weak (refused unless
    --accept-weak) above the SDK's max_epsilon or with a floor above 5% at 100,000 reports."""
    from deniable.estimators.heavyhitters import floor_plan, floor_warnings

    plan = floor_plan(spec.text_randomizer)
    reasons = floor_warnings(spec.text_randomizer)
    if spec.epsilon > DEFAULT_MAX_EPSILON:
        reasons.insert(0, f"ε={spec.epsilon:g} is above {DEFAULT_MAX_EPSILON:g}")
    if fmt != "json":
        for row in _floors(plan):
            t95 = "above 100%" if row["t95"] >= 1 else f"{row['t95']:.2%}"
            click.echo(f"discovery floor with {row['reports']:,} reports per period: {t95}")
    if reasons and not accept_weak:
        raise InvalidInput(
            f"not registered: {'; '.join(reasons)}; pass --accept-weak to register it anyway"
        )
    body = {**body, "mechanism": spec.mechanism}
    with global_options.api() as api:
        stored, created = api.register_metric(body)
    for reason in stored.get("warnings", []):
        click.echo(f"warning: {reason}", err=True)
    if fmt == "json":
        print_json({**stored, "floor": plan, "already_registered": not created})
        return
    console().print(_spec_table(stored))
    what = "registered" if created else "already registered (identical)"
    click.echo(f"{what} {stored.get('name')} (fingerprint {stored.get('fingerprint')})")


@metrics.command("archive", short_help="Archive a metric: no more reports (admin).")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@format_option("table", "json")
@pass_global_options
def archive(global_options: GlobalOptions, name: str, yes: bool, fmt: str) -> None:
    """Archive a metric (needs the admin token): the collector refuses its reports from now
    on and leaves it out of the list devices read, so they stop recording it. Its reports
    stay until retention deletes them, and its estimates and export stay readable. The name
    can never be registered again. Asks for confirmation unless --yes is given.

    \b
    Example:
      deniable metrics archive browsr --yes
    """
    if not yes:
        click.confirm(
            f"archive {name}? It takes no more reports and its name can never be registered again",
            abort=True,
            err=True,
        )
    with global_options.api() as api:
        answer = api.archive_metric(name)
    if fmt == "json":
        print_json(answer)
        return
    when = answer.get("archived_at")
    if answer.get("already_archived"):
        click.echo(f"{name} was already archived (since {when})")
    else:
        click.echo(
            f"archived {name} at {when}: it takes no more reports; its data stay readable"
            " until retention deletes them"
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

    with global_options.api() as api:
        specs = api.list_metrics()
    if fmt == "json":
        print_json(specs)
        return
    if fmt == "csv":
        fields = SPEC_FIELDS + ABOUT_FIELDS
        write_csv(
            fields,
            (
                [("|".join(s.get(f) or []) if f == "categories" else s.get(f)) for f in fields]
                for s in specs
            ),
        )
        return
    if not specs:
        click.echo("no metrics registered yet; create one with `deniable metrics create`")
        return
    out = console()
    out.print(list_table(specs))
    lines = [f"{s['name']}: {s['description']}" for s in specs if s.get("description")]
    for s in specs:
        events = served_events(s)
        if events is not None:
            lines.append(f"{s['name']}: events: {events}")
        dimensions = dimensions_text(s)
        if dimensions is not None:
            lines.append(f"{s['name']}: dimensions: {dimensions.replace(chr(10), '; ')}")
    for line in lines:
        out.print(Text(line), overflow="fold")


def list_table(specs: list[dict[str, Any]]) -> Any:
    """The registered metrics, one row each: names and words wrap, numbers and fingerprints
    stay whole; the unit and owner columns only when some metric has one (80 columns hold
    the rest)."""
    from rich.table import Table

    table = Table(title=f"{len(specs)} metric(s)", title_justify="left")
    optional = [field for field in ("unit", "owner") if any(s.get(field) for s in specs)]
    for column in ("name", "type"):
        words_column(table, column)
    number_column(table, "k")
    number_column(table, "ε")
    for column in ("mechanism", "period", *optional):
        words_column(table, column)
    number_column(table, "fingerprint", justify="left")
    for s in specs:
        table.add_row(
            s["name"],
            s.get("type", ""),
            category_count(s),
            f"{s.get('epsilon')}",
            s.get("mechanism", ""),
            s.get("period", ""),
            *(s.get(field) or "" for field in optional),
            s.get("fingerprint", ""),
        )
    return table


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
    with global_options.api() as api:
        served = api.get_metric(name)
    spec = spec_from_served(served)
    if render_of(spec).strings:
        _show_text(spec, served, fmt)
        return
    rows = margins(spec, confidence)
    if fmt == "json":
        print_json({**served, "expected_margin": {"confidence": confidence, "by_reports": rows}})
        return
    out = console()
    out.print(_spec_table(served))
    out.print(_margin_table(rows, confidence, spec))
