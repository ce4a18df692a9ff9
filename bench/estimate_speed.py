"""Time estimates straight from a 10-million-report Parquet file (issue 2: under 2 s for krr).

It first prints the latency of ``estimate()`` from stored counts, k = 100 categories over 1 and
90 periods (the collector's estimate endpoint, issue 8), per mechanism and method.

Writes one Parquet file per mechanism to a temporary directory, in the schema ``deniable export``
writes (id, metric, fingerprint, period, payload columns), then times
``estimate_reports(mechanism, categories, path)``: reading, per-period aggregation with polars and
numpy, and the estimate. Reports are drawn with numpy from the mechanisms' own p*, q* (the same
distribution as ``randomize``, which would take minutes at this size in pure Python).

Then it times the exact maximum-likelihood estimate (``method="mle"`` on raw reports) of olh,
oue and krr (closed form) at k = 256, eps 1, from 100,000 reports (issue 14's target: under 2 s).

    .venv/bin/python -m bench.estimate_speed [--reports 10000000] [--mechanisms krr,oue,olh]
    .venv/bin/python -m bench.estimate_speed --counts-only
    .venv/bin/python -m bench.estimate_speed --mle-only
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from deniable.client.mechanisms import KRR, OLH, OUE, Mechanism
from deniable.estimators import PeriodCounts, estimate, estimate_reports

B64 = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8
)


def base64_rows(raw: np.ndarray) -> pl.Series:
    """Standard base64 of each row of a (n, bytes) uint8 array, vectorized."""
    n, width = raw.shape
    padded = np.zeros((n, -(-width // 3) * 3), dtype=np.uint8)
    padded[:, :width] = raw
    g = padded.reshape(n, -1, 3).astype(np.uint32)
    word = (g[..., 0] << 16) | (g[..., 1] << 8) | g[..., 2]
    chars = np.stack([(word >> s) & 63 for s in (18, 12, 6, 0)], axis=-1).reshape(n, -1)
    text = B64[chars]
    pad = (3 - width % 3) % 3
    if pad:
        text[:, -pad:] = ord("=")
    return pl.Series("payload", text.view(f"S{text.shape[1]}").ravel()).cast(pl.String)


def payload_columns(mechanism: Mechanism, values: np.ndarray, rng: np.random.Generator) -> dict:
    """Randomized payload columns for true values, drawn with numpy from p*, q* (and g)."""
    n, k = len(values), mechanism.k
    if isinstance(mechanism, KRR):
        keep = rng.random(n) < mechanism.p_star
        other = rng.integers(0, k - 1, n)
        return {"payload": np.where(keep, values, other + (other >= values))}
    if isinstance(mechanism, OUE):
        bits = rng.random((n, k)) < mechanism.q_star
        bits[np.arange(n), values] = rng.random(n) < mechanism.p_star
        return {"payload": base64_rows(np.packbits(bits, axis=1, bitorder="little"))}
    assert isinstance(mechanism, OLH)
    prime, g = 2**31 - 1, mechanism.g
    a = rng.integers(1, prime, n)
    b = rng.integers(0, prime, n)
    h = ((a * values + b) % prime) % g
    keep = rng.random(n) < mechanism.p_star
    other = rng.integers(0, g - 1, n)
    return {"a": a, "b": b, "y": np.where(keep, h, other + (other >= h))}


def write_reports(mechanism: Mechanism, n: int, periods: int, path: Path) -> None:
    rng = np.random.default_rng(2026)
    f = 1 / np.arange(1, mechanism.k + 1)
    f /= f.sum()
    if not 1 <= periods <= 31:
        raise ValueError("periods must be 1..31 (days of October 2026)")
    labels = np.array([f"2026-10-{d + 1:02d}" for d in range(periods)])
    chunk = 2_000_000
    frames = []
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        values = rng.choice(mechanism.k, size=m, p=f)
        day = rng.integers(0, periods, m)
        frames.append(
            pl.DataFrame(
                {
                    "id": pl.int_range(start, start + m, eager=True).cast(pl.String),
                    "metric": pl.repeat("bench", m, eager=True),
                    "fingerprint": pl.repeat("0123456789abcdef", m, eager=True),
                    "period": labels[day],
                    **payload_columns(mechanism, values, rng),
                }
            )
        )
    pl.concat(frames).write_parquet(path)


def counts_latency() -> None:
    """p50 and p99 of estimate() from counts for k = 100 over 1 and 90 periods."""
    rng = np.random.default_rng(7)
    k = 100
    categories = [f"c{v}" for v in range(k)]
    f = 1 / np.arange(1, k + 1)
    f /= f.sum()
    print(
        f"{'estimate() from counts, k=100':<34}{'periods':>8}{'method':>12}{'p50 ms':>9}{'p99 ms':>9}"
    )
    for mechanism in (KRR(k, 5.0), OUE(k, 1.0), OLH(k, 1.0)):
        lam = mechanism.q_star + (mechanism.p_star - mechanism.q_star) * f
        for periods in (1, 90):
            sizes = rng.integers(5_000, 15_000, periods)  # ~1 million reports over 90 periods
            stored = [
                PeriodCounts(
                    f"p{t}",
                    int(m),
                    rng.multinomial(m, lam / lam.sum())
                    if isinstance(mechanism, KRR)
                    else rng.binomial(m, lam),
                )
                for t, m in enumerate(sizes)
            ]
            for method in ("unbiased", "consistent", "mle"):
                times = []
                for _ in range(200):
                    started = time.perf_counter()
                    estimate(mechanism, categories, stored, method=method)
                    times.append(1e3 * (time.perf_counter() - started))
                p50, p99 = np.percentile(times, [50, 99])
                print(f"{mechanism!r:<34}{periods:>8}{method:>12}{p50:>9.2f}{p99:>9.2f}")


def exact_mle_time(n: int = 100_000, k: int = 256) -> None:
    """Seconds for the exact mle (eps 1) from n raw reports in a frame, k categories.

    A small run first imports what the estimate needs (scipy), so the table times the work.
    """
    print(f"{'exact mle from raw reports':<34}{'reports':>10}{'seconds':>9}{'iterations':>12}")
    for index, mechanism in enumerate((OLH(k, 1.0), OUE(k, 1.0), KRR(k, 1.0))):
        rng = np.random.default_rng(14)
        f = 1 / np.arange(1, k + 1)
        values = rng.choice(k, size=n, p=f / f.sum())
        frame = pl.DataFrame(
            {"period": ["2026-10-01"] * n, **payload_columns(mechanism, values, rng)}
        )
        categories = [f"c{v}" for v in range(k)]
        if index == 0:
            estimate_reports(mechanism, categories, frame.head(1000), method="mle")
        iterations = [0]
        started = time.perf_counter()
        estimate_reports(
            mechanism,
            categories,
            frame,
            method="mle",
            progress=lambda i, _, seen=iterations: seen.__setitem__(0, i),
        )
        elapsed = time.perf_counter() - started
        print(f"{mechanism!r:<34}{n:>10,}{elapsed:>9.2f}{iterations[0]:>12,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000_000)
    parser.add_argument("--mechanisms", default="krr,oue,olh")
    parser.add_argument("--periods", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--counts-only", action="store_true", help="only time estimate() from counts"
    )
    parser.add_argument("--mle-only", action="store_true", help="only time the exact mle")
    args = parser.parse_args()
    exact_mle_time()
    if args.mle_only:
        return
    counts_latency()
    if args.counts_only:
        return
    setups = {"krr": KRR(16, 2.0), "oue": OUE(64, 1.0), "olh": OLH(64, 1.0)}
    print(
        f"{'mechanism':<22}{'reports':>12}{'file MB':>9}{'write s':>9}{'estimate s (best of ' + str(args.repeat) + ')':>28}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.mechanisms.split(","):
            mechanism = setups[name]
            path = Path(tmp) / f"{name}.parquet"
            started = time.perf_counter()
            write_reports(mechanism, args.reports, args.periods, path)
            written = time.perf_counter() - started
            categories = [f"c{v}" for v in range(mechanism.k)]
            timings = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                result = estimate_reports(mechanism, categories, path)
                timings.append(time.perf_counter() - started)
            assert result.n == args.reports
            size = path.stat().st_size / 1e6
            print(
                f"{mechanism!r:<22}{args.reports:>12,}{size:>9.0f}{written:>9.1f}{min(timings):>28.2f}"
            )
            path.unlink()


if __name__ == "__main__":
    main()
