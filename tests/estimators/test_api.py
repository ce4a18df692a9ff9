"""The public shape of deniable.estimators: names, validation messages, the no-data answer."""

import base64

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import BRR, KRR, OLH, OLH_PRIME, OUE
from deniable.client.randomness import SeededRandomness
from deniable.estimators import (
    Estimate,
    PeriodCounts,
    estimate,
    estimate_reports,
    report_counts,
    support_matrix,
)
from deniable.estimators.support import oue_bits

MECHANISMS = [BRR(2, 1.0), KRR(5, 1.0), OUE(10, 1.0), OUE(20, 1.0), OLH(10, 1.0)]


def _cats(k: int) -> list[str]:
    return [f"c{i}" for i in range(k)]


def test_to_dict_has_the_documented_keys() -> None:
    result = estimate(KRR(3, 1.0), _cats(3), PeriodCounts("2026-11-21", 10, [5, 3, 2]))
    doc = result.to_dict()
    assert set(doc) == {
        "mechanism",
        "epsilon",
        "n",
        "periods",
        "confidence",
        "method",
        "pooling",
        "simultaneous",
        "estimates",
        "margin",
        "below_margin",
        "margin_exceeds_most_shares",
    }
    assert set(doc["estimates"][0]) == {
        "category",
        "frequency",
        "std_error",
        "ci_low",
        "ci_high",
        "count",
        "unbiased",
        "clipped",
    }
    assert doc["n"] == 10 and doc["periods"] == 1 and doc["pooling"] == "overlap-safe"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0}, "confidence"),
        ({"method": "bayes"}, "unknown method"),
        ({"pooling": "magic"}, "unknown pooling"),
    ],
)
def test_bad_options_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        estimate(KRR(3, 1.0), _cats(3), PeriodCounts("p", 10, [5, 3, 2]), **kwargs)


@pytest.mark.parametrize(
    ("counts", "n", "message"),
    [
        ([5, 5], 10, "expected 3 counts"),
        ([5, -1, 6], 10, "non-negative"),
        ([11, 0, 0], 10, "exceeds"),
        ([5, 3, 1], 10, "sum to n"),
    ],
)
def test_bad_counts_are_refused(counts: list[int], n: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        estimate(KRR(3, 1.0), _cats(3), PeriodCounts("p", n, counts))


def test_duplicate_periods_are_refused() -> None:
    p = PeriodCounts("2026-11-21", 10, [5, 3, 2])
    with pytest.raises(ValueError, match="more than once"):
        estimate(KRR(3, 1.0), _cats(3), [p, p])


@pytest.mark.parametrize("method", ["unbiased", "consistent", "mle"])
def test_no_data_is_an_explicit_answer(method: str) -> None:
    empty = [PeriodCounts("a", 0, [0] * 10), PeriodCounts("b", 0, [0] * 10)]
    result = estimate(OUE(10, 1.0), _cats(10), empty, method=method)
    assert result.n == 0 and result.periods == 0
    for row in result.estimates:
        assert (row.frequency, row.std_error, row.count) == (None, None, None)
        assert (row.ci_low, row.ci_high) == (0.0, 1.0)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.name)
def test_support_matrix_agrees_with_the_client(mechanism) -> None:
    rng = SeededRandomness(11)
    payloads = [mechanism.randomize(i % mechanism.k, rng) for i in range(400)]
    matrix = support_matrix(mechanism, payloads)
    expected = np.array(
        [[v in mechanism.supported(p) for v in range(mechanism.k)] for p in payloads]
    )
    assert matrix.dtype == bool and (matrix == expected).all()


def _one_by_one(payloads: list[str], k: int) -> list[list[bool]] | None:
    """Each payload decoded on its own by ``base64`` (strict); None if one is refused."""
    n_bytes = (k + 7) // 8
    rows = []
    for payload in payloads:
        try:
            raw = base64.b64decode(payload, validate=True)
        except ValueError:
            return None
        if len(raw) != n_bytes:
            return None
        rows.append([bool(raw[v // 8] >> (v % 8) & 1) for v in range(k)])
    return rows


@st.composite
def _oue_texts(draw) -> tuple[list[str], int]:
    """A few equal-length base64 texts of k bits, one of them possibly with a character changed."""
    k = draw(st.integers(1, 40))
    m = draw(st.integers(1, 4))
    n_bytes = (k + 7) // 8
    payloads = [
        base64.b64encode(draw(st.binary(min_size=n_bytes, max_size=n_bytes))).decode()
        for _ in range(m)
    ]
    if draw(st.booleans()):
        i = draw(st.integers(0, m - 1))
        j = draw(st.integers(0, len(payloads[i]) - 1))
        char = draw(st.sampled_from("A/+=-_ \n\u00e9"))
        payloads[i] = payloads[i][:j] + char + payloads[i][j + 1 :]
    return payloads, k


@settings(max_examples=400, deadline=None)
@given(case=_oue_texts())
def test_oue_bits_decodes_like_base64_one_payload_at_a_time(case) -> None:
    """The batch decoder (one ``binascii`` call for all payloads) agrees with ``base64``."""
    payloads, k = case
    expected = _one_by_one(payloads, k)
    joined = "".join(payloads).encode()
    if len(joined) % len(payloads) or not joined.isascii():
        assert expected is None
        return
    encoded = np.frombuffer(joined, dtype=np.uint8).reshape(len(payloads), -1)
    if expected is None:
        with pytest.raises(InvalidInput):
            oue_bits(encoded, k)
    else:
        assert oue_bits(encoded, k).tolist() == expected


def _table(mechanism, payloads: list, periods: list[str]) -> pl.DataFrame:
    rows: dict[str, list] = {
        "id": [str(i) for i in range(len(payloads))],
        "metric": ["m"] * len(payloads),
        "fingerprint": ["f"] * len(payloads),
        "period": periods,
    }
    if isinstance(mechanism, OLH):
        for key in ("a", "b", "y"):
            rows[key] = [p[key] for p in payloads]
    else:
        rows["payload"] = payloads
    return pl.DataFrame(rows)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.name)
def test_estimate_reports_matches_counts_from_the_client(mechanism, tmp_path) -> None:
    rng = SeededRandomness(5)
    payloads = [mechanism.randomize(i % mechanism.k, rng) for i in range(900)]
    periods = [f"2026-11-0{1 + i % 3}" for i in range(900)]
    table = _table(mechanism, payloads, periods)
    expected = []
    for label in sorted(set(periods)):
        mine = [p for p, t in zip(payloads, periods, strict=True) if t == label]
        counts = [sum(v in mechanism.supported(p) for p in mine) for v in range(mechanism.k)]
        expected.append(PeriodCounts(label, len(mine), counts))
    assert report_counts(mechanism, table) == expected
    path = tmp_path / "reports.parquet"
    table.write_parquet(path)
    from_file = estimate_reports(mechanism, _cats(mechanism.k), path)
    assert from_file == estimate(mechanism, _cats(mechanism.k), expected)
    assert isinstance(from_file, Estimate) and from_file.periods == 3


def test_estimate_reports_refuses_out_of_range_payloads() -> None:
    table = _table(KRR(3, 1.0), [0, 1, 3], ["p", "p", "p"])
    with pytest.raises(ValueError, match="outside"):
        estimate_reports(KRR(3, 1.0), _cats(3), table)


def test_olh_support_at_the_edges_of_the_hash_range() -> None:
    m = OLH(40, 2.0)
    top = OLH_PRIME - 1
    payloads = [{"a": a, "b": b, "y": y} for a in (1, top) for b in (0, top) for y in range(m.g)]
    expected = np.array([[v in m.supported(p) for v in range(m.k)] for p in payloads])
    assert (support_matrix(m, payloads) == expected).all()


def test_an_empty_table_is_no_data() -> None:
    empty = _table(KRR(3, 1.0), [], []).cast({"payload": pl.Int64, "period": pl.String})
    result = estimate_reports(KRR(3, 1.0), _cats(3), empty)
    assert result.n == 0 and all(r.frequency is None for r in result.estimates)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("CA==", "past k"),
        ("AAA=", "exactly 1 bytes"),
        ("AAAA", "exactly 1 bytes"),
        ("A*==", "base64"),
        ("AAAAAA==", "base64 characters"),
    ],
)
def test_oue_table_with_bad_payloads_is_refused(payload: str, message: str) -> None:
    m = OUE(3, 1.0)
    table = _table(m, ["AQ==", payload], ["p", "p"])
    with pytest.raises(ValueError, match=message):
        estimate_reports(m, _cats(3), table)


def test_a_table_without_the_payload_columns_is_refused() -> None:
    table = pl.DataFrame({"period": ["p"], "payload": [1]})
    with pytest.raises(ValueError, match="lacks column"):
        estimate_reports(OLH(4, 1.0), _cats(4), table)


def test_a_parquet_file_without_the_payload_columns_is_refused(tmp_path) -> None:
    path = tmp_path / "reports.parquet"
    pl.DataFrame({"period": ["p"], "payload": [1]}).write_parquet(path)
    with pytest.raises(ValueError, match="lacks column"):
        estimate_reports(OLH(4, 1.0), _cats(4), path)
