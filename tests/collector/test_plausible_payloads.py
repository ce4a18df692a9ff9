"""The plausibility bound on bit-vector payloads (issue 38): no honestly randomized oue or text
payload is refused at any eps, every payload beyond the bound is, and the real ingestion
path refuses such a report with a 422 naming it and stores nothing of its batch."""

from __future__ import annotations

import base64
import datetime as dt
import tracemalloc
import uuid
from typing import Any

import httpx
import numpy as np
import pytest
from scipy import stats

from deniable.client import MetricSpec, SeededRandomness
from deniable.client.mechanisms import (
    OUE,
    PLAUSIBLE_TAIL,
    TEXT_MAX_LENGTH,
    BitVectorPayload,
    PrefixSketch,
    plausible_set_bits,
)
from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.queries import READ_CHUNK_ROWS, read_counts, register_spec
from deniable.collector.storage.tables import text_cell_counts
from testkit import TEST_NOW, DatabaseFactory, make_reports, post_reports, register, unique_name

EPSILONS = (1e-3, 0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 20.0)
"""The grid of eps the property runs over: the accepted range's ends and the usual values."""

MECHANISMS: tuple[tuple[str, Any], ...] = (
    ("oue k=3", lambda eps: OUE(3, eps)),
    ("oue k=100", lambda eps: OUE(100, eps)),
    ("oue k=10000", lambda eps: OUE(10_000, eps)),
    ("pem", lambda eps: PrefixSketch(TEXT_MAX_LENGTH, eps)),
)
DRAWS = 1_000_000
PERIOD = TEST_NOW.date().isoformat()


def _law_cdf(cells: int, p: float, q: float, s: int) -> float:
    """P(S <= s) for S = Bernoulli(p) + Binomial(cells - 1, q), by scipy (an independent
    computation of the law the bound is taken from)."""
    other = stats.binom(cells - 1, q)
    return float((1 - p) * other.cdf(s) + p * other.cdf(s - 1))


def _law_sf(cells: int, p: float, q: float, s: int) -> float:
    """P(S > s), by scipy's survival function (accurate far in the upper tail)."""
    other = stats.binom(cells - 1, q)
    return float((1 - p) * other.sf(s) + p * other.sf(s - 1))


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("cells", [3, 100, 1024, 10_000])
def test_the_bound_is_the_tightest_with_each_tail_within_the_stated_probability(
    cells: int, eps: float
) -> None:
    q = 1 / (np.exp(eps) + 1)
    low, high = plausible_set_bits(cells, 0.5, q)
    assert 0 <= low <= high <= cells
    slack = 1 + 1e-6
    if low > 0:
        assert _law_cdf(cells, 0.5, q, low - 1) <= PLAUSIBLE_TAIL * slack
    assert _law_cdf(cells, 0.5, q, low) > PLAUSIBLE_TAIL / slack
    if high < cells:
        assert _law_sf(cells, 0.5, q, high) <= PLAUSIBLE_TAIL * slack
    assert _law_sf(cells, 0.5, q, high - 1) > PLAUSIBLE_TAIL / slack


@pytest.mark.parametrize(("label", "build"), MECHANISMS, ids=[m[0] for m in MECHANISMS])
def test_no_honest_set_bit_count_is_refused_at_any_eps(label: str, build: Any) -> None:
    """10^6 seeded draws of an honest report's set-bit count per eps (the law of the
    randomizers: own bit with p, each other with q), every one inside the bound."""
    rng = np.random.default_rng(38)
    for eps in EPSILONS:
        mechanism: BitVectorPayload = build(eps)
        cells = mechanism.vector_cells
        counts = rng.binomial(cells - 1, mechanism.q, DRAWS) + (rng.random(DRAWS) < mechanism.p)
        low, high = mechanism.plausible_set_bits
        assert low <= counts.min() and counts.max() <= high, (label, eps, low, high)


def _vector(cells: int, bits: int) -> bytes:
    """A vector of ``cells`` bits whose first ``bits`` are set."""
    return ((1 << bits) - 1).to_bytes((cells + 7) // 8, "little")


def _payload(mechanism: BitVectorPayload, vector: bytes) -> Any:
    text = base64.b64encode(vector).decode("ascii")
    return {"b": text, "l": 1, "r": 0} if isinstance(mechanism, PrefixSketch) else text


@pytest.mark.parametrize(("label", "build"), MECHANISMS, ids=[m[0] for m in MECHANISMS])
def test_payloads_beyond_the_bound_are_refused_and_its_ends_are_not(label: str, build: Any) -> None:
    for eps in EPSILONS:
        mechanism: BitVectorPayload = build(eps)
        cells = mechanism.vector_cells
        low, high = mechanism.plausible_set_bits
        for bits in (low, high):
            assert mechanism.implausible(_payload(mechanism, _vector(cells, bits))) is None
        all_ones = mechanism.implausible(_payload(mechanism, _vector(cells, cells)))
        all_zeros = mechanism.implausible(_payload(mechanism, _vector(cells, 0)))
        assert (all_ones is not None) == (cells > high), (label, eps)
        assert (all_zeros is not None) == (low > 0), (label, eps)
        if high < cells:
            reason = mechanism.implausible(_payload(mechanism, _vector(cells, high + 1)))
            assert reason is not None and f"sets {high + 1} of {cells} bits" in reason
        if low > 0:
            assert mechanism.implausible(_payload(mechanism, _vector(cells, low - 1))) is not None


@pytest.mark.parametrize("eps", [0.5, 4.0, 12.0])
def test_the_real_randomizers_payloads_are_plausible(eps: float) -> None:
    """Payloads from the SDK's own randomizers (seeded), not only draws of their law."""
    rng = SeededRandomness(11)
    sketch, oue = PrefixSketch(8, eps), OUE(500, eps)
    padded = sketch.encode("query")
    for i in range(300):
        assert sketch.implausible(sketch.randomize(padded, 1 + i % sketch.levels, rng)) is None
        assert oue.implausible(oue.randomize(i % 500, rng)) is None


def _text_report(spec: MetricSpec, payload: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "metric": spec.name,
        "fingerprint": spec.fingerprint,
        "period": PERIOD,
        "payload": payload,
    }


def test_ingestion_refuses_implausible_payloads_naming_them_and_stores_nothing(
    uploader: httpx.Client, admin: httpx.Client
) -> None:
    text = register(admin, MetricSpec.text(unique_name("poison"), max_length=64, epsilon=4.0))
    oue = register(
        admin,
        MetricSpec.categorical(
            unique_name("poison"), [f"c{i}" for i in range(1000)], epsilon=1.0, mechanism="oue"
        ),
    )
    sketch, rng = text.text_randomizer, SeededRandomness(5)
    honest = [
        _text_report(text, sketch.randomize(sketch.encode("cat"), 1 + i, rng)) for i in range(4)
    ]
    honest += make_reports(oue, [1, 2, 3], PERIOD, seed=6)
    ones = {"b": base64.b64encode(b"\xff" * 128).decode(), "l": 64, "r": 15}
    batch = [
        *honest[:2],
        _text_report(text, ones),
        *honest[2:5],
        dict(honest[5], payload=base64.b64encode(bytes(125)).decode()),
        honest[6],
    ]
    response = post_reports(uploader, batch)
    assert response.status_code == 422, response.text
    reasons = {item["index"]: item["reason"] for item in response.json()["detail"]}
    assert sorted(reasons) == [2, 6]
    assert text.name in reasons[2] and "sets 1024 of 1024 bits" in reasons[2]
    assert oue.name in reasons[6] and "sets 0 of 1000 bits" in reasons[6]
    for spec in (text, oue):
        answer = admin.get(f"/v1/metrics/{spec.name}/estimate")
        assert answer.status_code == 200 and answer.json()["n"] == 0, answer.text
    assert post_reports(uploader, honest).json() == {"accepted": 7, "duplicates": 0}


def test_a_full_text_sketch_is_read_in_bounded_memory(databases: DatabaseFactory) -> None:
    """Every count of a text metric's sketch nonzero (what many honest reports, or poisoned
    ones before the bound, leave): ``read_counts`` returns them all, exactly, holding at most
    a chunk of packed rows beside the counts (as one list of a row per count it held 400 MB
    here; as one list of its 1,024 packed rows, about twice the counts' 8 MB)."""
    url = databases.new("sqlite")
    migrate(url)
    database = open_database(url)
    spec = MetricSpec.text("full_sketch", max_length=64, epsilon=4.0)
    register_spec(database, spec, dt.datetime.now(dt.UTC))
    sketch = spec.text_randomizer
    width = sketch.cell_count
    expected = np.arange(1, width + 1, dtype=np.int64)
    chunks = sketch.levels * sketch.rows
    tallies = expected[chunks * sketch.cells :]
    rows = [
        {
            "metric": spec.name,
            "period": PERIOD,
            "cell": "",
            "chunk": chunk,
            "counts": np.append(
                expected[chunk * sketch.cells : (chunk + 1) * sketch.cells], tallies[chunk]
            ),
        }
        for chunk in range(chunks)
    ]
    with database.writing() as connection:
        connection.execute(text_cell_counts.insert(), rows)
    del rows
    tracemalloc.start()
    try:
        n, counts = read_counts(database, spec, [PERIOD])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        database.dispose()
    assert n.tolist() == [int(tallies.sum())] and np.array_equal(counts[0], expected)
    assert peak <= counts.nbytes + 40_000 * READ_CHUNK_ROWS, (peak, counts.nbytes)
