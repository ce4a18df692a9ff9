"""Text metrics with dimensions: what keeping their sketch counts per cell costs.

    python -m bench.text_cells [--reports 20000] [--cells 1 4 15] [--backend both]
                               [--groups 10 100 1000] [--epsilon 4]

An 8-byte text metric (eps 4 unless ``--epsilon``): reports drawn once through the real
randomizer and reused, stored in process through ``prepare_batch`` / ``store_batches`` in
groups of 1,000 (one committed group each, as the writer commits them), each in a cell drawn
uniformly (seeded) among C cells (C = 1: the metric without dimensions). Per backend and C:
reports stored per second, the count rows one period keeps, and one period's breakdown by the dimension (read every cell,
sum each slice, decode it) in milliseconds (the decoder's one-off set-up done before).

Then the counts write alone on SQLite (``--counts-backend postgresql``: PostgreSQL, without
``packed``; no report insert), by group size, for three layouts:
``chunked`` (``text_cell_counts`` as built: a row per (period, cell, level, row) holding that
sketch row's 1,024 sums and its tally, 8 KB, of which a report touches exactly one; the
collector's own upsert); ``sparse`` (a row per nonzero count, as ``support_counts`` kept a
text metric without dimensions before migration 0017, with a cell column; the same JSON upsert
shape) and
``packed`` (a row per (period, cell) holding the whole sketch, as ``cell_counts`` keeps a
categorical metric's support: one 131,200-count blob per touched cell added in place by
``deniable_add_counts``). A collector commits groups of whatever arrived together: small ones
at low traffic, so the small groups matter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from deniable.client import MetricSpec, SeededRandomness
from deniable.collector import migrate
from deniable.collector.storage import open_database
from deniable.collector.storage.kindrows import TextRows
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import read_counts, read_text_cells, register_spec
from deniable.collector.storage.tables import ADD_PACKED_SQL, pack_counts
from deniable.collector.storage.textcells import text_cell_rows, upsert_text_cells
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from deniable.estimators.heavyhitters import text_document
from deniable.estimators.support import text_bits, text_support
from testkit import scratch_database

PERIOD = "2026-11-26"
GROUP = 1_000
LAYOUTS = ("chunked", "sparse", "packed")
WORDS = ("search", "settings", "help", "wifi")


def draw(spec: MetricSpec, count: int, seed: int) -> list[dict[str, object]]:
    """``count`` payloads through the real randomizer: a few common strings, the rest unique."""
    rng, sketch = SeededRandomness(seed), spec.text_randomizer
    payloads = []
    for i in range(count):
        value = WORDS[i % len(WORDS)] if i % 3 else f"u{i:07d}"
        payloads.append(sketch.randomize(sketch.encode(value), 1 + i % sketch.levels, rng))
    return payloads


def spread(reports: int, cells: int) -> list[int]:
    """Each report's cell, uniformly at random (seeded): reports arrive in any order."""
    return np.random.default_rng(5).integers(cells, size=reports).tolist()


def cells_of(count: int) -> tuple[dict[str, list[str]], list[str]]:
    """A dimension making ``count`` cells (its values + other) and its cell texts."""
    if count == 1:
        return {}, [""]
    values = [f"v{i}" for i in range(count - 1)]
    return {"d": values}, [*values, "other"]


def run(url: str, payloads: list[dict[str, object]], count: int, epsilon: float) -> list[str]:
    """Store every payload spread over ``count`` cells; the table row."""
    dimensions, cells = cells_of(count)
    spec = MetricSpec.text(f"t{count}", max_length=8, epsilon=epsilon, dimensions=dimensions)
    migrate(url)
    database = open_database(url)
    try:
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        reports = [
            ValidReport(str(uuid.uuid4()), spec.name, PERIOD, p, cells[c])
            for p, c in zip(payloads, spread(len(payloads), len(cells)), strict=True)
        ]
        day = dt.date.fromisoformat(PERIOD)
        began = time.perf_counter()
        for start in range(0, len(reports), GROUP):
            batch = prepare_batch(reports[start : start + GROUP], {spec.name: spec}, day)
            store_batches(database, [batch])
        rate = len(reports) / (time.perf_counter() - began)
        with database.reader.connect() as connection:
            rows = connection.execute(
                text("SELECT count(*) FROM text_cell_counts WHERE metric = :m"), {"m": spec.name}
            ).scalar_one()
        began = time.perf_counter()
        if dimensions:
            for stats in read_text_cells(database, spec, [PERIOD]).values():
                text_document(spec.name, PERIOD, spec.text_randomizer, stats.counts[0])
        else:
            _, counts = read_counts(database, spec, [PERIOD])
            text_document(spec.name, PERIOD, spec.text_randomizer, counts[0])
        read_ms = 1000 * (time.perf_counter() - began)
    finally:
        database.dispose()
    return [f"{count}", f"{rate:,.0f}", f"{rows:,}", f"{read_ms:,.0f}"]


_SPARSE_TABLE = (
    "CREATE TABLE IF NOT EXISTS sparse_counts (metric TEXT, period TEXT, cell TEXT,"
    " category INTEGER, support BIGINT NOT NULL, PRIMARY KEY (metric, period, cell, category))"
)
_SPARSE_UPSERT = (
    "INSERT INTO sparse_counts SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),"
    " json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]')"
    " FROM json_each(:rows) WHERE 1"
    " ON CONFLICT (metric, period, cell, category) DO UPDATE SET support = support + excluded.support"
)
_PG_SPARSE_UPSERT = (
    "INSERT INTO sparse_counts AS t SELECT * FROM unnest(string_to_array(:m, ','),"
    " string_to_array(:p, ','), string_to_array(:c, ','), string_to_array(:v, ',')::int[],"
    " string_to_array(:n, ',')::bigint[])"
    " ON CONFLICT (metric, period, cell, category) DO UPDATE SET support = t.support + excluded.support"
)
_PACKED_UPSERT = (
    "INSERT INTO cell_counts (metric, period, cell, n, total, total_squares, support)"
    " VALUES ('packed', :p, :c, :n, 0, 0, :s) ON CONFLICT (metric, period, cell) DO UPDATE"
    f" SET n = n + excluded.n, support = {ADD_PACKED_SQL}(support, excluded.support)"
)


def counts_only(
    url: str, payloads: list[dict[str, object]], count: int, group: int, layout: str
) -> float:
    """Reports per second of the counts write alone at ``url``, in groups of ``group`` reports
    spread over ``count`` cells: ``chunked`` (``text_cell_counts``: :mod:`.textcells`'s own
    upsert), ``sparse`` (a row per nonzero count, as ``support_counts`` with a cell column, its
    JSON upsert; PostgreSQL: unnest) or ``packed`` (a whole-sketch blob per touched cell,
    added in place; SQLite only)."""
    sketch = MetricSpec.text("packed", max_length=8, epsilon=4).text_randomizer
    migrate(url)
    database = open_database(url)
    with database.writing() as connection:
        connection.execute(text(_SPARSE_TABLE))
    chosen = spread(len(payloads), count)
    try:
        began = time.perf_counter()
        for start in range(0, len(payloads), group):
            chunk = payloads[start : start + group]
            indexes = text_support(sketch, chunk)  # type: ignore[arg-type]
            cells = [f"c{c}" for c in chosen[start : start + len(chunk)]]
            if layout == "chunked":
                keys = [(PERIOD, cell) for cell in cells]
                chunks, bits = text_bits(sketch, chunk)  # type: ignore[arg-type]
                batch = TextRows(
                    np.arange(len(chunk)), [PERIOD], np.zeros(len(chunk)), chunks, bits
                )
                rows = text_cell_rows(keys, batch, sketch.levels * sketch.rows)
                with database.writing() as connection:
                    upsert_text_cells(
                        connection, database, [({"m": rows}, rows.increments("m"))], None
                    )
            elif layout == "sparse" and database.dialect == "postgresql":
                rows = json.loads(_sparse_rows(indexes, cells))
                columns = [",".join(str(row[i]) for row in rows) for i in range(5)]
                with database.writing() as connection:
                    connection.execute(
                        text(_PG_SPARSE_UPSERT), dict(zip("mpcvn", columns, strict=True))
                    )
            elif layout == "sparse":
                with database.writing() as connection:
                    connection.execute(text(_SPARSE_UPSERT), {"rows": _sparse_rows(indexes, cells)})
            else:
                with database.writing() as connection:
                    connection.execute(text(_PACKED_UPSERT), _packed_rows(sketch, indexes, cells))
        return len(payloads) / (time.perf_counter() - began)
    finally:
        database.dispose()


def _sparse_rows(indexes: list[np.ndarray], cells: list[str]) -> str:
    """The sparse layout's rows of a group as the JSON its upsert reads: per (cell, count
    index) its sum, in key order."""
    sums: dict[tuple[str, int], int] = {}
    for found, cell in zip(indexes, cells, strict=True):
        for index in found.tolist():
            sums[(cell, index)] = sums.get((cell, index), 0) + 1
    return json.dumps([["m", PERIOD, c, v, n] for (c, v), n in sorted(sums.items())])


def _packed_rows(sketch: Any, indexes: list[np.ndarray], cells: list[str]) -> list[dict[str, Any]]:
    """The packed layout's rows of a group: per touched cell its whole sketch's sums."""
    rows = []
    for cell in sorted(set(cells)):
        mine = [found for found, c in zip(indexes, cells, strict=True) if c == cell]
        sums = np.bincount(np.concatenate(mine), minlength=sketch.cell_count)
        rows.append({"p": PERIOD, "c": cell, "n": len(mine), "s": pack_counts(sums)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=20_000)
    parser.add_argument("--cells", type=int, nargs="+", default=[1, 4, 15])
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--groups", type=int, nargs="+", default=[10, 100, 1_000])
    parser.add_argument("--counts-only", action="store_true", help="only the layouts' counts write")
    parser.add_argument("--counts-backend", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args()
    spec = MetricSpec.text("draw", max_length=8, epsilon=args.epsilon)
    payloads = draw(spec, args.reports, seed=27)
    sketch = spec.text_randomizer
    text_document("warm", PERIOD, sketch, np.zeros(sketch.cell_count))  # hash tables, once
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    print(f"{args.reports:,} reports, 8-byte strings, eps {args.epsilon:g}, groups of {GROUP:,}")
    print("backend     | cells | reports/s | count rows | breakdown ms")
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        for backend in [] if args.counts_only else backends:
            for count in args.cells:
                with scratch_database(backend, directory, f"bench_text_{count}") as url:
                    row = run(url, payloads, count, args.epsilon)
                print(f"{backend:<11} | " + " | ".join(row))
        cells = max(args.cells)
        for backend in [args.counts_backend]:
            layouts = LAYOUTS if backend == "sqlite" else LAYOUTS[:2]
            print(f"counts write alone, {backend}, {cells} cells: reports/s by group size")
            print("group | " + " | ".join(layouts))
            for group in args.groups:
                rates = []
                for layout in layouts:
                    name = f"bench_text_{layout}_{group}"
                    with scratch_database(backend, directory, name) as url:
                        rates.append(counts_only(url, payloads, cells, group, layout))
                print(f"{group:,} | " + " | ".join(f"{rate:,.0f}" for rate in rates))


if __name__ == "__main__":
    main()
