"""Anchor: pure-ldp 1.2.0's PEM beside deniable's text decoder on the same strings, timed.

pure-ldp is NOT a dependency of deniable. It needs numpy < 2 (its CMS server calls
``np.zeros(None)``) and xxhash < 2 (it hashes ``str``, which xxhash 2 refuses), and imports
scikit-learn and statsmodels without declaring them, so it runs
in its own throwaway venv, in a child process this script starts (the strings go over in a
.npy file, the results come back as JSON):

    python3 -m venv /tmp/pureldp-venv
    /tmp/pureldp-venv/bin/pip install pure-ldp==1.2.0 "numpy<2" "xxhash<2" "scipy<1.14" "scikit-learn<1.6" "statsmodels<0.15"
    PURE_LDP_PYTHON=/tmp/pureldp-venv/bin/python python -m bench.pem_anchor --n 100000

Both sides see the same population: strings of L bytes (L = 2, 3, 8), a few planted at multiples
of deniable's stated floor T95 and the rest random bytes in 1..255 (practically unique).
Both run 1-byte prefix steps (L levels, a device pinned to a uniform level).

- deniable: every report through the real randomizer (``PrefixSketch.randomize``, seeded),
  summed into counts by ``supported`` (the collector's ingestion sum), decoded by ``discover``.
- pure-ldp: ``PEMClient.privatise`` / ``PEMServer.aggregate`` / ``find_heavy_hitters`` on the
  strings as bit strings (its default binary alphabet, fragments of 8 bits), with its Apple
  CMS oracle at deniable's sketch size (k = R = 16 hash rows, m = 1024 cells), in threshold
  mode at deniable's cut tau and in top-k mode at k = the number planted. Its default oracle,
  OLH, aggregates a report by hashing every value of the level's domain in Python (2^16
  xxhash calls per report at the 2nd byte) into a dense array over that domain (2^64 floats
  at the 8th): the script times two such reports at L <= 3 and states the projected
  aggregation time instead of running it. With the CMS oracle the server keeps k x m sums,
  so pure-ldp runs the issue's 8-byte configuration.

Known pure-ldp bug that shows here (STATS.md section 11): in threshold mode the candidates of
level 3 onwards are built from a ``filter`` iterator that the first extension fragment
exhausts, so at L = 3 only strings whose last byte is 0x00 can survive; planted strings are
lost. Top-k mode builds from a list and does not lose them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PYTHON = os.environ.get("PURE_LDP_PYTHON", "/tmp/pureldp-venv/bin/python")
INSTALL = (
    'python3 -m venv /tmp/pureldp-venv && /tmp/pureldp-venv/bin/pip install pure-ldp==1.2.0 "numpy<2"'
    ' "xxhash<2" "scipy<1.14" "scikit-learn<1.6" "statsmodels<0.15" (or set PURE_LDP_PYTHON)'
)
PLANTED_T95 = (3.0, 2.0, 1.5, 1.2)
"""Planted strings' shares as multiples of deniable's stated T95 (all above both floors)."""


def check_pure_ldp() -> None:
    """Exit with one line saying how to install pure-ldp if its interpreter cannot import it."""
    try:
        done = subprocess.run(
            [PYTHON, "-c", "import pure_ldp.heavy_hitters.prefix_extending"],
            capture_output=True,
            timeout=120,
        )
    except OSError:
        sys.exit(f"pure-ldp's interpreter {PYTHON} does not exist: {INSTALL}")
    if done.returncode:
        sys.exit(f"pure-ldp is not importable by {PYTHON}: {INSTALL}")


def population(n: int, length: int, epsilon: float, rng: np.random.Generator) -> tuple:
    """n strings of ``length`` bytes ((n, length) uint8): planted ones at multiples of T95,
    the rest random bytes in 1..255; and the planted set."""
    from deniable.client.mechanisms import PrefixSketch
    from deniable.estimators.heavyhitters import floor

    t95 = floor(PrefixSketch(length, epsilon), n).t95
    out = rng.integers(1, 256, size=(n, length), dtype=np.uint8)
    planted = set()
    start = 0
    for i, multiple in enumerate(PLANTED_T95):
        value = bytes(ord("a") + (i * length + j) % 26 for j in range(length))
        count = round(n * min(multiple * t95, 0.2))
        out[start : start + count] = np.frombuffer(value, dtype=np.uint8)
        planted.add(value)
        start += count
    return out[rng.permutation(n)], planted


def run_deniable(strings: np.ndarray, epsilon: float, seed: int) -> tuple:
    """Encode every string through the real randomizer, sum the reports into counts (the
    collector's ingestion sum), decode: (encode s, sum s, decode s, returned strings)."""
    from deniable.client import SeededRandomness
    from deniable.client.mechanisms import PrefixSketch
    from deniable.estimators.heavyhitters import discover

    n, length = strings.shape
    sketch = PrefixSketch(length, epsilon)
    randomness = SeededRandomness(seed)
    levels = np.random.default_rng(seed).integers(1, sketch.levels + 1, size=n)
    began = time.perf_counter()
    reports = [
        sketch.randomize(row.tobytes(), int(level), randomness)
        for row, level in zip(strings, levels, strict=True)
    ]
    encode = time.perf_counter() - began
    began = time.perf_counter()
    flat = np.fromiter((i for report in reports for i in sketch.supported(report)), dtype=np.int64)
    counts = np.bincount(flat, minlength=sketch.cell_count).astype(np.int64)
    summed = time.perf_counter() - began
    began = time.perf_counter()
    found = discover(sketch, counts)
    decode = time.perf_counter() - began
    return encode, summed, decode, {h.value.encode() for h in found.hitters}


def run_pure_ldp(strings: np.ndarray, epsilon: float, seed: int, k: int, olh: bool) -> dict:
    """pure-ldp's side in its own interpreter: the worker's JSON (times and strings as hex)."""
    from deniable.client.mechanisms import PrefixSketch
    from deniable.estimators.heavyhitters import floor

    sketch = PrefixSketch(strings.shape[1], epsilon)
    tau = floor(sketch, len(strings)).tau
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "strings.npy"
        np.save(path, strings)
        settings = {"epsilon": epsilon, "seed": seed, "k": k, "threshold": tau, "olh": olh}
        settings |= {"rows": sketch.rows, "cells": sketch.cells}
        done = subprocess.run(
            [PYTHON, __file__, "--worker", str(path), json.dumps(settings)],
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout)


def worker(path: str, settings: dict) -> dict:
    """Run under pure-ldp's interpreter: PEM with its CMS oracle through its own client and
    server, in threshold mode and in top-k mode; the default OLH oracle timed on 2 reports
    (``settings["olh"]``)."""
    import pure_ldp.frequency_oracles.apple_cms as cms
    import pure_ldp.frequency_oracles.local_hashing as lh
    import pure_ldp.heavy_hitters.prefix_extending as pem

    strings = np.load(path)
    length = strings.shape[1]
    epsilon = settings["epsilon"]
    random.seed(settings["seed"])
    np.random.seed(settings["seed"] % 2**32)
    bits = [format(int.from_bytes(row.tobytes(), "big"), f"0{8 * length}b") for row in strings]
    oracle = cms.CMSServer(epsilon, settings["rows"], settings["cells"])
    client_oracle = cms.CMSClient(epsilon, oracle.get_hash_funcs(), settings["cells"])
    shape = {"start_length": 0, "max_string_length": 8 * length, "fragment_length": 8}
    client = pem.PEMClient(epsilon, fo_client=client_oracle, **shape)
    server = pem.PEMServer(epsilon, fo_server=oracle, **shape)
    began = time.perf_counter()
    reports = [client.privatise(value) for value in bits]
    encode = time.perf_counter() - began
    began = time.perf_counter()
    for report in reports:
        server.aggregate(report)
    summed = time.perf_counter() - began
    began = time.perf_counter()
    hitters, _ = server.find_heavy_hitters(threshold=settings["threshold"])
    decode = time.perf_counter() - began
    began = time.perf_counter()
    top, _ = server.find_heavy_hitters(k=settings["k"])
    top_decode = time.perf_counter() - began

    def as_hex(found: tuple) -> list[str]:
        return [int(b, 2).to_bytes(length, "big").hex() for b in found]

    result = {
        "encode": encode,
        "sum": summed,
        "decode": decode,
        "threshold": as_hex(hitters),
        "top_decode": top_decode,
        "top": as_hex(top),
    }
    if settings["olh"]:
        d = 2 ** (8 * length)
        olh_client = lh.LHClient(epsilon, d, use_olh=True, index_mapper=lambda x: x)
        olh_server = lh.LHServer(epsilon, d, use_olh=True, index_mapper=lambda x: x)
        made = [olh_client.privatise(7) for _ in range(2)]
        began = time.perf_counter()
        for report in made:
            olh_server.aggregate(report)
        result["olh_report"] = (time.perf_counter() - began) / len(made)
    return result


def tally(found: set[bytes], planted: set[bytes]) -> str:
    """found / planted / other (returned but not planted)."""
    return f"{len(found & planted)} / {len(planted)} / {len(found - planted)}"


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], json.loads(sys.argv[3]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100_000])
    parser.add_argument("--lengths", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--eps", type=float, nargs="+", default=[4.0, 1.0])
    parser.add_argument("--seed", type=int, default=20261126)
    args = parser.parse_args()
    check_pure_ldp()
    columns = ("L", "n", "eps", "side", "encode s", "sum s", "decode s", "found / planted / other")
    print(" | ".join(columns))
    print("|".join("---" for _ in columns))
    olh = {}
    for n in args.n:
        for length in args.lengths:
            for epsilon in args.eps:
                rng = np.random.default_rng(args.seed)
                strings, planted = population(n, length, epsilon, rng)
                head = f"{length} | {n:,} | {epsilon:g}"
                encode, summed, decode, found = run_deniable(strings, epsilon, args.seed)
                print(
                    f"{head} | deniable | {encode:.1f} | {summed:.1f} | {decode:.2f} |"
                    f" {tally(found, planted)}"
                )
                timed = (
                    length <= 3 and length not in olh
                )  # OLH's domain array at 8 bytes: 2^64 floats
                other = run_pure_ldp(strings, epsilon, args.seed, len(planted), timed)
                found = {bytes.fromhex(v) for v in other["threshold"]}
                top = {bytes.fromhex(v) for v in other["top"]}
                print(
                    f"{head} | pure-ldp PEM+CMS, threshold tau | {other['encode']:.1f} |"
                    f" {other['sum']:.1f} | {other['decode']:.2f} | {tally(found, planted)}"
                )
                print(
                    f"{head} | pure-ldp PEM+CMS, top-{len(planted)} | (same) | (same) |"
                    f" {other['top_decode']:.2f} | {tally(top, planted)}",
                    flush=True,
                )
                if timed:
                    olh[length] = other["olh_report"]
    n = max(args.n)
    for length, per in olh.items():
        print(
            f"pure-ldp's default OLH oracle, L = {length}: {per * 1e3:.0f} ms to aggregate one"
            f" last-level report (2^{8 * length} hashes), {per * n / length / 3600:.1f} h"
            f" for the last level's n/L reports at n = {n:,}"
        )


if __name__ == "__main__":
    main()
