"""Planning: how precise n reports are, and how many reports are needed.

Margins are worst-case over the true share, for the super-population estimand, at the Wald
level: z * sqrt(max_f lam(1-lam)) / ((p*-q*) sqrt(n)) with lam = q* + (p*-q*) f, f in [0, 1]
(STATS.md, the general oracle). The benchmark of efficiency is V_opt, the per-report variance
constant of subset selection with its best subset size (STATS.md section 5).

The mechanism a plan recommends is the one with the smallest worst-case margin
(:func:`fewest_reports`): the objective a plan states. ``auto`` in a spec resolves to the least
variance as f -> 0 instead (:func:`~deniable.client.mechanisms.least_variance`); the two differ
near GRR's break-even k = 3e^eps + 2, where the worst case (f = 1/2) favours OUE/OLH.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import (
    MECHANISMS,
    OLH,
    OLH_PRIME,
    OUE,
    Mechanism,
    NumericMechanism,
    least_variance,
    make_mechanism,
    make_numeric_mechanism,
)
from deniable.client.wire import payload_text

from .intervals import z_value

MAX_REPORTS = 10**15
"""The most reports the planner answers with: far more than any deployment collects, and far
below 2^53, so that report counts and their square roots stay exact enough to invert."""


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


def _worst_spread(mech: Mechanism) -> float:
    """max over f in [0, 1] of sqrt(lam(1-lam))/(p*-q*): the worst-case per-report SP SD."""
    p, q = mech.p_star, mech.q_star
    lam = min(max(0.5, min(p, q)), max(p, q))
    return math.sqrt(lam * (1.0 - lam)) / (p - q)


def _one_report_margin(
    k: int,
    epsilon: float,
    confidence: float,
    mechanism: Mechanism | str | None,
    simultaneous: bool,
) -> tuple[Mechanism, float]:
    """The mechanism planned for, and the worst-case margin of error of one report: z times
    :func:`_worst_spread` (n reports divide it by sqrt(n))."""
    mech = _resolve(k, epsilon, mechanism)
    return mech, z_value(confidence, k, simultaneous) * _worst_spread(mech)


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
    simultaneous: bool = False,
) -> float:
    """Worst-case half-width of a share's interval with n reports.

    ``mechanism`` None plans for the mechanism with the least variance for (k, eps).
    """
    _check_confidence(confidence)
    _check_reports(n)
    _, spread = _one_report_margin(k, epsilon, confidence, mechanism, simultaneous)
    return spread / math.sqrt(n)


def reports_needed(
    k: int,
    epsilon: float,
    margin: float,
    confidence: float = 0.95,
    mechanism: Mechanism | str | None = None,
    simultaneous: bool = False,
) -> int:
    """The fewest reports whose worst-case margin of error is at most ``margin``.

    Raises :class:`TooManyReports` when that is more than :data:`MAX_REPORTS`.
    """
    _check_confidence(confidence)
    if not 0.0 < margin < 1.0:
        raise InvalidInput("margin must be strictly between 0 and 1")
    mech, spread = _one_report_margin(k, epsilon, confidence, mechanism, simultaneous)
    return _fewest_reports(spread, margin, mech.name, mech.epsilon)


def _fewest_reports(spread: float, margin: float, name: str, epsilon: float) -> int:
    """The least n with spread / sqrt(n) <= margin; :class:`TooManyReports` past
    :data:`MAX_REPORTS` (``name`` and ``epsilon`` say which mechanism, in the message)."""
    root = spread / margin
    if not root <= math.sqrt(MAX_REPORTS):
        raise TooManyReports(
            f"a margin of {margin:g} with {name} at epsilon {epsilon:g} needs more"
            f" than {MAX_REPORTS:.0e} reports"
        )
    # root * root and each margin compared below are off by a few ulps, less than one report
    # for n <= MAX_REPORTS: the answer is within two reports of the closed form, and the margin
    # falls with n, so this walk takes at most five steps.
    n = max(1, math.ceil(root * root) - 2)
    while spread / math.sqrt(n) > margin:
        n += 1
    return n


def fewest_reports(k: int, epsilon: float, mechanisms: Iterable[str] = MECHANISMS) -> str:
    """Of ``mechanisms`` (names; those that cannot carry k categories are skipped), the one
    with the smallest worst-case margin of error for (k, eps), the first listed on a tie.

    It needs the fewest reports for any margin, and gives the smallest margin for any number
    of reports, at any confidence, per category or simultaneous (z is the same for all).
    """
    spreads = []
    for position, name in enumerate(mechanisms):
        try:
            spreads.append((_worst_spread(make_mechanism(name, k, epsilon)), position, name))
        except ValueError:  # krr refuses k above MAX_KRR_CATEGORIES
            continue
    if not spreads:
        raise InvalidInput(f"none of the mechanisms given can carry {k} categories")
    return min(spreads)[2]


def report_bytes(mechanism: Mechanism) -> int:
    """Bytes of the largest payload ``mechanism`` sends, in its wire form (JSON text): what
    each report adds to an upload and to storage besides its id. OUE's grows with k (k/8
    bytes, base64), the others' stay a few dozen bytes at most."""
    payload: object
    if isinstance(mechanism, OUE):
        payload = base64.b64encode(bytes(mechanism.n_bytes)).decode("ascii")
    elif isinstance(mechanism, OLH):
        payload = {"a": OLH_PRIME - 1, "b": OLH_PRIME - 1, "y": mechanism.g - 1}
    else:
        payload = mechanism.k - 1
    return len(payload_text(payload))  # type: ignore[arg-type]


def v_opt(k: int, epsilon: float) -> float:
    """min over d of subset selection's V*_SS(d) = q*(1-q*)/(p*-q*)^2 (STATS.md sections 3 and 5)."""
    if k < 2:
        raise InvalidInput("k must be at least 2")
    e = math.exp(epsilon)
    d = np.arange(1, k, dtype=np.float64)
    p = d * e / (d * e + k - d)
    q = d * ((d - 1) * e + k - d) / ((k - 1) * (d * e + k - d))
    return float(np.min(q * (1 - q) / (p - q) ** 2))


def _numeric_spread(
    lower: float,
    upper: float,
    epsilon: float,
    confidence: float,
    mechanism: NumericMechanism | str | None,
) -> tuple[NumericMechanism, float]:
    """The numeric mechanism planned for (None or ``auto``: the least worst-case variance at
    eps, as a spec's ``auto`` resolves) and one report's worst-case margin of the mean in value
    units: z sqrt(max_t Var(y | t)) (upper - lower)/2 (n reports divide it by sqrt(n))."""
    _check_confidence(confidence)
    if not lower < upper:
        raise InvalidInput("lower must be less than upper")
    if isinstance(mechanism, NumericMechanism):
        if mechanism.epsilon != float(epsilon):
            raise InvalidInput("mechanism's epsilon differs from the epsilon given")
        mech = mechanism
    else:
        mech = make_numeric_mechanism(mechanism or "auto", epsilon)
    z = z_value(confidence, 1, False)
    return mech, z * math.sqrt(mech.worst_case_variance) * (upper - lower) / 2


def mean_margin(
    lower: float,
    upper: float,
    epsilon: float,
    n: int,
    confidence: float = 0.95,
    mechanism: NumericMechanism | str | None = None,
) -> float:
    """Worst-case (over the values) half-width, in value units, of the mean's interval with n
    reports (the Wald level; STATS.md section 10)."""
    _check_reports(n)
    _, spread = _numeric_spread(lower, upper, epsilon, confidence, mechanism)
    return spread / math.sqrt(n)


def mean_reports_needed(
    lower: float,
    upper: float,
    epsilon: float,
    margin: float,
    confidence: float = 0.95,
    mechanism: NumericMechanism | str | None = None,
) -> int:
    """The fewest reports whose worst-case margin of the mean is at most ``margin`` (value
    units). Raises :class:`TooManyReports` above :data:`MAX_REPORTS`."""
    if not margin > 0.0:
        raise InvalidInput("margin must be positive")
    mech, spread = _numeric_spread(lower, upper, epsilon, confidence, mechanism)
    return _fewest_reports(spread, margin, mech.name, mech.epsilon)


def candidate_mechanisms(k: int) -> list[str]:
    """The client's mechanisms that can carry a k-category metric: brr only for k = 2, where
    krr is the same mechanism and is left out."""
    left_out = "krr" if k == 2 else "brr"
    return [name for name in MECHANISMS if name != left_out]


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
                    reports,  # type: ignore[arg-type]
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
        "advised": fewest_reports(k, epsilon, candidates),
        "auto": least_variance(k, epsilon),
        "mechanisms": rows,
    }
