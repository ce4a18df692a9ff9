"""``deniable audit``: an empirical lower bound on the eps each randomizer really gives.

The specs come from the collector (every registered metric, or those named), from ``--spec``
(no collector needed), or from ``--all-mechanisms`` (every mechanism at several eps, the CI
sweep). Each is audited through the device's own recording path
(:mod:`deniable.estimators.audit`, docs/audit.md). The exit status is 1 when any verdict is
``fail``, so the command can gate a CI pipeline.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from deniable.client.errors import InvalidInput
from deniable.estimators.audit import DEFAULT_CONFIDENCE, DEFAULT_REPORTS, SWEEP_EPSILONS

from ..options import CONFIDENCE, GlobalOptions, format_option, number_list, pass_global_options
from ..render import console, level_text, number_column, print_json, words_column
from ..specs import spec_from_served

if TYPE_CHECKING:
    from deniable.client.spec import MetricSpec
    from deniable.estimators.audit import AuditResult

VERDICT_STYLES = {"pass": "green", "loose": "yellow", "fail": "bold red"}
"""How the table colours each verdict."""


def parse_epsilons(
    _ctx: click.Context, _param: click.Parameter, text: str | None
) -> tuple[float, ...]:
    """``--epsilons 0.5,1,2,4`` as numbers; a usage error naming the item that is not one."""
    if text is None:
        return SWEEP_EPSILONS
    return tuple(number_list(text, click.BadParameter))


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def spec_from_json(text: str) -> MetricSpec:
    """A ``--spec`` (a metric spec as JSON, as the collector serves it, or ``@path`` to a file
    holding one) as a checked spec."""
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--spec is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise InvalidInput(
            "--spec must be a JSON object, such as"
            ' {"name": "dark_mode", "type": "boolean", "epsilon": 1}'
        )
    return spec_from_served(raw)


def collector_specs(global_options: GlobalOptions, names: tuple[str, ...]) -> list[MetricSpec]:
    """The collector's registered specs: those named (archived ones too), else every one it
    serves."""
    with global_options.api() as api:
        served: list[Any] = (
            [api.get_metric(name) for name in names] if names else api.list_metrics()
        )
    return [spec_from_served(raw) for raw in served]


def audit_table(results: list[AuditResult]) -> Any:
    """One row per metric: claimed eps, audited lower bound, samples and verdict (the level in
    the title when every metric has the same; the time in the summary line): 80 columns."""
    from rich.table import Table

    levels = {r.confidence for r in results}
    title = "randomizer audit (eps the code gives, at least"
    if len(levels) == 1:
        title += f", at {level_text(next(iter(levels)))} confidence"
    table = Table(title=title + ")", title_justify="left")
    words_column(table, "metric")
    number_column(table, "mechanism", justify="left")
    for header in ("claimed\nε", "audited\nε ≥", "of\nclaim"):
        number_column(table, header)
    if len(levels) > 1:
        number_column(table, "level")
    number_column(table, "samples")
    number_column(table, "verdict", justify="left")
    for r in results:
        table.add_row(
            r.metric,
            r.mechanism,
            f"{r.epsilon:g}",
            f"{r.lower_bound:.3f}",
            f"{r.ratio:.0%}",
            *([level_text(r.confidence)] if len(levels) > 1 else []),
            f"{r.samples:,}",
            f"[{VERDICT_STYLES[r.verdict]}]{r.verdict}[/]",
        )
    return table


def summary_line(results: list[AuditResult], seconds: float) -> str:
    """How many metrics were audited, in how long, and how many of each verdict."""
    from deniable.estimators.audit import VERDICTS

    counts = ", ".join(f"{sum(r.verdict == v for r in results)} {v}" for v in VERDICTS)
    return f"{len(results)} metric(s) audited in {seconds:.1f} s: {counts}"


@click.command(short_help="Check that each randomizer gives no more eps than it claims.")
@click.argument("names", metavar="[METRIC]...", nargs=-1)
@click.option(
    "--spec",
    "spec_texts",
    multiple=True,
    metavar="JSON",
    help='Audit this spec (JSON, as the collector serves it, e.g. {"name": "dark_mode",'
    ' "type": "boolean", "epsilon": 1}, or @FILE holding one) instead of the collector\'s;'
    " repeatable.",
)
@click.option(
    "--all-mechanisms",
    is_flag=True,
    help="Audit every mechanism (brr, krr, oue, olh, duchi, pm, hybrid and a histogram) at"
    " each of --epsilons, without a collector.",
)
@click.option(
    "--epsilons",
    metavar="E1,E2,...",
    callback=parse_epsilons,
    help="The eps values of --all-mechanisms (default "
    + ",".join(f"{e:g}" for e in SWEEP_EPSILONS)
    + ").",
)
@click.option(
    "--samples",
    type=click.IntRange(min=1),
    help=f"Reports drawn per input (default: {DEFAULT_REPORTS:,} per metric, spread evenly"
    " over its inputs; that catches a brr 1 point too truthful at ε=1).",
)
@click.option(
    "--confidence",
    type=CONFIDENCE,
    default=DEFAULT_CONFIDENCE,
    show_default=True,
    help="Confidence of the audited bound (Bonferroni over each metric's events).",
)
@click.option("--seed", type=int, help="Seed the draws, for a deterministic audit (CI).")
@click.option(
    "--sdk",
    type=click.Choice(["python", "js"]),
    default="python",
    show_default=True,
    help="Whose record() path draws the reports: this Python SDK, or the JavaScript SDK in"
    " sdk/js run by node (built first; its draws cannot be seeded).",
)
@click.option(
    "--sdk-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --sdk js: the JavaScript SDK to audit (a built copy of sdk/js), e.g. a release.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    help="Audit this many metrics at once, each in its own process (default: the CPUs this"
    " process may use); with --seed the results do not depend on it.",
)
@format_option("table", "json")
@pass_global_options
@click.pass_context
def audit(
    ctx: click.Context,
    global_options: GlobalOptions,
    names: tuple[str, ...],
    spec_texts: tuple[str, ...],
    all_mechanisms: bool,
    epsilons: tuple[float, ...],
    samples: int | None,
    confidence: float,
    seed: int | None,
    sdk: str,
    sdk_dir: Path | None,
    jobs: int | None,
    fmt: str,
) -> None:
    """Audit the randomizers: an empirical lower bound on the eps each really gives.

    For each metric, reports of its inputs (every category up to 16, else the first, middle
    and last; five points across a number's range) are drawn through the SDK's own record()
    path, and Clopper-Pearson bounds on the log-ratio of their probabilities, for every pair
    of inputs over a family of output events, give the eps the code provably spends, at
    --confidence. The verdict is fail when that bound exceeds the claimed ε (exit
    status 1), loose when the code provably spends less than 90% of it, pass otherwise.
    Without --spec or --all-mechanisms the collector's registered metrics are audited (all,
    or those named). The audit only finds violations; it cannot prove privacy. See
    docs/audit.md.

    \b
    Examples:
      deniable audit
      deniable audit browser dark_mode --samples 200000
      deniable audit --spec '{"name": "dark_mode", "type": "boolean", "epsilon": 1}'
      deniable audit --all-mechanisms --seed 1121 --format json
      deniable audit --all-mechanisms --sdk js
    """
    from deniable.client.sampling import randomized_reports
    from deniable.estimators.audit import audit_document, audit_specs, mechanism_sweep

    from ..jsreports import SDK_DIRECTORY, js_problem, js_reports
    from ..progress import progress_bar

    if ctx.get_parameter_source("epsilons") is click.core.ParameterSource.COMMANDLINE and not (
        all_mechanisms
    ):
        raise click.UsageError("--epsilons goes with --all-mechanisms")
    if sum(map(bool, (names, spec_texts, all_mechanisms))) > 1:
        raise click.UsageError("give metric names, --spec or --all-mechanisms, not several")
    source: Any = randomized_reports
    if sdk_dir is not None and sdk != "js":
        raise click.UsageError("--sdk-dir goes with --sdk js")
    if sdk == "js":
        if seed is not None:
            raise click.UsageError(
                "--seed goes with --sdk python: the JS SDK draws from the CSPRNG"
            )
        directory = sdk_dir.resolve() if sdk_dir is not None else SDK_DIRECTORY
        problem = js_problem(directory)
        if problem is not None:
            raise click.UsageError(problem)
        source = functools.partial(js_reports, directory=directory)
    if all_mechanisms:
        specs = mechanism_sweep(epsilons)
    elif spec_texts:
        specs = [spec_from_json(text) for text in spec_texts]
    else:
        specs = collector_specs(global_options, names)
    if not specs:
        click.echo("no metrics registered yet; nothing to audit", err=True)
        return
    started = time.perf_counter()
    with progress_bar() as bar:
        task = bar.add_task("auditing", total=len(specs))
        results = audit_specs(
            specs,
            samples=samples,
            confidence=confidence,
            seed=seed,
            jobs=jobs or available_cpus(),
            on_result=lambda _result: bar.advance(task),
            source=source,
        )
    seconds = time.perf_counter() - started
    if fmt == "json":
        print_json(audit_document(results, seconds, seed=seed))
    else:
        console().print(audit_table(results))
        click.echo(summary_line(results, seconds))
        for r in results:
            if r.verdict != "pass":
                click.echo(f"{r.verdict}: {r.metric}: {r.message}")
    failed = [r.metric for r in results if r.verdict == "fail"]
    if failed:
        click.echo(
            f"audit failed: {', '.join(failed)} leak(s) more than the claimed ε"
            f" (the bound holds at {confidence * 100:g}% confidence)",
            err=True,
        )
        ctx.exit(1)
