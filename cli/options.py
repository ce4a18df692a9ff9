"""Options and parameter types shared by several commands (periods, formats, confidence, ...).

Keeping them in one place makes every command spell the same option the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from .api import CollectorAPI

F = TypeVar("F", bound=Callable[..., Any])

_LABEL = re.compile(r"^(\d{4}-\d{2}-\d{2}|\d{4}-W\d{2}|\d{4}-\d{2})$")

METHODS = ("unbiased", "consistent", "mle")
POOLINGS = ("overlap-safe", "independent")


@dataclass
class Settings:
    """Where the collector is and how to authenticate: the group's global options."""

    collector: str
    token: str | None

    def api(self) -> CollectorAPI:
        """A client for the configured collector."""
        return CollectorAPI(self.collector, self.token)


pass_settings = click.make_pass_decorator(Settings)
"""Decorator handing a command the :class:`Settings` of the ``deniable`` group."""


class PeriodLabel(click.ParamType):
    """A period label: a day ``2026-11-21``, an ISO week ``2026-W47`` or a month ``2026-11``."""

    name = "PERIOD"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from deniable.client.spec import period_start

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
        try:
            level = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not 0 < level < 1:
            self.fail("confidence must be strictly between 0 and 1, such as 0.95", param, ctx)
        return level


PERIOD = PeriodLabel()
CONFIDENCE = Confidence()


def range_options(func: F) -> F:
    """--start, --end, --last: the range of periods (labels in the metric's period format)."""
    func = click.option(
        "--last",
        type=click.IntRange(min=1, max=10_000),
        metavar="N",
        help="The N periods ending at --end (default: the current period), instead of --start.",
    )(func)
    func = click.option(
        "--end",
        type=PERIOD,
        help="Last period, inclusive (default: the current period; offline: the file's last).",
    )(func)
    func = click.option(
        "--start",
        type=PERIOD,
        help="First period: 2026-11-01, 2026-W44 or 2026-11 (default: --end; offline: the file's first).",
    )(func)
    return func


def confidence_option(func: F) -> F:
    """--confidence LEVEL, default 0.95."""
    return click.option(
        "--confidence",
        type=CONFIDENCE,
        default=0.95,
        show_default=True,
        help="Confidence level of the intervals.",
    )(func)


def format_option(func: F) -> F:
    """--format table|json|csv."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(("table", "json", "csv")),
        default="table",
        show_default=True,
        help="table for people; json is exactly the API's document; csv one row per category.",
    )(func)


def method_option(func: F) -> F:
    """--method unbiased|consistent|mle."""
    return click.option(
        "--method",
        type=click.Choice(METHODS),
        default="unbiased",
        show_default=True,
        help="unbiased (may leave [0,1]), consistent (projected onto the simplex) or mle.",
    )(func)


def simultaneous_option(func: F) -> F:
    """--simultaneous: intervals that hold for all categories at once."""
    return click.option(
        "--simultaneous",
        is_flag=True,
        help="Intervals that cover all categories at once (Bonferroni), not each on its own.",
    )(func)


def _checked_epsilon(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """ε within the mechanisms' bounds (``check_epsilon``), else a usage error naming them."""
    from deniable.client.mechanisms import check_epsilon

    try:
        return check_epsilon(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def epsilon_option(func: F) -> F:
    """--epsilon ε (required): the privacy parameter of each report."""
    return click.option(
        "--epsilon",
        type=float,
        callback=_checked_epsilon,
        required=True,
        help="Privacy parameter ε per report (0.001 to 20).",
    )(func)


def from_file_options(func: F) -> F:
    """--from-file FILE and --spec SPEC.json: read an export offline instead of the collector."""
    from pathlib import Path

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
