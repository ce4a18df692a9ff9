"""The cells limits a read is held to before any work starts (periods × categories, and
slices or quantiles where they multiply it), each refusal naming the limit and its setting."""

from __future__ import annotations

from deniable.client.spec import MetricSpec

from .refusal import refuse


def categories_of(spec: MetricSpec) -> int:
    """The cells one period of ``spec`` adds to a read: its categories (a numeric metric: one,
    its mean; a text metric: its sketch's counts): the kind's count width, or one where it
    keeps no counts."""
    return spec.count_width or 1


def check_cells(spec: MetricSpec, periods: int, limit: int, what: str, setting: str) -> None:
    """422 if ``periods`` periods of ``spec`` pass ``limit`` cells (periods × categories),
    naming the limit, its setting and the most periods of this metric that fit."""
    k = categories_of(spec)
    if periods * k <= limit:
        return
    fits = limit // k
    narrow = (
        f"ask for at most {fits} period{'s' if fits != 1 else ''} of {spec.name} (start, end)"
        if fits
        else f"{spec.name}'s {k:,} categories alone pass it"
    )
    raise refuse(
        f"{what} would cover {periods:,} periods × {k:,} categories, more than the limit"
        f" of {limit:,} cells ({setting}): {narrow}"
    )


def check_quantile_cells(spec: MetricSpec, periods: int, quantiles: int, limit: int) -> None:
    """422 if a histogram series with ``quantiles`` quantile intervals per period passes
    ``limit`` cells, counting periods × (buckets + quantiles): each quantile of each period is
    one more inversion of that period's band. The message names the limit, its setting and
    the most periods that fit."""
    per_period = spec.k + quantiles
    if periods * per_period <= limit:
        return
    fits = limit // per_period
    raise refuse(
        f"the series with quantiles would cover {periods:,} periods × ({spec.k:,} buckets"
        f" + {quantiles} quantiles), more than the limit of {limit:,} cells"
        f" (DENIABLE_MAX_SERIES_CELLS): ask for at most {fits} period{'s' if fits != 1 else ''}"
        f" of {spec.name} (start, end) or fewer quantiles"
    )
