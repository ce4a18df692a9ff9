"""No estimator entry point raises on random valid sufficient statistics (hypothesis).

Every public entry point that reads per-period statistics (shares with each method, pooling
and simultaneity, means, CDF bands and quantiles, value units, the planner's half-width) gets
random mechanisms, eps, confidence levels and one to four periods of statistics the
validators accept (including empty periods, single reports and counts at 0 and n). Each must
return without an exception, with finite numbers, and with every point inside its interval.
Derandomized so that a run is deterministic; about a hundred examples per test keep the file
to seconds.
"""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deniable.client import MetricSpec
from deniable.client.errors import SpecError
from deniable.client.mechanisms import (
    BRR,
    KRR,
    MAX_EPSILON,
    MIN_EPSILON,
    NUMERIC_MECHANISMS,
    OLH,
    OUE,
    Mechanism,
    NumericMechanism,
)
from deniable.estimators import (
    PeriodCounts,
    PeriodSums,
    cdf_band,
    estimate,
    estimate_mean,
    estimate_quantiles,
    in_value_units,
)

FUZZ = settings(
    max_examples=80,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

epsilons = st.one_of(
    st.sampled_from([MIN_EPSILON, 0.6094, MAX_EPSILON]),
    st.floats(min_value=MIN_EPSILON, max_value=MAX_EPSILON),
)
confidences = st.one_of(
    st.sampled_from([0.95, 0.99, 0.5]), st.floats(min_value=1e-6, max_value=1 - 1e-9)
)
poolings = st.sampled_from(["overlap-safe", "independent"])
sizes = st.one_of(st.sampled_from([0, 1, 2, 49, 50, 99]), st.integers(min_value=0, max_value=10**9))
fractions = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(min_value=0.0, max_value=1.0))


@st.composite
def oracles(draw: st.DrawFn, largest_k: int = 8) -> Mechanism:
    kind = draw(st.sampled_from(["brr", "krr", "oue", "olh"]))
    eps = draw(epsilons)
    if kind == "brr":
        return BRR(2, eps)
    k = draw(st.integers(min_value=2, max_value=largest_k))
    return {"krr": KRR, "oue": OUE, "olh": OLH}[kind](k, eps)


@st.composite
def period_counts(draw: st.DrawFn, mechanism: Mechanism) -> list[PeriodCounts]:
    """1-4 periods of counts the validator accepts (krr's sum to n; others each in 0..n)."""
    periods = []
    for index in range(draw(st.integers(min_value=1, max_value=4))):
        n = draw(sizes)
        shares = draw(st.lists(fractions, min_size=mechanism.k, max_size=mechanism.k))
        if isinstance(mechanism, KRR):
            weights = np.array(shares) + 1e-3
            counts = np.floor(n * weights / weights.sum()).astype(np.int64)
            counts[draw(st.integers(0, mechanism.k - 1))] += n - int(counts.sum())
        else:
            counts = np.floor(np.array(shares) * n).astype(np.int64)
        periods.append(PeriodCounts(f"p{index}", n, [int(c) for c in counts]))
    return periods


@st.composite
def period_sums(draw: st.DrawFn, mechanism: NumericMechanism) -> list[PeriodSums]:
    """1-4 periods of sums the validator accepts: duchi's from a count of +C1; pm's and
    hybrid's any |sum y| <= nC and 0 <= sum y^2 <= nC^2 (a superset of the reachable ones)."""
    c = mechanism.bound
    two_point = mechanism.name == "duchi" or getattr(mechanism, "pm_probability", 1.0) == 0.0
    periods = []
    for index in range(draw(st.integers(min_value=1, max_value=4))):
        n = draw(sizes)
        if two_point:
            plus = round(draw(fractions) * n)
            total, squares = c * (2 * plus - n), n * c * c
        else:
            total = (2 * draw(fractions) - 1) * n * c
            squares = draw(fractions) * n * c * c
        periods.append(PeriodSums(f"p{index}", n, total, squares))
    return periods


def accepted(bounds: tuple[float, float]) -> bool:
    """Whether a numeric metric may be registered with this [lower, upper]."""
    try:
        MetricSpec.numeric("m", lower=bounds[0], upper=bounds[1], epsilon=1.0)
    except SpecError:
        return False
    return True


magnitudes = st.sampled_from([0.0, 1e-300, 1e-12, 1.0, 1e12, 1e300])
ranges = st.one_of(
    st.tuples(magnitudes.map(lambda x: -x), magnitudes),
    st.tuples(st.floats(-1e300, 1e300), st.floats(-1e300, 1e300)),
).filter(accepted)


def finite_json(value: object) -> object:
    """The value through JSON with NaN and infinities refused (what the API would send)."""
    return json.loads(json.dumps(value, allow_nan=False))


@FUZZ
@given(data=st.data())
def test_shares(data: st.DataObject) -> None:
    mechanism = data.draw(oracles())
    periods = data.draw(period_counts(mechanism))
    result = estimate(
        mechanism,
        [f"c{v}" for v in range(mechanism.k)],
        periods,
        confidence=data.draw(confidences),
        method=data.draw(st.sampled_from(["unbiased", "consistent", "mle"])),
        simultaneous=data.draw(st.booleans()),
        pooling=data.draw(poolings),
    )
    finite_json(result.to_dict())
    for row in result.estimates:
        assert 0.0 <= row.ci_low <= row.ci_high <= 1.0
        if row.frequency is not None:
            assert row.ci_low <= row.frequency <= row.ci_high


@FUZZ
@given(data=st.data())
def test_means(data: st.DataObject) -> None:
    mechanism = NUMERIC_MECHANISMS[data.draw(st.sampled_from(sorted(NUMERIC_MECHANISMS)))](
        data.draw(epsilons)
    )
    result = estimate_mean(
        mechanism,
        data.draw(period_sums(mechanism)),
        confidence=data.draw(confidences),
        pooling=data.draw(poolings),
    )
    assert -1.0 <= result.ci_low <= result.ci_high <= 1.0
    if result.estimate is not None:
        assert result.std_error is not None and math.isfinite(result.std_error)
        assert result.ci_low <= result.estimate <= result.ci_high
    lower, upper = data.draw(ranges)
    shown = in_value_units(result, lower, upper)
    finite_json(shown.__dict__)
    assert lower <= shown.ci_low <= shown.ci_high <= upper
    if shown.estimate is not None:
        assert shown.ci_low <= shown.estimate <= shown.ci_high


@FUZZ
@given(data=st.data())
def test_cdf_bands_and_quantiles(data: st.DataObject) -> None:
    mechanism = data.draw(oracles())
    periods = data.draw(period_counts(mechanism))
    confidence, pooling = data.draw(confidences), data.draw(poolings)
    band = cdf_band(mechanism, periods, confidence=confidence, pooling=pooling)
    if band is not None:
        point, low, high = band
        assert np.all(np.isfinite(point))
        assert np.all((low >= 0.0) & (low <= high) & (high <= 1.0))
    edges = [float(e) for e in range(mechanism.k + 1)]
    qs = data.draw(st.lists(st.floats(min_value=1e-6, max_value=1 - 1e-6), min_size=1, max_size=5))
    for interval in estimate_quantiles(
        mechanism, edges, periods, qs, confidence=confidence, pooling=pooling
    ):
        ends = [end for end in (interval.low, interval.high) if end is not None]
        assert all(edges[0] <= end <= edges[-1] for end in ends)
        if len(ends) == 2:
            assert interval.low <= interval.high


def test_a_quantile_interval_is_never_inverted() -> None:
    """Found by the fuzz above: all 231 reports support bucket 2 only (oue, eps 0.6094); the
    band's upper end at edge 3 (0.499) lies below 0.5 while its lower end at edge 2 (1.0)
    already reaches it, so inversion gives low = 3 > high = 2. Intersecting the band with
    non-decreasing functions (a running max of the lower ends, a reverse running min of the
    upper ends) keeps its coverage and fixes it (estimators.quantiles.monotone)."""
    (interval,) = estimate_quantiles(
        OUE(4, 0.6094), [0.0, 1.0, 2.0, 3.0, 4.0], PeriodCounts("p", 231, [0, 231, 0, 0]), [0.5]
    )
    assert interval.low is not None
    assert interval.high is None or interval.low <= interval.high
