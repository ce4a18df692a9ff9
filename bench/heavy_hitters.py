"""Heavy hitters of a text metric: detection floor, false discoveries, interval coverage, speed.

Runs the issue's simulations (n = 1e6, 8-byte strings, eps 4 and 1, 400 runs each by default):
a string planted at T95 and one at tau among ~92% unique noise, decoded by the real decoder
(`deniable.estimators.heavyhitters.discover`) from counts drawn exactly. Prints hits at T95 (pass
>= 367/400), hits at tau (<= 200), runs returning a never-sent string (<= 33), the coverage of
the returned strings' intervals (>= 0.94), and the decode time.

Why drawing the counts is the same distribution as running every device's ``record()``: a
report's bits are independent given its (level, row, cell), the true cell's bit is 1 with
probability p and every other with q; so the count of cell c of (level, row) is
Bin(#reports there whose prefix hashes to c, p) + Bin(#other reports there, q), independently
over cells. Devices are pinned to a uniform level (the SDK's HMAC of its secret) and draw a
uniform row per report: a multinomial split of the devices, drawn here device by device.

Strings planted at 0.9 T95 and 1.1 T95 bracket the simulated floor: the formula's T95 is within
10% of the simulated one when the first is found in at most 95% of runs and the second in at
least 95% (up to the binomial noise of 400 runs, +-2.2 points).

    python -m bench.heavy_hitters --runs 400 --n 1000000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from deniable.client.mechanisms import OLH_PRIME, PrefixSketch
from deniable.client.mechanisms import _text_hash_coefficients as hash_coefficients
from deniable.estimators.heavyhitters import discover, floor


def simulate_counts(
    sketch: PrefixSketch, strings: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The counts a batch of devices holding ``strings`` ((n, L) uint8, padded) would produce."""
    n, length = strings.shape
    a, b = (np.asarray(x, dtype=np.int64) for x in hash_coefficients())
    levels = rng.integers(1, sketch.levels + 1, size=n)
    rows = rng.integers(0, sketch.rows, size=n)
    keep = np.arange(length)[None, :] < np.minimum(levels * 1, length)[:, None]
    total = (strings.astype(np.int64) * a[rows, :length] * keep).sum(axis=1) + b[rows]
    cells = (total % OLH_PRIME) % sketch.cells
    flat = ((levels - 1) * sketch.rows + rows) * sketch.cells + cells
    size = sketch.levels * sketch.rows * sketch.cells
    true = np.bincount(flat, minlength=size)
    tallies = np.bincount((levels - 1) * sketch.rows + rows, minlength=sketch.levels * sketch.rows)
    per_cell = np.repeat(tallies, sketch.cells)
    counts = rng.binomial(true, sketch.p) + rng.binomial(per_cell - true, sketch.q)
    return np.concatenate([counts, tallies]).astype(np.int64)


def population(
    n: int, length: int, planted: dict[bytes, float], rng: np.random.Generator
) -> np.ndarray:
    """n padded strings: each planted string at its share, the rest random full-length noise
    (8 random bytes in 1..255: practically unique, and the planted ones are shorter)."""
    out = rng.integers(1, 256, size=(n, length), dtype=np.uint8)
    start = 0
    for value, share in planted.items():
        count = round(n * share)
        out[start : start + count] = np.frombuffer(value.ljust(length, b"\0"), dtype=np.uint8)
        start += count
    return out


def run(epsilon: float, n: int, runs: int, seed: int) -> dict[str, float]:
    """The issue's floor simulation at one eps."""
    sketch = PrefixSketch(8, epsilon)
    stated = floor(sketch, n)
    # distinct first bytes: planted strings sharing a prefix would add up at the early levels
    at_floor, at_tau, below, above = b"F-floor", b"T-tau", b"L-low", b"H-high"
    planted = {
        at_floor: stated.t95,
        at_tau: stated.tau,
        below: 0.9 * stated.t95,
        above: 1.1 * stated.t95,
        b"common": 0.05,
    }
    rng = np.random.default_rng(seed)
    hits = tau_hits = invented = covered = returned = bound = low_hits = high_hits = 0
    seconds = 0.0
    for _ in range(runs):
        strings = population(n, 8, planted, rng)
        counts = simulate_counts(sketch, strings, rng)
        began = time.perf_counter()
        found = discover(sketch, counts)
        seconds += time.perf_counter() - began
        values = {h.value.encode(): h for h in found.hitters}
        hits += at_floor in values
        tau_hits += at_tau in values
        low_hits += below in values
        high_hits += above in values
        invented += any(v not in planted for v in values)
        bound += found.cap_bound
        for value, hitter in values.items():
            if value in planted:
                returned += 1
                true = round(n * planted[value]) / n
                covered += hitter.ci_low <= true <= hitter.ci_high
    return {
        "eps": epsilon,
        "T95 %": 100 * stated.t95,
        "tau %": 100 * stated.tau,
        "found at T95": hits,
        "found at tau": tau_hits,
        "at 0.9 T95": low_hits,
        "at 1.1 T95": high_hits,
        "runs inventing": invented,
        "coverage": covered / max(1, returned),
        "cap bound": bound,
        "decode s": seconds / runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20261126)
    args = parser.parse_args()
    print(f"n = {args.n:,}, 8-byte strings, {args.runs} runs per eps")
    header = None
    for epsilon in (4.0, 1.0):
        row = run(epsilon, args.n, args.runs, args.seed)
        if header is None:
            header = list(row)
            print(" | ".join(f"{h:>14}" for h in header))
        print(
            " | ".join(f"{v:>14.4g}" if isinstance(v, float) else f"{v:>14}" for v in row.values()),
            flush=True,
        )


if __name__ == "__main__":
    main()
