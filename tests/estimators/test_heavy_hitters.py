"""The text metric's decoder (estimators/heavyhitters.py): its floor against STATS.md section 11's
reference figures, the oracle's variance at f = 0 against the formula, discovery of strings
planted above the floor with nothing invented, candidate mode, and a run where the survivor
cap binds saying so.

Counts are drawn exactly (``bench.heavy_hitters.simulate_counts``: each cell's count is
Bin(its devices, p) + Bin(the rest of its (level, row), q), the same distribution as every
device's report summed). Seeds are fixed: deterministic.
"""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest

from bench.heavy_hitters import population, simulate_counts
from deniable.client import MetricSpec
from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import PrefixSketch
from deniable.estimators.heavyhitters import (
    SURVIVOR_CAP,
    SketchCounts,
    discover,
    floor,
    hypotheses,
    reports_for_floor,
    score_candidates,
    score_level,
    text_document,
)

Z_SUITE = 3.89
"""Two-sided z at 1e-4 (STATS.md section 8)."""


@pytest.mark.parametrize(
    ("max_length", "epsilon", "n", "reference"),
    [
        (8, 4.0, 10**6, 0.0059),
        (8, 1.0, 10**6, 0.0405),
        (8, 4.0, 10**5, 0.019),
        (8, 4.0, 10**4, 0.065),
        (64, 4.0, 10**6, 0.0196),
        (64, 4.0, 10**5, 0.068),
        (8, 1.0, 10**7, 0.013),
    ],
)
def test_the_floor_agrees_with_the_reference_figures(
    max_length: int, epsilon: float, n: int, reference: float
) -> None:
    stated = floor(PrefixSketch(max_length, epsilon), n)
    assert abs(stated.t95 / reference - 1) < 0.10, stated
    assert stated.tau < stated.t95


def test_the_floor_counts_every_hypothesis_and_shrinks_with_n() -> None:
    sketch = PrefixSketch(8, 4.0)
    assert hypotheses(sketch) == 256 + 256**2 + 6 * SURVIVOR_CAP * 256
    floors = [floor(sketch, n).t95 for n in (10**4, 10**5, 10**6)]
    assert floors == sorted(floors, reverse=True)
    needed = reports_for_floor(sketch, 0.01)
    assert needed is not None
    assert floor(sketch, needed).t95 <= 0.01 < floor(sketch, needed - 1).t95
    assert floor(sketch, 0).t95 == 1.0


def test_the_oracle_variance_at_share_zero_matches_the_formula() -> None:
    """2,000 seeded runs of 2,000 devices holding 2-byte strings over 20 letters; the decoder's
    estimate of a never-sent string has variance V*/n_l (n_l its level's reports) within
    z_{1e-4} x sqrt(2/(R-1)) (the sample variance on R - 1 df: 12.3%), and mean 0.

    With nothing heavy, the estimate reads only the string's own cell in each row and the
    level's tallies, so only those are drawn (exactly: Bin(devices there, p) + Bin(the rest of
    the row's reports, q)); the rest of the counts stay 0."""
    sketch = PrefixSketch(2, 1.0)
    rng = np.random.default_rng(26)
    letters = np.frombuffer(b"abcdefghijklmnopqrst", dtype=np.uint8)
    domain = np.array([[x, y] for x in letters for y in letters], dtype=np.uint8)
    never = np.frombuffer(b"zz", dtype=np.uint8)[None, :]
    empty = SketchCounts(sketch, np.zeros(sketch.cell_count, dtype=np.int64))
    hashed = empty.hashes(domain)
    target = empty.hashes(never)[0]
    runs, n, rows = 2000, 2000, sketch.rows
    held = rng.integers(0, len(domain), size=(runs, n))
    level_two = rng.integers(1, 3, size=(runs, n)) == 2
    row = rng.integers(0, rows, size=(runs, n))
    hits = level_two & (hashed[held, row] == target[row])
    offset = np.arange(runs)[:, None] * rows
    reports = np.bincount((offset + row)[level_two], minlength=runs * rows).reshape(runs, rows)
    at_cell = np.bincount((offset + row)[hits], minlength=runs * rows).reshape(runs, rows)
    cells = rng.binomial(at_cell, sketch.p) + rng.binomial(reports - at_cell, sketch.q)
    cell_index = [sketch.cell_index(2, r, int(target[r])) for r in range(rows)]
    tally_index = [sketch.tally_index(2, r) for r in range(rows)]
    estimates, variances = [], []
    for run in range(runs):
        counts = np.zeros(sketch.cell_count, dtype=np.int64)
        counts[cell_index] = cells[run]
        counts[tally_index] = reports[run]
        scored = score_level(SketchCounts(sketch, counts), 2, never, math.inf)
        estimates.append(float(scored.shares[0]))
        variances.append(sketch.v_star / scored.n)
    ratio = float(np.var(estimates, ddof=1)) / float(np.mean(variances))
    assert abs(ratio - 1) <= Z_SUITE * math.sqrt(2 / (runs - 1)), ratio
    mean = float(np.mean(estimates))
    assert abs(mean) <= Z_SUITE * math.sqrt(float(np.mean(variances)) / runs), mean


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_strings_above_the_floor_are_found_and_nothing_is_invented(seed: int) -> None:
    sketch = PrefixSketch(4, 4.0)
    n = 20_000
    stated = floor(sketch, n)
    planted = {b"dark": 2 * stated.t95, b"da": 1.3 * stated.t95, b"zoom": 0.15}
    rng = np.random.default_rng(seed)
    counts = simulate_counts(sketch, population(n, 4, planted, rng), rng)
    found = discover(sketch, counts)
    assert not found.cap_bound
    assert {h.value for h in found.hitters} == {"dark", "da", "zoom"}
    for hitter in found.hitters:
        true = round(n * planted[hitter.value.encode()]) / n
        assert hitter.ci_low <= true <= hitter.ci_high, hitter
        assert hitter.ci_low <= hitter.share <= hitter.ci_high
        assert hitter.truncated is (len(hitter.value) == 4)  # it fills max_length
    assert found.tested <= hypotheses(sketch)
    # the run's floor adds its (small, here) collision variance: only ever higher
    assert stated.t95 <= found.floor.t95 <= 1.1 * stated.t95


def test_candidate_mode_scores_listed_strings() -> None:
    sketch = PrefixSketch(8, 4.0)
    n = 20_000
    rng = np.random.default_rng(7)
    counts = simulate_counts(sketch, population(n, 8, {b"crash-a": 0.04}, rng), rng)
    rows, stated = score_candidates(sketch, counts, ["crash-a", "crash-b", "crash-a"])
    by_value = {row.value: row for row in rows}
    assert set(by_value) == {"crash-a", "crash-b"}
    assert by_value["crash-a"].detected and not by_value["crash-b"].detected
    assert by_value["crash-a"].ci_low <= 0.04 <= by_value["crash-a"].ci_high
    assert stated.hypotheses == 2
    with pytest.raises(InvalidInput, match="U\\+0000"):
        score_candidates(sketch, counts, ["a\x00"])
    with pytest.raises(InvalidInput, match="at least one"):
        score_candidates(sketch, counts, [])


def test_a_run_where_the_cap_binds_says_so() -> None:
    sketch = PrefixSketch(2, 4.0)
    n = 50_000
    many = {bytes([97 + i // 10, 97 + i % 10]): 0.012 for i in range(80)}
    rng = np.random.default_rng(3)
    counts = simulate_counts(sketch, population(n, 2, many, rng), rng)
    found = discover(sketch, counts)
    assert found.cap_bound
    assert len(found.hitters) == SURVIVOR_CAP
    document = text_document("t", "2026-11-21", sketch, counts)
    assert document["cap_bound"] is True and document["survivor_cap"] == SURVIVOR_CAP


def test_counts_of_the_wrong_size_are_refused() -> None:
    sketch = PrefixSketch(2, 4.0)
    with pytest.raises(InvalidInput, match="cells"):
        discover(sketch, np.zeros(10, dtype=np.int64))


def _text_audit(**fields: object) -> object:
    from deniable.estimators.audit import audit_spec

    spec = MetricSpec.text("search", max_length=4, epsilon=1.0)
    return audit_spec(spec, samples=1500, seed=26, **fields)  # type: ignore[arg-type]


def test_the_audit_passes_the_real_text_randomizer() -> None:
    result = _text_audit()
    assert result.verdict == "pass", result  # type: ignore[attr-defined]
    assert "cell of" in result.event  # type: ignore[attr-defined]


def test_the_audit_catches_a_text_randomizer_too_truthful(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its own cell's bit set with probability 0.8 instead of 1/2: eps ln(0.8(1-q)/(0.2q)) = 2.4."""
    real = PrefixSketch.randomize

    def truthful(self: PrefixSketch, padded: bytes, level: int, rng: object) -> dict:
        payload = real(self, padded, level, rng)  # type: ignore[arg-type]
        cell = self.cell(payload["r"], padded[: self.prefix_length(level)])
        bits = bytearray(base64.b64decode(payload["b"]))
        if rng.random() < 0.6:  # type: ignore[attr-defined]  # 1/2 + 1/2 x 0.6 = 0.8
            bits[cell >> 3] |= 1 << (cell & 7)
        payload["b"] = base64.b64encode(bytes(bits)).decode("ascii")
        return payload

    monkeypatch.setattr(PrefixSketch, "randomize", truthful)
    result = _text_audit()
    assert result.verdict == "fail", result  # type: ignore[attr-defined]


def test_collisions_below_the_cut_widen_it_so_nothing_is_invented() -> None:
    """An adversarial batch: ~500 two-byte strings each at 0.75 tau (so few survive and fewer
    are peeled) hold 90% of it, their collisions adding ~40% to a null's variance (eps 4,
    n = 6e5). With the cut at V*/n_l alone 8 of these 20 runs return a never-sent string (and
    one binds the cap); with the collision variance estimated from the counts, runs inventing
    one stay within the Bonferroni budget alpha = 0.05: at most 6 of 20
    (P(Bin(20, 0.05) >= 7) = 4e-5)."""
    sketch = PrefixSketch(2, 4.0)
    n, runs = 600_000, 20
    rng = np.random.default_rng(5)
    share = 0.75 * floor(sketch, n).tau
    values: set[bytes] = set()
    while len(values) < int(0.9 / share):
        values.add(bytes(rng.integers(33, 127, size=2, dtype=np.uint8)))
    planted = dict.fromkeys(values, share) | {b"zz": 0.05}
    inventing, bound, floors = 0, 0, []
    for _ in range(runs):
        found = discover(sketch, simulate_counts(sketch, population(n, 2, planted, rng), rng))
        inventing += any(h.value.encode() not in planted for h in found.hitters)
        bound += found.cap_bound
        floors.append(found.floor)
    assert inventing <= 6, inventing
    assert bound == 0
    # the run states the variance it used, and its floor with it
    assert all(f.collision_variance > 0.2 * sketch.v_star / (n / 2) for f in floors)
    assert all(f.t95 > floor(sketch, n).t95 for f in floors)
