"""Options and parameter types shared by several commands (periods, formats, confidence, ...).

Keeping them in one place makes every command spell the same option the same way; the choices
they offer (methods, poolings, mechanisms, period kinds) come from the packages that define
them, never retyped here.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from deniable.client.mechanisms import (
    MAX_EPSILON,
    MECHANISMS,
    MIN_EPSILON,
    TEXT_MAX_LENGTH,
    check_epsilon,
)
from deniable.client.spec import PERIOD_KINDS, period_start
from deniable.estimators import DEFAULT_PERIODS, METHODS, POOLINGS
from deniable.estimators.shufflingaccount import DEFAULT_DELTA, MAX_BATCH, MAX_DELTA, MIN_DELTA

from .api import CollectorAPI

F = TypeVar("F", bound=Callable[..., Any])

_LABEL = re.compile(r"^(\d{4}-\d{2}-\d{2}|\d{4}-W\d{2}|\d{4}-\d{2})$")

DEFAULT_CONFIDENCE = 0.95
"""The confidence level of intervals and margins unless one is asked for."""

OUTPUT_FORMATS = {
    "table": "table for people",
    "json": "json for programs (an estimate's is exactly the API's document)",
    "csv": "csv one row per category or item",
}
"""The formats a command can print in, and what each is for."""

MECHANISM_CHOICES = ("auto", *MECHANISMS)
"""What ``--mechanism`` accepts: auto (the least variance for (k, ε)) or a mechanism's name."""


@dataclass(frozen=True)
class GlobalOptions:
    """The ``deniable`` group's options: where the collector is and how to authenticate."""

    collector_url: str
    token: str | None

    def api(self) -> CollectorAPI:
        """A client for the configured collector."""
        return CollectorAPI(self.collector_url, self.token)


pass_global_options = click.make_pass_decorator(GlobalOptions)
"""Decorator handing a command the :class:`GlobalOptions` of the ``deniable`` group."""


class PeriodLabel(click.ParamType):
    """A period label: a day ``2026-11-21``, an ISO week ``2026-W47`` or a month ``2026-11``."""

    name = "PERIOD"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The label, checked to name a real period; a usage error otherwise."""
        text = str(value).strip()
        if not _LABEL.match(text):
            self.fail(
                f"{value!r} is not a period: use a day 2026-11-21, a week 2026-W47 or a month 2026-11",
                param,
                ctx,
            )
        kind = "day" if len(text) == 10 else "week" if "W" in text else "month"
        try:
            period_start(kind, text)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return text


class Confidence(click.ParamType):
    """A confidence level strictly between 0 and 1, such as 0.95."""

    name = "LEVEL"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        """The level as a float; a usage error outside (0, 1)."""
        try:
            level = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not 0 < level < 1:
            self.fail("confidence must be strictly between 0 and 1, such as 0.95", param, ctx)
        return level


class Date(click.ParamType):
    """A UTC calendar date written YYYY-MM-DD."""

    name = "DATE"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> dt.date:
        """The date; a usage error for anything else."""
        if isinstance(value, dt.date):
            return value
        try:
            return dt.date.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a date like 2026-11-21", param, ctx)


PERIOD = PeriodLabel()
CONFIDENCE = Confidence()
DATE = Date()


def range_options_for(start_default: str, end_default: str) -> Callable[[F], F]:
    """--start, --end, --last: the range of periods (labels in the metric's period format),
    with the defaults the command gives a missing --start and --end, as its help says them."""

    def decorate(func: F) -> F:
        func = click.option(
            "--last",
            type=click.IntRange(min=1, max=10_000),
            metavar="N",
            help="The N periods ending at --end (default: the current period), instead of --start.",
        )(func)
        func = click.option(
            "--end", type=PERIOD, help=f"Last period, inclusive (default: {end_default})."
        )(func)
        return click.option(
            "--start",
            type=PERIOD,
            help=f"First period: 2026-11-01, 2026-W44 or 2026-11 (default: {start_default}).",
        )(func)

    return decorate


range_options = range_options_for(
    f"the {DEFAULT_PERIODS} periods ending at --end, as the API and the dashboard; offline:"
    " the file's first",
    "the current period; offline: the file's last",
)
"""--start, --end, --last for an estimate: the collector's default range (the last
:data:`~deniable.estimators.DEFAULT_PERIODS` periods) unless told otherwise."""

stored_range_options = range_options_for(
    "the first stored report", "the last stored report; with --last, the current period"
)
"""--start, --end, --last for an export: every stored report unless told otherwise (as the
collector's export endpoint)."""


confidence_option = click.option(
    "--confidence",
    type=CONFIDENCE,
    default=DEFAULT_CONFIDENCE,
    show_default=True,
    help="Confidence level of the intervals.",
)
"""--confidence LEVEL, default :data:`DEFAULT_CONFIDENCE`."""


def bounds_options(lead: str) -> Callable[[F], F]:
    """--lower and --upper: a numeric metric's range, values outside it clamped into it; ``lead``
    opens their help as the command names the metric ("A numeric metric's")."""

    def decorate(func: F) -> F:
        func = click.option(
            "--upper", type=float, help=f"{lead} highest value (higher ones are clamped)."
        )(func)
        return click.option(
            "--lower", type=float, help=f"{lead} lowest value (lower ones are clamped)."
        )(func)

    return decorate


def max_length_option(lead: str) -> Callable[[F], F]:
    """--max-length L: a text metric's longest string kept (1 to
    :data:`~deniable.client.mechanisms.TEXT_MAX_LENGTH` UTF-8 bytes); ``lead`` opens its help as
    the command names the metric ("A text metric's")."""
    return click.option(
        "--max-length",
        type=click.IntRange(1, TEXT_MAX_LENGTH),
        metavar="L",
        help=f"{lead} longest string kept, in UTF-8 bytes (1..{TEXT_MAX_LENGTH}; longer ones"
        " are cut).",
    )


def shuffle_options(prefix: str, batch_help: str, delta_lead: str) -> Callable[[F], F]:
    """--{prefix}batch N and --{prefix}delta D: a shuffler's batch in devices and the δ of its
    central guarantee, in the ranges the accountant computes; ``delta_lead`` opens the δ's help,
    which ends with :data:`~deniable.estimators.shufflingaccount.DEFAULT_DELTA`."""

    def decorate(func: F) -> F:
        func = click.option(
            f"--{prefix}delta",
            type=click.FloatRange(MIN_DELTA, MAX_DELTA),
            metavar="D",
            help=f"{delta_lead} (default {DEFAULT_DELTA:g}).",
        )(func)
        return click.option(
            f"--{prefix}batch", type=click.IntRange(2, MAX_BATCH), metavar="N", help=batch_help
        )(func)

    return decorate


def format_option(
    *choices: str, default: str | None = "table", help: str | None = None
) -> Callable[[F], F]:
    """--format, one of ``choices`` (default: every :data:`OUTPUT_FORMATS`), passed as ``fmt``.

    ``help`` replaces the generated text, for a command whose formats are not output formats.
    """
    offered = choices or tuple(OUTPUT_FORMATS)
    text = help or "; ".join(OUTPUT_FORMATS[choice] for choice in offered) + "."
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(offered),
        default=default,
        show_default=default is not None,
        help=text,
    )


def number_list(text: str, refuse: Callable[[str], click.ClickException]) -> list[float]:
    """The comma-separated numbers of ``text`` (``0.5,1,2``), each stripped of spaces; the
    error ``refuse`` makes of a reason naming the first item that is not a number, so each
    option refuses in its own words."""
    values = []
    for item in text.split(","):
        try:
            values.append(float(item.strip()))
        except ValueError:
            raise refuse(f"{item.strip()!r} is not a number") from None
    return values


def choice_option(
    flag: str, choices: Sequence[str], help: str, default: str | None = None
) -> Callable[[F], F]:
    """A ``flag`` taking one of ``choices``, ``default`` (else the first) by default."""
    return click.option(
        flag,
        type=click.Choice(choices),
        default=default or choices[0],
        show_default=True,
        help=help,
    )


method_option = click.option(
    "--method",
    type=click.Choice(METHODS),
    default=None,
    help="For shares: consistent (non-negative, sums to 100%; the default), unbiased (may leave"
    " [0,1]: shown clipped into its interval and marked) or mle (maximum likelihood). A numeric"
    " metric's mean has one estimator and takes no --method.",
)
"""--method, one of the estimators' :data:`~deniable.estimators.METHODS`; None when not given
(:data:`~deniable.estimators.DEFAULT_METHOD` for shares, nothing for a numeric metric's mean)."""

QUANTILE = click.FloatRange(min=0, max=1, min_open=True, max_open=True)
"""A quantile q strictly between 0 and 1."""

quantiles_option = click.option(
    "--quantile",
    "-q",
    "quantiles",
    type=QUANTILE,
    multiple=True,
    metavar="Q",
    help="Histogram metrics: a quantile to give an interval for, such as 0.95 (repeatable;"
    " default 0.5, 0.9 and 0.99).",
)
"""--quantile Q (repeatable): a histogram's quantiles, strictly between 0 and 1."""

pooling_option = choice_option(
    "--pooling",
    POOLINGS,
    "How periods combine: overlap-safe is valid when the same devices report every period;"
    " independent only when every report in the range comes from a different device.",
)
"""--pooling, one of the estimators' :data:`~deniable.estimators.POOLINGS`."""

mechanism_option = choice_option(
    "--mechanism", MECHANISM_CHOICES, "auto picks the least variance for (k, ε)."
)
"""--mechanism, auto or one of the client's :data:`~deniable.client.MECHANISMS`."""

period_kind_option = choice_option("--period", PERIOD_KINDS, "How often a device reports.")
"""--period, one of the client's :data:`~deniable.client.spec.PERIOD_KINDS`."""


intervals_option = click.option(
    "--simultaneous/--per-category",
    default=True,
    show_default=True,
    help="Intervals that cover all categories at once (Bonferroni; the default, since every"
    " category is shown), or each category on its own (narrower; at k = 200 about 10 of"
    " 200 miss at 95%).",
)
"""--simultaneous/--per-category, simultaneous by default: for outputs showing every category."""


def _checked_epsilon(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """ε within the mechanisms' bounds (``check_epsilon``), else a usage error naming them."""
    try:
        return check_epsilon(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


epsilon_option = click.option(
    "--epsilon",
    type=float,
    callback=_checked_epsilon,
    required=True,
    help=f"Privacy parameter ε per report ({MIN_EPSILON:g} to {MAX_EPSILON:g}).",
)
"""--epsilon ε (required): the privacy parameter of each report."""


def from_file_options(func: F) -> F:
    """--from-file FILE and --spec SPEC.json: read an export offline instead of the collector."""
    func = click.option(
        "--spec",
        "spec_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        metavar="SPEC.json",
        help="With --from-file: the metric spec, when the file does not carry it.",
    )(func)
    return click.option(
        "--from-file",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help="Read an export offline (Parquet, or CSV with --spec) instead of asking the collector.",
    )(func)
