"""The choices every estimate offers, and their check: the method and the pooling of periods.

They live apart from the numerical code (standard library only), with the defaults every
surface shares (the method, the range of periods), because the CLI lists them in
its options and the API in its parameters: one definition, importable without numpy.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Literal, get_args

from deniable.client.calendar import period_label, period_start
from deniable.client.errors import InvalidInput

Method = Literal["unbiased", "consistent", "mle"]
"""How the point estimate is made: unbiased, Norm-Sub projected, or maximum likelihood."""
METHODS: tuple[str, ...] = get_args(Method)
"""Every :data:`Method`, in the order the CLI and the API list them."""

DEFAULT_METHOD: Method = "consistent"
"""The method of shares unless one is asked for, on every surface (the API, the CLI and the
dashboard): non-negative shares summing to 100%, with the unbiased intervals within the
simplex (STATS.md section 4). A numeric metric's mean has one estimator, unbiased."""

DEFAULT_PERIODS = 7
"""The periods an estimate or a series covers unless its start is given, on every surface:
the 7 ending at its end (by default the current period)."""


def periods_back(kind: str, end: str, count: int) -> str:
    """The label ``count - 1`` periods before ``end`` (so start..end holds ``count`` periods)."""
    first = period_start(kind, end)
    if kind == "day":
        return (first - dt.timedelta(days=count - 1)).isoformat()
    if kind == "week":
        return period_label(kind, first - dt.timedelta(weeks=count - 1))
    months = first.year * 12 + first.month - 1 - (count - 1)
    return period_label(kind, dt.date(months // 12, months % 12 + 1, 1))


Pooling = Literal["overlap-safe", "independent"]
"""How periods combine: an interval valid whatever the overlap of clients, or independent periods."""
POOLINGS: tuple[str, ...] = get_args(Pooling)
"""Every :data:`Pooling`, the default first."""

DEFAULT_QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)
"""The quantiles a histogram's estimate gives intervals for unless others are asked for."""


def check_options(confidence: float, method: str, pooling: str) -> float:
    """Validate the options shared by every estimate; return the confidence as a float."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise InvalidInput("confidence must be a number in (0, 1)")
    if not 0.0 < float(confidence) < 1.0:
        raise InvalidInput("confidence must be strictly between 0 and 1")
    if method not in METHODS:
        raise InvalidInput(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")
    if pooling not in POOLINGS:
        raise InvalidInput(f"unknown pooling {pooling!r}: choose one of {', '.join(POOLINGS)}")
    return float(confidence)


MAX_QUANTILES = 20
"""The most quantiles one estimate gives intervals for."""


def check_quantiles(qs: Sequence[float] | None) -> tuple[float, ...]:
    """The quantiles asked for (:data:`DEFAULT_QUANTILES` if none), each strictly between 0
    and 1; raises :class:`InvalidInput` otherwise."""
    if not qs:
        return DEFAULT_QUANTILES
    if len(qs) > MAX_QUANTILES:
        raise InvalidInput(f"at most {MAX_QUANTILES} quantiles at once")
    for q in qs:
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 < float(q) < 1.0:
            raise InvalidInput(f"quantile {q!r}: each q must be strictly between 0 and 1")
    return tuple(float(q) for q in qs)


def check_numeric_method(method: str) -> None:
    """Refuse a method other than ``unbiased`` for a numeric metric's mean: the methods are
    ways to make shares consistent, and a mean has one estimator."""
    if method != "unbiased":
        raise InvalidInput(
            f"method {method!r} is for shares; a numeric metric's mean has one estimator"
            " (unbiased): leave the method out"
        )
