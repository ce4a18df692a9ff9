"""Each category's share of devices for a ``set`` metric, from its k + L support counts.

A set metric's report is one item of the device's padded set (docs/STATS.md section 16),
drawn uniformly from max(|S|, L) items and passed through a frequency oracle over k + L items.
A device whose set holds category c and at most L items samples c with probability 1/L, so
the oracle's debiased frequency of c estimates (share of devices holding c) / L and the
share is L times it: the point, the standard error and the interval ends are the oracle's
(:mod:`.pooling`, :mod:`.intervals`, the same Wilson mapping and pooling of periods as a
categorical share) multiplied by L, so the variance is L^2 times the oracle's. A device with
more than L items samples c with probability 1/|S| < 1/L, so it counts L/|S| of itself:
the shares are biased low by those devices (section 16), which the spec's ``max_items``
declares away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.kinds import SetSpec
from deniable.client.mechanisms import PaddingSampling

from .choices import Pooling, check_options
from .differences import Change, Window, row_alpha, window_changes
from .documents import plain
from .frequency import category_rows, period_arrays
from .intervals import per_category_alpha, unit_interval
from .pooling import Pooled, pool
from .results import CategoryEstimate, Estimate, PeriodCounts


@dataclass(frozen=True)
class SetEstimate(Estimate):
    """A set metric's estimate: ``estimates[i].frequency`` is category i's share of devices
    (the shares need not sum to 1: their sum is the mean number of categories a device holds),
    ``count`` the estimated number of reporting devices holding it. ``max_items`` is L and
    ``oracle`` the frequency oracle over k + L items the reports went through."""

    max_items: int = 1
    oracle: str = ""


def set_shares(
    mechanism: PaddingSampling, n: np.ndarray, counts: np.ndarray, alpha: float, pooling: Pooling
) -> Pooled:
    """The k categories' unclipped shares of devices, standard errors and intervals at miss
    level ``alpha``: the oracle's pooled results over k + L items (:func:`.pooling.pool`; ``n``
    of shape (..., T), ``counts`` (..., T, k + L)) for the first k items, times L."""
    pooled = pool(mechanism.oracle, n, counts, alpha, pooling)
    size = float(mechanism.max_items)
    real = slice(0, mechanism.k)
    return Pooled(
        pooled.total,
        pooled.counts[..., real],
        size * pooled.estimate[..., real],
        size * pooled.std_error[..., real],
        size * pooled.low[..., real],
        size * pooled.high[..., real],
    )


def share_variance(mechanism: PaddingSampling, share: float, n: int) -> float:
    """The variance of one category's share estimate from n devices drawn at random, every one
    holding at most L items: L^2 lam (1 - lam) / (n (p* - q*)^2), lam = q* + (p* - q*) share / L
    (the support count is exactly Bin(n, lam)). Over a fixed population of sets it is an
    upper bound (Hoeffding: a Poisson-binomial count varies less than the binomial)."""
    size = mechanism.max_items
    p, q = mechanism.p_star, mechanism.q_star
    lam = q + (p - q) * share / size
    return size * size * lam * (1 - lam) / (n * (p - q) ** 2)


def set_estimate(
    mechanism: PaddingSampling,
    categories: Sequence[str],
    periods: PeriodCounts | Sequence[PeriodCounts],
    *,
    confidence: float = 0.95,
    simultaneous: bool = False,
    pooling: str = "overlap-safe",
) -> SetEstimate:
    """Every category's share of devices over the given periods, with confidence intervals.

    ``periods`` carry k + L counts each (the categories, then the dummies). ``simultaneous``
    makes the k intervals cover jointly (Bonferroni over the k categories); ``pooling`` is
    as for a categorical share. The one method is ``unbiased``: the shares of a set do not
    lie on a simplex, so neither projection applies. Raises
    :class:`~deniable.client.errors.InvalidInput` for bad options or counts.
    """
    confidence = check_options(confidence, "unbiased", pooling)
    chosen = cast(Pooling, pooling)  # checked just above
    if len(categories) != mechanism.k:
        raise InvalidInput(f"expected {mechanism.k} categories, got {len(categories)}")
    n, counts = period_arrays(mechanism.oracle, periods)

    def document(
        rows: list[CategoryEstimate], total: int, spread: np.ndarray | None
    ) -> SetEstimate:
        """The estimate with this call's header; ``spread`` the raw margins (None without data)."""
        shown = np.array([r.frequency or 0.0 for r in rows])
        below = 0 if spread is None else int((shown < spread).sum())
        return SetEstimate(
            mechanism=mechanism.name,
            epsilon=mechanism.epsilon,
            n=total,
            periods=len(n),
            confidence=confidence,
            method="unbiased",
            pooling=pooling,
            simultaneous=bool(simultaneous),
            estimates=rows,
            margin=None if spread is None else float(np.median(spread)),
            below_margin=below,
            margin_exceeds_most_shares=2 * below > len(rows),
            max_items=mechanism.max_items,
            oracle=mechanism.oracle.name,
        )

    if len(n) == 0:
        return document(
            [CategoryEstimate(str(c), None, None, 0.0, 1.0, None) for c in categories], 0, None
        )
    alpha = per_category_alpha(confidence, mechanism.k, simultaneous)
    shares = set_shares(mechanism, n, counts, alpha, chosen)
    unbiased, raw_low, raw_high = shares.estimate, shares.low, shares.high
    low, high = unit_interval(raw_low, raw_high)
    shown = np.clip(unbiased, low, high)
    total = int(shares.total)
    rows = category_rows(categories, shown, shares.std_error.tolist(), low, high, total, unbiased)
    return document(rows, total, (raw_high - raw_low) / 2.0)


def set_margin(
    mechanism: PaddingSampling, n: int, confidence: float = 0.95, simultaneous: bool = True
) -> float:
    """The worst-case half-width of a share's interval with n reports (one period), for all k
    categories at once unless ``simultaneous`` is False: L times the oracle's worst case
    (:func:`.advisor.share_half_width`, over every sampled frequency, so conservative)."""
    from .advisor import share_half_width

    alpha = per_category_alpha(confidence, mechanism.k, simultaneous)
    return mechanism.max_items * share_half_width(mechanism.oracle, int(n), alpha)


def set_changes(
    mechanism: PaddingSampling,
    categories: Sequence[str],
    current: Sequence[PeriodCounts],
    baseline: Sequence[PeriodCounts],
    *,
    confidence: float = 0.95,
    tests: int = 1,
    pooling: str = "overlap-safe",
) -> list[Change]:
    """Each category's share of devices in ``current`` minus ``baseline`` (each window pooled
    as ``pooling``), every row's interval at 1 - alpha/(tests x k) so that all rows hold at
    once at ``confidence``: the windows' unbiased shares clipped to [0, 1] as points, and the
    interval built from the two windows' intervals as :func:`.differences.share_changes`
    builds it (valid whatever devices report in both windows)."""
    confidence = check_options(confidence, "unbiased", pooling)
    alpha = row_alpha(confidence, mechanism.k, tests)
    windows: list[Window | None] = []
    for periods in (current, baseline):
        n, counts = period_arrays(mechanism.oracle, periods)
        if len(n) == 0:
            windows.append(None)
            continue
        shares = set_shares(mechanism, n, counts, alpha, cast(Pooling, pooling))
        windows.append((np.clip(shares.estimate, 0.0, 1.0), shares.low, shares.high))
    return window_changes(categories, windows[0], windows[1], confidence)


def set_document(
    metric: str, start: str | None, end: str | None, estimate: SetEstimate
) -> dict[str, Any]:
    """The estimate document of set ``metric`` over start..end, as a JSON-ready dict: the
    fields of a categorical estimate document (each category's ``frequency`` is its share of
    devices) plus ``max_items`` and ``oracle``."""
    return {"metric": metric, "start": start, "end": end, **plain(estimate)}


def set_source_document(
    spec: SetSpec,
    start: str | None,
    end: str | None,
    periods: Sequence[PeriodCounts],
    options: dict[str, Any],
) -> dict[str, Any]:
    """The estimate document of ``spec`` from its periods' k + L counts with a share's
    ``options`` (confidence, simultaneous, pooling; a ``method`` is not read: a set's one
    method is ``unbiased``, which the document names)."""
    estimate = set_estimate(
        spec.set_randomizer,
        spec.categories,
        list(periods),
        confidence=options["confidence"],
        simultaneous=options["simultaneous"],
        pooling=options["pooling"],
    )
    return set_document(spec.name, start, end, estimate)
