"""Estimates straight from a table of raw reports (a polars DataFrame or a Parquet file).

The table has the columns ``deniable export`` writes: id, metric, fingerprint, period and the
payload (brr/krr: ``payload`` Int64; oue: ``payload`` String, base64; olh: ``a``, ``b``, ``y``
Int64). Reports are reduced to per-period support counts with polars group-bys (identical
payloads are counted once) and numpy, never a Python loop over rows, then handed to
:func:`~deniable.estimators.frequency.estimate`. With ``method="mle"``, oue and olh use the exact
likelihood of the reports (iterative Bayesian update) instead of the composite one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import KRR, OLH, OLH_PRIME, OUE, Mechanism

from .choices import Method, Pooling, check_options
from .columns import payload_columns
from .consistency import Progress, ibu
from .frequency import estimate_with
from .results import Estimate, PeriodCounts, PeriodSums
from .support import index_support, olh_support, oue_bits

CHUNK_ROWS = 50_000
"""Rows per numpy block when oue payloads are decoded or olh hashes evaluated (bounds memory)."""


def _load(mechanism: Mechanism, table: pl.DataFrame | str | Path) -> pl.DataFrame:
    """Read the table (or Parquet file) and check that it has what this mechanism needs."""
    needed = ("period", *payload_columns(mechanism.name))
    if isinstance(table, str | Path):
        columns = list(pl.read_parquet_schema(table))
    elif isinstance(table, pl.DataFrame):
        columns = table.columns
    else:
        raise InvalidInput("reports must be a polars DataFrame or a Parquet file path")
    missing = [c for c in needed if c not in columns]
    if missing:
        raise InvalidInput(f"report table lacks column(s) {', '.join(missing)}")
    if isinstance(table, pl.DataFrame):
        frame = table.select(needed)
    else:
        frame = pl.scan_parquet(table).select(needed).collect()
    if frame.null_count().sum_horizontal().item():
        raise InvalidInput("report table has missing (null) values")
    return frame.with_columns(pl.col("period").cast(pl.String))


def _check_range(frame: pl.DataFrame, column: str, low: int, high: int) -> None:
    """Refuse a non-integer column or values outside [low, high], saying how many."""
    if frame.height and not frame[column].dtype.is_integer():
        raise InvalidInput(f"report column {column!r} must be integers")
    bad = frame.filter((pl.col(column) < low) | (pl.col(column) > high)).height
    if bad:
        raise InvalidInput(f"{bad} report(s) have {column} outside [{low}, {high}]")


def _payloads_repeat(mechanism: Mechanism) -> bool:
    """Whether identical payloads are common enough to count them once (a polars group-by).

    olh payloads carry fresh random seeds, and oue payloads with more than 16 categories have
    too many possible bit patterns to repeat often, so those are not grouped.
    """
    return isinstance(mechanism, KRR) or (isinstance(mechanism, OUE) and mechanism.k <= 16)


def _compressed(mechanism: Mechanism, frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per period, the (distinct, when they repeat) payloads with their multiplicity ``times``."""
    columns = payload_columns(mechanism.name)
    if not _payloads_repeat(mechanism):
        rows = frame.with_columns(pl.lit(1, dtype=pl.Int64).alias("times"))
    else:
        rows = frame.group_by(["period", *columns]).agg(pl.len().cast(pl.Int64).alias("times"))
    return {str(key[0]): part for key, part in rows.partition_by("period", as_dict=True).items()}


def _support_blocks(
    mechanism: Mechanism, part: pl.DataFrame
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (support matrix, multiplicities) over one period's distinct payloads in blocks."""
    k = mechanism.k
    times = part["times"].to_numpy()
    if isinstance(mechanism, KRR):
        yield index_support(k, part["payload"].to_numpy()), times
        return
    if isinstance(mechanism, OUE):
        width = 4 * ((mechanism.n_bytes + 2) // 3)
        if (part["payload"].str.len_bytes() != width).any():
            raise InvalidInput(f"oue payloads must be {width} base64 characters for k={k}")
        for start in range(0, part.height, CHUNK_ROWS):
            chunk = part["payload"].slice(start, CHUNK_ROWS)
            text = chunk.str.join("").item().encode("ascii")
            encoded = np.frombuffer(text, dtype=np.uint8).reshape(chunk.len(), width)
            bits = oue_bits(encoded, 8 * mechanism.n_bytes)
            if bits[:, k:].any():
                raise InvalidInput(f"an oue payload sets bits past k={k}")
            yield bits[:, :k], times[start : start + chunk.len()]
        return
    if not isinstance(mechanism, OLH):
        raise TypeError(f"no support rule for mechanism {mechanism.name!r}")
    a, b, y = (part[c].to_numpy() for c in ("a", "b", "y"))
    for start in range(0, part.height, CHUNK_ROWS):
        stop = start + CHUNK_ROWS
        support = olh_support(mechanism, a[start:stop], b[start:stop], y[start:stop])
        yield support, times[start:stop]


def _validate(mechanism: Mechanism, frame: pl.DataFrame) -> None:
    """Check payload types and ranges before any counting (oue strings are checked when decoded)."""
    if isinstance(mechanism, KRR):
        _check_range(frame, "payload", 0, mechanism.k - 1)
    elif isinstance(mechanism, OLH):
        _check_range(frame, "a", 1, OLH_PRIME - 1)
        _check_range(frame, "b", 0, OLH_PRIME - 1)
        _check_range(frame, "y", 0, mechanism.g - 1)
    elif frame.height and frame["payload"].dtype != pl.String:
        raise InvalidInput("oue report column 'payload' must be base64 strings")


def report_sums(table: pl.DataFrame) -> list[PeriodSums]:
    """Per-period sums (n, sum of y, sum of y^2) of a numeric metric's reports, whose
    ``payload`` column holds y on the [-1, 1] axis; periods in label order.

    The collector keeps the same sums as reports arrive, so the mean estimated from a file
    equals the API's (up to the order of floating-point additions).
    """
    if "period" not in table.columns or "payload" not in table.columns:
        raise InvalidInput("report table lacks column(s) period or payload")
    if table.height == 0:
        return []
    if not table["payload"].dtype.is_float():
        raise InvalidInput("report column 'payload' of a numeric metric must be numbers")
    if table.select(["period", "payload"]).null_count().sum_horizontal().item():
        raise InvalidInput("report table has missing (null) values")
    grouped = (
        table.group_by(pl.col("period").cast(pl.String))
        .agg(
            pl.len().alias("n"),
            pl.col("payload").sum().alias("total"),
            (pl.col("payload") * pl.col("payload")).sum().alias("total_squares"),
        )
        .sort("period")
    )
    return [
        PeriodSums(row["period"], int(row["n"]), float(row["total"]), float(row["total_squares"]))
        for row in grouped.iter_rows(named=True)
    ]


def report_counts(mechanism: Mechanism, table: pl.DataFrame | str | Path) -> list[PeriodCounts]:
    """Per-period support counts of a table of raw reports, periods in label order."""
    counts, _ = _aggregate(mechanism, _load(mechanism, table), keep_support=False)
    return counts


def _aggregate(
    mechanism: Mechanism, frame: pl.DataFrame, keep_support: bool
) -> tuple[list[PeriodCounts], tuple[np.ndarray, np.ndarray] | None]:
    """Per-period counts in label order, and optionally every distinct report's support row.

    A table without rows has no periods, whatever its column types (a header-only CSV reads
    as strings), so it gives the explicit n = 0 answer rather than a type error.
    """
    if frame.height == 0:
        return [], None
    _validate(mechanism, frame)
    result: list[PeriodCounts] = []
    kept: list[tuple[np.ndarray, np.ndarray]] = []
    for label, part in sorted(_compressed(mechanism, frame).items()):
        totals = np.zeros(mechanism.k, dtype=np.int64)
        for support, times in _support_blocks(mechanism, part):
            if _payloads_repeat(mechanism):
                totals += times @ support.astype(np.int64)
            else:
                totals += support.sum(axis=0, dtype=np.int64)
            if keep_support:
                kept.append((support, times))
        result.append(PeriodCounts(label, int(part["times"].sum()), totals.tolist()))
    if not keep_support or not kept:
        return result, None
    return result, (np.vstack([s for s, _ in kept]), np.concatenate([t for _, t in kept]))


def estimate_reports(
    mechanism: Mechanism,
    categories: Sequence[str],
    table: pl.DataFrame | str | Path,
    *,
    confidence: float = 0.95,
    method: Method = "unbiased",
    simultaneous: bool = False,
    pooling: Pooling = "overlap-safe",
    progress: Progress | None = None,
) -> Estimate:
    """Estimate from raw reports: aggregate per period with polars, then :func:`estimate`.

    ``method="mle"`` for oue/olh keeps every distinct report's support row (n x k bytes) and
    runs projected Newton over them (a few O(n k^2) BLAS steps), telling ``progress`` about each
    iteration (it can take seconds); the other methods need only counts.
    Raises :class:`~deniable.client.errors.InvalidInput` naming the problem for a missing
    column, a null, or a bad payload.
    """
    check_options(confidence, method, pooling)
    exact_mle = method == "mle" and isinstance(mechanism, OUE | OLH)
    periods, support = _aggregate(mechanism, _load(mechanism, table), keep_support=exact_mle)
    point_for = None
    if exact_mle and support is not None:
        matrix, times = support
        p, q = mechanism.p_star, mechanism.q_star
        ratio = p * (1 - q) / (q * (1 - p))

        def point_for() -> np.ndarray:
            return ibu(matrix, times.astype(np.float64), ratio, progress=progress)

    return estimate_with(
        mechanism, categories, periods, confidence, method, simultaneous, pooling, point_for
    )
