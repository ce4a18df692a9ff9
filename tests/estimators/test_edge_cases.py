"""Edge cases give clear results, never crashes or NaN: no data, unseen categories, one report, extreme eps."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from deniable.client.mechanisms import (
    BRR,
    KRR,
    MAX_EPSILON,
    MIN_EPSILON,
    OLH,
    OUE,
    Mechanism,
    make_mechanism,
)
from deniable.client.randomness import SeededRandomness
from deniable.estimators import (
    PeriodCounts,
    estimate,
    estimate_reports,
    margin_of_error,
    reports_needed,
    support_matrix,
)
from deniable.estimators.advisor import MAX_REPORTS, TooManyReports

METHODS = ["unbiased", "consistent", "mle"]


def _cats(k: int) -> list[str]:
    return [f"c{v}" for v in range(k)]


def _finite(result) -> None:
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    for row in doc["estimates"]:
        assert 0.0 <= row["ci_low"] <= row["ci_high"] <= 1.0
        for key in ("frequency", "std_error", "count"):
            assert row[key] is None or math.isfinite(row[key])


def test_empty_periods_carry_no_weight() -> None:
    m = KRR(3, 1.0)
    data = [PeriodCounts("a", 40, [20, 10, 10]), PeriodCounts("c", 60, [20, 30, 10])]
    with_empty = [data[0], PeriodCounts("b", 0, [0, 0, 0]), data[1]]
    assert estimate(m, _cats(3), with_empty) == estimate(m, _cats(3), data)
    assert estimate(m, _cats(3), with_empty).periods == 2


@pytest.mark.parametrize("method", METHODS)
def test_a_never_reported_category_gets_a_short_interval_at_zero(method: str) -> None:
    m = KRR(4, 2.0)
    result = estimate(m, _cats(4), PeriodCounts("d", 2000, [1200, 500, 300, 0]), method=method)
    _finite(result)
    row = result.estimates[3]
    assert row.ci_low == 0.0 and 0.0 < row.ci_high < 0.02
    assert row.unbiased < 0 and row.clipped  # unbiased may leave [0, 1]; documented
    assert row.frequency == 0.0  # the point shown stays within its interval


@pytest.mark.parametrize(
    "mechanism", [BRR(2, 1.0), KRR(5, 1.0), OUE(5, 1.0), OLH(5, 1.0)], ids=repr
)
@pytest.mark.parametrize("method", METHODS)
def test_a_single_report(mechanism: Mechanism, method: str) -> None:
    payload = mechanism.randomize(0, SeededRandomness(1))
    counts = support_matrix(mechanism, [payload]).sum(axis=0)
    result = estimate(mechanism, _cats(mechanism.k), PeriodCounts("d", 1, counts), method=method)
    _finite(result)
    assert result.n == 1
    for row in result.estimates:
        assert row.ci_high - row.ci_low > 0.5  # one report says little
        if method == "unbiased":
            assert row.std_error == pytest.approx(0.5 / (mechanism.p_star - mechanism.q_star))


@pytest.mark.parametrize(
    "mechanism",
    [
        BRR(2, MIN_EPSILON),
        KRR(10, MIN_EPSILON),
        OUE(10, MIN_EPSILON),
        OLH(10, MIN_EPSILON),
        KRR(10, MAX_EPSILON),
        OUE(10, MAX_EPSILON),
        OLH(10, MAX_EPSILON),
    ],
    ids=repr,
)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("simultaneous", [False, True])
def test_extreme_epsilon(mechanism: Mechanism, method: str, simultaneous: bool) -> None:
    k, n = mechanism.k, 500
    f = np.r_[0.6, np.full(k - 1, 0.4 / (k - 1))]
    if mechanism.epsilon == MIN_EPSILON:
        # Expected counts: the support rates sit within 6e-4 of each other, far inside any
        # interval, so nothing can be learned and every interval must be all of [0, 1].
        lam = mechanism.q_star + (mechanism.p_star - mechanism.q_star) * f
        counts = np.rint(n * lam).astype(int)
        if isinstance(mechanism, KRR):
            counts[0] += n - counts.sum()
    else:
        rng = SeededRandomness(7)
        values = np.random.default_rng(3).choice(k, size=n, p=f)
        payloads = [mechanism.randomize(int(x), rng) for x in values]
        counts = support_matrix(mechanism, payloads).sum(axis=0)
    result = estimate(
        mechanism, _cats(k), PeriodCounts("d", n, counts), method=method, simultaneous=simultaneous
    )
    _finite(result)
    widths = [r.ci_high - r.ci_low for r in result.estimates]
    if mechanism.epsilon == MIN_EPSILON:
        assert min(widths) == 1.0
    else:
        # no randomization noise left, only sampling (and oue's p* = 1/2): within 2 Wald margins
        margin = margin_of_error(k, mechanism.epsilon, n, 0.95, mechanism, simultaneous)
        assert max(widths) < 2 * margin < 0.5


def _report_table(mechanism: Mechanism, payloads: list) -> pl.DataFrame:
    """Raw reports as ``deniable export`` lays them out, in two periods."""
    periods = ["2026-01-01", "2026-01-02"] * (len(payloads) // 2)
    if isinstance(mechanism, OLH):
        columns = {key: [p[key] for p in payloads] for key in ("a", "b", "y")}
        return pl.DataFrame({"period": periods, **columns})
    return pl.DataFrame({"period": periods, "payload": payloads})


@pytest.mark.parametrize("name", ["brr", "krr", "oue", "olh"])
@pytest.mark.parametrize("epsilon", [MIN_EPSILON, MAX_EPSILON])
def test_the_epsilon_bounds_work_end_to_end(name: str, epsilon: float) -> None:
    """Real randomized reports at either bound: every method and pooling, counts or raw reports.

    (mle from raw oue/olh reports runs the exact likelihood's EM, which at eps = 1e-3 takes its
    full iteration budget, so it runs under one pooling only.)
    """
    k = 2 if name == "brr" else 6
    mechanism = make_mechanism(name, k, epsilon)
    rng = SeededRandomness(11)
    values = np.random.default_rng(5).choice(k, size=400)
    payloads = [mechanism.randomize(int(x), rng) for x in values]
    table = _report_table(mechanism, payloads)
    counts = [
        PeriodCounts(day, 200, support_matrix(mechanism, payloads[i::2]).sum(axis=0))
        for i, day in enumerate(("2026-01-01", "2026-01-02"))
    ]
    for method in METHODS:
        for pooling in ("overlap-safe", "independent"):
            options = {"method": method, "pooling": pooling, "simultaneous": True}
            from_counts = estimate(mechanism, _cats(k), counts, **options)
            _finite(from_counts)
            assert from_counts.n == 400
            if method != "mle":
                assert estimate_reports(mechanism, _cats(k), table, **options) == from_counts
            elif pooling == "overlap-safe":
                _finite(estimate_reports(mechanism, _cats(k), table, **options))


def test_every_report_in_one_category() -> None:
    m = KRR(3, 1.0)
    for method in METHODS:
        result = estimate(m, _cats(3), PeriodCounts("d", 300, [300, 0, 0]), method=method)
        _finite(result)
        assert result.estimates[0].ci_high == 1.0


@pytest.mark.parametrize("mechanism", ["brr", "krr", "oue", "olh", None])
def test_planning_inverts_the_margin(mechanism: str | None) -> None:
    k = 2 if mechanism == "brr" else 12
    n = reports_needed(k, 1.0, 0.01, 0.95, mechanism, simultaneous=False)
    assert margin_of_error(k, 1.0, n, 0.95, mechanism, simultaneous=False) <= 0.01
    assert margin_of_error(k, 1.0, n - 1, 0.95, mechanism, simultaneous=False) > 0.01
    assert reports_needed(k, 1.0, 0.01, 0.95, mechanism) > n  # all k at once, the default


@pytest.mark.parametrize("margin", [3e-7, 1e-5, 0.3])
@pytest.mark.parametrize("epsilon", [MIN_EPSILON, 1.0, MAX_EPSILON])
def test_planning_is_exact_up_to_the_largest_answer(epsilon: float, margin: float) -> None:
    try:
        n = reports_needed(3, epsilon, margin)
    except TooManyReports:
        assert margin_of_error(3, epsilon, MAX_REPORTS) > margin
        return
    assert n <= MAX_REPORTS
    assert margin_of_error(3, epsilon, n) <= margin
    assert n == 1 or margin_of_error(3, epsilon, n - 1) > margin


def test_planning_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="margin"):
        reports_needed(4, 1.0, 0)
    with pytest.raises(ValueError, match="margin must be strictly between 0 and 1"):
        reports_needed(4, 1.0, 1.0)
    with pytest.raises(TooManyReports, match="needs more than 1e\\+15 reports"):
        reports_needed(3, 1.0, 1e-300)
    with pytest.raises(TooManyReports):
        reports_needed(3, 1.0, 5e-324)
    with pytest.raises(ValueError, match="epsilon must be at least"):
        reports_needed(3, 1e-320, 0.01)
    with pytest.raises(ValueError, match="at most 1e\\+15"):
        margin_of_error(4, 1.0, MAX_REPORTS + 1)
    with pytest.raises(ValueError, match="confidence"):
        margin_of_error(4, 1.0, 100, confidence=1.5)
    with pytest.raises(ValueError, match="n must"):
        margin_of_error(4, 1.0, 0)


@pytest.mark.parametrize(
    "mechanism", [BRR(2, 1.0), KRR(3, 1.0), OUE(5, 1.0), OLH(6, 1.0)], ids=repr
)
@pytest.mark.parametrize("dtype", [pl.String, pl.Int64, pl.Null])
@pytest.mark.parametrize("method", METHODS)
def test_a_table_without_rows_is_the_explicit_no_data_answer(
    mechanism: Mechanism, dtype: pl.DataType, method: str, tmp_path
) -> None:
    """Whatever its column types (a header-only CSV reads as strings), as a frame or a file."""
    payload = ("a", "b", "y") if isinstance(mechanism, OLH) else ("payload",)
    empty = pl.DataFrame(schema={"period": pl.String, **dict.fromkeys(payload, dtype)})
    path = tmp_path / "empty.parquet"
    empty.write_parquet(path)
    cats = _cats(mechanism.k)
    expected = estimate(mechanism, cats, [], method=method, simultaneous=True)
    for table in (empty, path):
        result = estimate_reports(mechanism, cats, table, method=method, simultaneous=True)
        assert result == expected
        assert result.n == 0 and all(row.frequency is None for row in result.estimates)
        _finite(result)


@pytest.mark.parametrize("pooling", ["overlap-safe", "independent"])
def test_exact_intervals_stay_finite_beyond_two_to_the_53(pooling: str) -> None:
    """Clopper-Pearson pairs (C, n) above 2^53 when combined: one period of 3e8 reports, or
    30 days of 1e7 pooled as independent, with a handful of reports on one side."""
    m = KRR(2, 10.0)
    n = 300_000_000
    one = [PeriodCounts("2026-01-01", n, [n - 3, 3])]
    days = [
        PeriodCounts(f"2026-01-{d:02d}", 10_000_000, [10_000_000 - d % 2, d % 2])
        for d in range(1, 31)
    ]
    for data in (one, days):
        for method in METHODS:
            result = estimate(m, _cats(2), data, method=method, pooling=pooling)
            _finite(result)
            assert result.estimates[0].ci_low > 0.99999
            assert result.estimates[1].ci_high < 1e-5
