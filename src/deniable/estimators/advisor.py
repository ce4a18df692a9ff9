"""Planning: how precise n reports are, and how many reports are needed.

A plan states the half-width of the interval the product itself computes (STATS.md section
"Planning"): for a share, the Wilson (hulled with Clopper-Pearson at small counts) interval
on the support count, mapped through debiasing (:func:`~.intervals.share_interval`), at the
count the worst-case true share gives, with the Bonferroni level alpha/k when the intervals
hold for all categories at once (the default, as the estimates show them); for a mean, the
interval :func:`~.numeric.estimate_mean` computes from the sums of the worst-case population
(half of it at each end of the range, which maximizes both the mechanism's noise and the
spread of the values). The report count is searched (bracketed, then bisected) against that
function, so a plan at margin m meets m with the product's interval, and one report fewer
does not. The half-width is the one before clipping to [0, 1] (the estimate's ``margin``).

The benchmark of efficiency is V_opt, the per-report variance constant of subset selection
with its best subset size (STATS.md section 5). The mechanism a plan recommends is the one
needing the fewest reports for the margin asked; ``auto`` in a spec resolves to the least
variance as f -> 0 instead (:func:`~deniable.client.mechanisms.least_variance`); the two
differ near GRR's break-even k = 3e^eps + 2, where the worst case (f = 1/2) favours OUE/OLH.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import (
    MECHANISMS,
    NUMERIC_MECHANISMS,
    OLH,
    OLH_PRIME,
    OUE,
    Mechanism,
    NumericMechanism,
    Payload,
    least_variance,
    make_mechanism,
    make_numeric_mechanism,
)
from deniable.client.wire import payload_text

from .intervals import CP_BELOW, per_category_alpha, share_interval, z_value
from .numeric import estimate_mean, is_two_point
from .results import PeriodSums

MAX_REPORTS = 10**15
"""The most reports the planner answers with: far more than any deployment collects, and far
below 2^53, so that report counts stay exact in floating point."""


class TooManyReports(InvalidInput):
    """The margin asked for would need more than :data:`MAX_REPORTS` reports."""


def _resolve(k: int, epsilon: float, mechanism: Mechanism | str | None) -> Mechanism:
    """The mechanism to plan for: the one given (by instance or name), else the one with the
    least variance for (k, eps) (:func:`~deniable.client.mechanisms.least_variance`)."""
    if isinstance(mechanism, Mechanism):
        if mechanism.k != k or mechanism.epsilon != float(epsilon):
            raise InvalidInput("mechanism's k and epsilon differ from the k and epsilon given")
        return mechanism
    return make_mechanism(mechanism or least_variance(k, epsilon), k, epsilon)


def _worst_rate(mech: Mechanism) -> float:
    """The support rate lam = q* + (p*-q*) f, f in [0, 1], nearest 1/2: where the Wald and
    Wilson widths are largest."""
    p, q = mech.p_star, mech.q_star
    return min(max(0.5, min(p, q)), max(p, q))


def _worst_spread(mech: Mechanism) -> float:
    """max over f in [0, 1] of sqrt(lam(1-lam))/(p*-q*): the worst-case per-report SP SD."""
    lam = _worst_rate(mech)
    return math.sqrt(lam * (1.0 - lam)) / (mech.p_star - mech.q_star)


def worst_counts(mech: Mechanism, n: int) -> np.ndarray:
    """The support counts at which the product's interval is widest over the true shares:
    the counts nearest n lam for the rate lam nearest 1/2 (Wilson is widest there), and the
    widest counts still hulled with Clopper-Pearson (CP_BELOW - 1 reports on a side), each
    kept within the counts a share in [0, 1] gives on average, n q* to n p* rounded outward.
    tests/estimators/test_planner.py checks against every count in that range."""
    p, q = mech.p_star, mech.q_star
    low = math.floor(n * min(p, q))
    high = min(n, math.ceil(n * max(p, q)))
    centre = n * _worst_rate(mech)
    candidates = [math.floor(centre), math.ceil(centre), CP_BELOW - 1, n - CP_BELOW + 1]
    return np.unique(np.clip(np.asarray(candidates, dtype=np.float64), low, high))


def share_half_width(mech: Mechanism, n: int, alpha: float) -> float:
    """The worst-case half-width over the true shares of the product's interval for one
    share with n reports (one period) at per-category miss level alpha: half the width of
    :func:`~.intervals.share_interval` (before clipping) at :func:`worst_counts`."""
    counts = worst_counts(mech, n)
    low, high = share_interval(mech, counts, np.full_like(counts, float(n)), alpha)
    return float(np.max(high - low) / 2.0)


def _check_reports(n: float) -> None:
    """Refuse a report count a margin cannot be planned for: not positive, or past
    :data:`MAX_REPORTS` (InvalidInput naming the bound)."""
    if not 0 < n <= MAX_REPORTS:
        raise InvalidInput(f"n must be a positive number of reports, at most {MAX_REPORTS:.0e}")


def _check_confidence(confidence: float) -> None:
    """Refuse a confidence level outside (0, 1)."""
    if not 0.0 < confidence < 1.0:
        raise InvalidInput("confidence must be strictly between 0 and 1")


def margin_of_error(
    k: int,
    epsilon: float,
    n: int,
    confidence: float = 0.95,
    mechanism: Mechanism | str | None = None,
    simultaneous: bool = True,
) -> float:
    """Worst-case half-width of a share's interval with n reports, as the product computes
    it: for all k categories at once unless ``simultaneous`` is False.

    ``mechanism`` None plans for the mechanism with the least variance for (k, eps).
    """
    _check_confidence(confidence)
    _check_reports(n)
    mech = _resolve(k, epsilon, mechanism)
    return share_half_width(mech, int(n), per_category_alpha(confidence, k, simultaneous))


def reports_needed(
    k: int,
    epsilon: float,
    margin: float,
    confidence: float = 0.95,
    mechanism: Mechanism | str | None = None,
    simultaneous: bool = True,
) -> int:
    """The fewest reports whose worst-case margin of error (:func:`margin_of_error`) is at
    most ``margin``; with one report fewer it is above.

    Raises :class:`TooManyReports` when that is more than :data:`MAX_REPORTS`.
    """
    _check_confidence(confidence)
    if not 0.0 < margin < 1.0:
        raise InvalidInput("margin must be strictly between 0 and 1")
    mech = _resolve(k, epsilon, mechanism)
    alpha = per_category_alpha(confidence, k, simultaneous)
    z = z_value(confidence, k, simultaneous)
    root = z * _worst_spread(mech) / margin
    guess = root * root - z * z  # Wilson's n at the worst rate 1/2; inf past floats
    return _fewest_reports(
        lambda n: share_half_width(mech, n, alpha) <= margin,
        guess,
        f"a margin of {margin:g} with {mech.name} at epsilon {mech.epsilon:g}",
    )


def _fewest_reports(meets: Callable[[int], bool], guess: float, what: str) -> int:
    """The least n with ``meets(n)`` and not ``meets(n - 1)``, searched from ``guess`` (an
    estimate from the normal approximation): gallop up or down from it to a bracket, then
    bisect. :class:`TooManyReports` (``what`` says which plan) past :data:`MAX_REPORTS`."""
    if not guess < MAX_REPORTS:  # also catches inf and nan
        raise TooManyReports(f"{what} needs more than {MAX_REPORTS:.0e} reports")
    start = min(MAX_REPORTS, max(1, math.ceil(guess)))
    step = max(1, start // 1024)
    if meets(start):
        high, low = start, start - step
        while low >= 1 and meets(low):
            high, step = low, step * 2
            low = high - step
        low = max(low, 0)
    else:
        low, high = start, start + step
        while high <= MAX_REPORTS and not meets(high):
            low, step = high, step * 2
            high = low + step
        if high > MAX_REPORTS:
            if not meets(MAX_REPORTS):
                raise TooManyReports(f"{what} needs more than {MAX_REPORTS:.0e} reports")
            high = MAX_REPORTS
    while high - low > 1:  # meets(high); low is 0 or fails
        middle = (low + high) // 2
        if meets(middle):
            high = middle
        else:
            low = middle
    return high


def fewest_reports(
    k: int,
    epsilon: float,
    mechanisms: Iterable[str] = MECHANISMS,
    margin: float = 0.01,
    confidence: float = 0.95,
    simultaneous: bool = True,
) -> str:
    """Of ``mechanisms`` (names; those that cannot carry k categories are skipped), the one
    needing the fewest reports for ``margin`` (:func:`reports_needed`), the first listed on
    a tie."""
    needed = []
    for position, name in enumerate(mechanisms):
        try:
            mech = make_mechanism(name, k, epsilon)
        except ValueError:  # krr refuses k above MAX_KRR_CATEGORIES
            continue
        try:
            count = reports_needed(k, epsilon, margin, confidence, mech, simultaneous)
        except TooManyReports:
            count = MAX_REPORTS + 1
        needed.append((count, position, name))
    if not needed:
        raise InvalidInput(f"none of the mechanisms given can carry {k} categories")
    return min(needed)[2]


def report_bytes(mechanism: Mechanism) -> int:
    """Bytes of the largest payload ``mechanism`` sends, in its wire form (JSON text): what
    each report adds to an upload and to storage besides its id. OUE's grows with k (k/8
    bytes, base64), the others' stay a few dozen bytes at most."""
    payload: Payload
    if isinstance(mechanism, OUE):
        payload = base64.b64encode(bytes(mechanism.n_bytes)).decode("ascii")
    elif isinstance(mechanism, OLH):
        payload = {"a": OLH_PRIME - 1, "b": OLH_PRIME - 1, "y": mechanism.g - 1}
    else:
        payload = mechanism.k - 1
    return len(payload_text(payload))


def v_opt(k: int, epsilon: float) -> float:
    """min over d of subset selection's V*_SS(d) = q*(1-q*)/(p*-q*)^2 (STATS.md sections 3 and 5)."""
    if k < 2:
        raise InvalidInput("k must be at least 2")
    e = math.exp(epsilon)
    d = np.arange(1, k, dtype=np.float64)
    p = d * e / (d * e + k - d)
    q = d * ((d - 1) * e + k - d) / ((k - 1) * (d * e + k - d))
    return float(np.min(q * (1 - q) / (p - q) ** 2))


def _numeric_mechanism(
    lower: float, upper: float, epsilon: float, mechanism: NumericMechanism | str | None
) -> NumericMechanism:
    """The numeric mechanism planned for: the one given (instance or name), else (None or
    ``auto``) the one a spec's ``auto`` resolves to at eps."""
    if not lower < upper:
        raise InvalidInput("lower must be less than upper")
    if isinstance(mechanism, NumericMechanism):
        if mechanism.epsilon != float(epsilon):
            raise InvalidInput("mechanism's epsilon differs from the epsilon given")
        return mechanism
    return make_numeric_mechanism(mechanism or "auto", epsilon)


def worst_population_moment(mech: NumericMechanism) -> float:
    """E[y^2] per report when the population is at the ends of the range (t = -1, +1; Var(y |
    t) is symmetric, so the share at each end does not change it), half at each end:
    the population whose reports' variance, Var(y | t) averaged plus the spread of t
    (E Var(y | t) + Var t), is the largest (STATS.md, "Planning"); its mean is 0."""
    return (mech.variance(-1.0) + mech.variance(1.0)) / 2.0 + 1.0


def worst_means(mech: NumericMechanism, n: int) -> list[float]:
    """The means (t axis) of the two-point populations at the ends where the product's
    interval is widest: 0, and for a two-point mechanism (duchi) also those whose count of
    +C1 is the widest still hulled with Clopper-Pearson (CP_BELOW - 1 on a side), as for a
    share (:func:`worst_counts`); tests/estimators/test_planner.py checks a grid of others."""
    means = [0.0]
    if is_two_point(mech):
        edge = min(1.0, abs(mech.bound * (1.0 - 2.0 * (CP_BELOW - 1) / n)))
        means += [-edge, edge]
    return means


def mean_half_width(mech: NumericMechanism, n: int, confidence: float) -> float:
    """Half the width, on the [-1, 1] axis, of the interval the product computes
    (:func:`~.numeric.estimate_mean`, one period) from the expected sums of n reports of the
    worst-case population: at the ends of the range (:func:`worst_population_moment`), with
    the mean of :func:`worst_means` giving the widest."""
    squares = n * worst_population_moment(mech)
    widths = []
    for mean in worst_means(mech, n):
        result = estimate_mean(
            mech, PeriodSums("plan", n, n * mean, squares), confidence=confidence
        )
        widths.append((result.ci_high - result.ci_low) / 2.0)
    return max(widths)


def mean_margin(
    lower: float,
    upper: float,
    epsilon: float,
    n: int,
    confidence: float = 0.95,
    mechanism: NumericMechanism | str | None = None,
) -> float:
    """Worst-case (over the populations of values) half-width, in value units, of the
    mean's interval as the product computes it with n reports (:func:`mean_half_width`)."""
    _check_confidence(confidence)
    _check_reports(n)
    mech = _numeric_mechanism(lower, upper, epsilon, mechanism)
    return mean_half_width(mech, int(n), confidence) * (upper - lower) / 2


def mean_reports_needed(
    lower: float,
    upper: float,
    epsilon: float,
    margin: float,
    confidence: float = 0.95,
    mechanism: NumericMechanism | str | None = None,
) -> int:
    """The fewest reports whose worst-case margin of the mean (:func:`mean_margin`, value
    units) is at most ``margin``; with one fewer it is above. Raises
    :class:`TooManyReports` above :data:`MAX_REPORTS`."""
    _check_confidence(confidence)
    if not margin > 0.0:
        raise InvalidInput("margin must be positive")
    mech = _numeric_mechanism(lower, upper, epsilon, mechanism)
    wanted = margin / ((upper - lower) / 2)  # on the [-1, 1] axis
    z = z_value(confidence, 1, False)
    root = z * math.sqrt(worst_population_moment(mech)) / wanted if wanted > 0 else math.inf
    guess = root * root  # the normal approximation's n; inf past floats
    return _fewest_reports(
        lambda n: mean_half_width(mech, n, confidence) <= wanted,
        guess,
        f"a margin of {margin:g} on [{lower:g}, {upper:g}] with {mech.name} at epsilon"
        f" {mech.epsilon:g}",
    )


def _given_reports(reports: int | None) -> int:
    """The report count a plan without a margin is for; :class:`InvalidInput` if the caller
    gave neither a margin nor a count."""
    if reports is None:
        raise InvalidInput("a plan needs a margin or a number of reports")
    return reports


def candidate_mechanisms(k: int) -> list[str]:
    """The client's mechanisms that can carry a k-category metric: brr only for k = 2, where
    krr is the same mechanism and is left out."""
    left_out = "krr" if k == 2 else "brr"
    return [name for name in MECHANISMS if name != left_out]


V_STAR_MEANING = (
    "V* is the noise one report carries: with n reports a rare category's share is estimated"
    " with variance V*/n, so the smaller V*, the fewer reports a margin needs."
)
"""What a plan's ``v_star`` column means, in words (the CLI's plan and the dashboard's Plan
page both print it)."""


def plan_document(
    k: int,
    epsilon: float,
    *,
    margin: float | None,
    reports: int | None,
    confidence: float,
    simultaneous: bool,
) -> dict[str, Any]:
    """Reports needed for ``margin`` (or the margin ``reports`` give), per mechanism, and the
    advisor's pick: what ``deniable plan`` prints and the dashboard's Plan page shows."""
    candidates = candidate_mechanisms(k)
    rows = []
    for name in candidates:
        try:
            mechanism = make_mechanism(name, k, epsilon)
        except ValueError as exc:
            rows.append({"mechanism": name, "supported": False, "reason": str(exc)})
            continue
        row: dict[str, Any] = {
            "mechanism": name,
            "supported": True,
            "v_star": mechanism.v_star,
            "report_bytes": report_bytes(mechanism),
        }
        if margin is not None:
            try:
                row["reports_needed"] = reports_needed(
                    k,
                    epsilon,
                    margin,
                    confidence=confidence,
                    mechanism=name,
                    simultaneous=simultaneous,
                )
            except TooManyReports as exc:
                row.update(reports_needed=None, reason=str(exc))
        else:
            row["margin"] = float(
                margin_of_error(
                    k,
                    epsilon,
                    _given_reports(reports),
                    confidence=confidence,
                    mechanism=name,
                    simultaneous=simultaneous,
                )
            )
        rows.append(row)
    return {
        "categories": k,
        "epsilon": epsilon,
        "confidence": confidence,
        "simultaneous": simultaneous,
        **({"margin": margin} if margin is not None else {"reports": reports}),
        "advised": _advised(rows, "margin" if margin is None else "reports_needed"),
        "auto": least_variance(k, epsilon),
        "mechanisms": rows,
    }


def _advised(rows: list[dict[str, Any]], key: str) -> str:
    """The mechanism of ``rows`` with the least ``key`` (reports needed, or the margin),
    the first listed on a tie; a row without one (unsupported, or past MAX_REPORTS) last."""
    ranked = [
        (row.get(key) is None, row.get(key) or 0, position, row["mechanism"])
        for position, row in enumerate(rows)
        if row.get("supported", True)
    ]
    return min(ranked)[3]


def numeric_plan_document(
    lower: float,
    upper: float,
    epsilon: float,
    *,
    margin: float | None,
    reports: int | None,
    confidence: float,
) -> dict[str, Any]:
    """Reports needed for ``margin`` on the mean (value units), or the margin ``reports``
    give, per numeric mechanism, with the one needing the fewest (``advised``) and the one a
    spec's ``auto`` resolves to: what ``deniable plan --numeric`` prints."""
    if not lower < upper:
        raise InvalidInput("lower must be less than upper")
    rows = []
    for name in NUMERIC_MECHANISMS:
        mechanism = make_numeric_mechanism(name, epsilon)
        row: dict[str, Any] = {
            "mechanism": name,
            "worst_case_variance": mechanism.worst_case_variance,
            "worst_population_variance": worst_population_moment(mechanism),
        }
        if margin is not None:
            try:
                row["reports_needed"] = mean_reports_needed(
                    lower, upper, epsilon, margin, confidence=confidence, mechanism=mechanism
                )
            except TooManyReports as exc:
                row.update(reports_needed=None, reason=str(exc))
        else:
            row["margin"] = mean_margin(
                lower,
                upper,
                epsilon,
                _given_reports(reports),
                confidence=confidence,
                mechanism=mechanism,
            )
        rows.append(row)
    return {
        "type": "numeric",
        "lower": lower,
        "upper": upper,
        "epsilon": epsilon,
        "confidence": confidence,
        **({"margin": margin} if margin is not None else {"reports": reports}),
        "advised": _advised(rows, "margin" if margin is None else "reports_needed"),
        "auto": make_numeric_mechanism("auto", epsilon).name,
        "mechanisms": rows,
    }


SHUFFLED_PLAN_STEPS = 16
"""Halvings of [E, MAX_EPSILON] when searching the largest local eps under a central target:
eps0 to within 20 * 2^-16 (3e-4), then rounded down to three significant digits."""


def _three_digits_down(x: float) -> float:
    """``x`` rounded down to three significant digits: a spec eps at most ``x``."""
    scale = 10.0 ** (math.floor(math.log10(x)) - 2)
    return math.floor(x / scale + 1e-9) * scale


def largest_local_epsilon(
    mechanism: str, k: int, central_epsilon: float, batch: int, delta: float
) -> float:
    """The largest local eps0 (three significant digits, rounded down) whose central eps through
    a shuffler releasing batches of ``batch`` is at most ``central_epsilon`` at ``delta``, for
    ``mechanism`` over k categories: bisected (the central eps grows with eps0), at least
    ``central_epsilon`` itself (shuffling never raises eps), at most MAX_EPSILON."""
    from deniable.client.mechanisms import MAX_EPSILON, check_epsilon

    from .shuffling import central_guarantee, check_batch

    check_epsilon(central_epsilon)
    check_batch(batch, delta)

    def meets(eps0: float) -> bool:
        guarantee = central_guarantee(make_mechanism(mechanism, k, eps0), batch, delta)
        return guarantee.epsilon <= central_epsilon

    if meets(MAX_EPSILON):
        return MAX_EPSILON
    low, high = central_epsilon, MAX_EPSILON
    for _ in range(SHUFFLED_PLAN_STEPS):
        middle = (low + high) / 2
        if meets(middle):
            low = middle
        else:
            high = middle
    return max(central_epsilon, _three_digits_down(low))


def shuffled_plan_document(
    k: int,
    central_epsilon: float,
    *,
    batch: int,
    delta: float,
    reports: int | None,
    confidence: float,
    simultaneous: bool,
) -> dict[str, Any]:
    """The margin at a target central eps through a shuffler, per mechanism, beside the margin
    at that eps without one: what ``deniable plan --shuffled`` prints. Through a shuffler
    releasing batches of ``batch`` devices, a report may have the largest local eps0 whose
    central eps is at most ``central_epsilon`` (:func:`largest_local_epsilon`); without it,
    the local eps must be the target itself. Margins are at ``reports`` reports (default: one
    batch). ``advised``: the mechanism with the least margin through the shuffler."""
    from .shuffling import central_guarantee

    reports = batch if reports is None else reports
    _check_reports(reports)
    rows = []
    for name in candidate_mechanisms(k):
        try:
            make_mechanism(name, k, central_epsilon)
        except ValueError as exc:
            rows.append({"mechanism": name, "supported": False, "reason": str(exc)})
            continue
        eps0 = largest_local_epsilon(name, k, central_epsilon, batch, delta)
        guarantee = central_guarantee(make_mechanism(name, k, eps0), batch, delta)
        margin_at = {
            eps: float(
                margin_of_error(
                    k, eps, reports, confidence, mechanism=name, simultaneous=simultaneous
                )
            )
            for eps in (central_epsilon, eps0)
        }
        rows.append(
            {
                "mechanism": name,
                "supported": True,
                "local_only_margin": margin_at[central_epsilon],
                "local_epsilon": eps0,
                "central_epsilon_reached": guarantee.epsilon,
                "bound": guarantee.bound,
                "margin": margin_at[eps0],
            }
        )
    return {
        "categories": k,
        "central_epsilon": central_epsilon,
        "batch": batch,
        "delta": delta,
        "reports": reports,
        "confidence": confidence,
        "simultaneous": simultaneous,
        "advised": _advised(rows, "margin"),
        "mechanisms": rows,
    }
