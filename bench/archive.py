"""The Parquet archive: how fast retention archives, how small it is, how fast it re-analyses.

1. Archive: ``--db-reports`` krr reports over 10 days in a scratch PostgreSQL database
   (bulk-loaded), archived and dropped by ``retain(..., archive=...)``: reports/s, Parquet
   bytes per report against PostgreSQL's.
2. Re-analysis over synthetic archive files written in the archive's own layout (pinned
   schema, zstd): ``--reports`` krr reports (k = 20, 40 dimension cells) over 10 periods,
   ``--oue-reports`` oue reports (k = 20), and ``--text-reports`` text reports in one
   period; per engine (DuckDB embedded, Dask on a LocalCluster of 2 workers) the seconds for
   the counts, one breakdown (counts per cell), the oue counts and scoring 1,000 candidate
   strings (aggregate first: the period's sketch counts, then the scorer).

Run: ``.venv/bin/python -m bench.archive [--reports 10000000] [--db-reports 1000000]``.

``--ratio postgresql`` (or ``sqlite``; repeatable) runs only the archive against the engine
alone on the same ``--db-reports`` rows: a plain export (one SELECT per period on the driver's
connection, written to Parquet by pyarrow) alternated ``--pairs`` times with ``Archive.store``
of every period (written, checksummed, read back and verified), printing each pair, the median
ratio of rates, each side's CPU per report and the load.

``--query`` runs only the re-analysis against the engine alone: ``--from-archive``'s DuckDB
reduction (manifest and payloads checked, then counted) of the synthetic krr and oue files,
alternated ``--pairs`` times with one hand-written DuckDB query over the same files, printing
each pair, the median ratio of times, each side's CPU per report and the load.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from testkit import fresh_database, postgres_problem

PERIODS = [f"2026-06-{d:02d}" for d in range(1, 11)]
CELLS = [f"p{i},v{j}" for i in range(8) for j in range(5)]


def _specs() -> dict[str, Any]:
    from deniable.client import MetricSpec

    categories = [f"c{i}" for i in range(20)]
    return {
        "krr": MetricSpec.categorical(
            "bench_krr",
            categories,
            epsilon=2.0,
            mechanism="krr",
            dimensions={
                "platform": [f"p{i}" for i in range(7)],
                "version": ["v0", "v1", "v2", "v3"],
            },
        ),
        "oue": MetricSpec.categorical("bench_oue", categories, epsilon=1.0, mechanism="oue"),
        "text": MetricSpec.text("bench_text", max_length=8, epsilon=4.0),
    }


def archive_run(reports: int) -> dict[str, Any]:
    """Archive ``reports`` krr reports from PostgreSQL: seconds, rates and bytes per report."""
    from deniable.collector import migrate
    from deniable.collector.storage import open_database
    from deniable.collector.storage.archive import Archive
    from deniable.collector.storage.partitions import create_partitions
    from deniable.collector.storage.queries import register_spec
    from deniable.collector.storage.retention import retain

    spec = _specs()["oue"]
    with fresh_database("bench_archive") as url, tempfile.TemporaryDirectory() as folder:
        migrate(url)
        database = open_database(url)
        try:
            register_spec(database, spec, dt.datetime.now(dt.UTC))
            with database.writer.begin() as connection:
                create_partitions(connection, PERIODS)
                connection.exec_driver_sql(
                    "INSERT INTO reports (id, metric, period, payload, received)"
                    " SELECT gen_random_uuid(), 'bench_oue',"
                    " to_char(date '2026-06-01' + (i %% 10), 'YYYY-MM-DD'),"
                    " '\"' || encode(substring(uuid_send(gen_random_uuid()) from 1 for 2)"
                    " || '\\x0a'::bytea, 'base64') || '\"', date '2026-06-11'"
                    " FROM generate_series(1, %(n)s) i",
                    {"n": reports},
                )
            with database.writer.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM ANALYZE reports"
                )
                pg_bytes = int(
                    connection.exec_driver_sql(
                        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                        " WHERE c.relname LIKE 'reports_p_%%'"
                    ).scalar()
                )
            began = time.perf_counter()
            run = retain(database, [spec], dt.date(2026, 7, 1), archive=Archive(folder))
            seconds = time.perf_counter() - began
        finally:
            database.dispose()
        parquet = sum(path.stat().st_size for path in Path(folder).rglob("*.parquet"))
    return {
        "reports": run.deleted,
        "seconds": seconds,
        "reports/s": run.deleted / seconds,
        "Parquet B/report": parquet / run.deleted,
        "PostgreSQL B/report": pg_bytes / run.deleted,
    }


def _fill_reports(database: Any, reports: int) -> None:
    """``reports`` oue reports of bench_oue spread over :data:`PERIODS` (bulk SQL: random ids,
    short base64 payloads), on PostgreSQL or SQLite."""
    from deniable.collector.storage.partitions import create_partitions

    postgres = database.dialect == "postgresql"
    with database.writer.begin() as connection:
        if postgres:
            create_partitions(connection, PERIODS)
            connection.exec_driver_sql(
                "INSERT INTO reports (id, metric, period, payload, received)"
                " SELECT gen_random_uuid(), 'bench_oue',"
                " to_char(date '2026-06-01' + (i %% 10), 'YYYY-MM-DD'),"
                " '\"' || encode(substring(uuid_send(gen_random_uuid()) from 1 for 2)"
                " || '\\x0a'::bytea, 'base64') || '\"', date '2026-06-11'"
                " FROM generate_series(1, %(n)s) i",
                {"n": reports},
            )
        else:
            connection.exec_driver_sql(
                "WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < ?)"
                " INSERT INTO reports (id, metric, period, payload, received, cell)"
                " SELECT randomblob(16), 'bench_oue', '2026-06-' || printf('%02d', 1 + x % 10),"
                " '\"' || hex(randomblob(2)) || '\"', '2026-06-11', '' FROM i",
                (reports,),
            )
    if postgres:
        with database.writer.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                "VACUUM ANALYZE reports"
            )


def plain_export(url: str, metric: str, folder: Path) -> int:
    """The engine alone: each period's rows (id bytes, payload, received, cell) in one plain
    SELECT on the driver's own connection (no SQLAlchemy, no pages, no checksum, no read-back),
    written to Parquet (zstd) by pyarrow; the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deniable.collector.storage.engine import normalize_url

    normalized = str(normalize_url(url))
    if normalized.startswith("sqlite"):
        import sqlite3

        connection: Any = sqlite3.connect(normalized.split("///", 1)[1])
        sql = (
            "SELECT id, payload, received, cell FROM reports"
            " WHERE metric = ? AND period = ? ORDER BY id"
        )
    else:
        import psycopg

        connection = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
        sql = (
            "SELECT uuid_send(id), payload, to_char(received, 'YYYY-MM-DD'), cell FROM reports"
            " WHERE metric = %s AND period = %s ORDER BY id"
        )
    written = 0
    try:
        for period in PERIODS:
            rows = connection.execute(sql, (metric, period)).fetchall()
            ids, payloads, received, cells = zip(*rows, strict=True)
            table = pa.table(
                {
                    "id": pa.array(ids, pa.binary(16)),
                    "payload": pa.array(payloads, pa.string()),
                    "received": pa.array(received, pa.string()).cast(pa.date32()),
                    "cell": pa.array(cells, pa.string()),
                }
            )
            pq.write_table(table, folder / f"{period}.parquet", compression="zstd")
            written += table.num_rows
    finally:
        connection.close()
    return written


def archive_ratio(backend: str, reports: int, pairs: int) -> None:
    """The archive (``Archive.store`` of each period: written, checksummed, read back and
    verified; not dropped, so the same rows serve every run) against :func:`plain_export` of
    the same rows, alternated ``pairs`` times: every pair, the median ratio of rates, the CPU
    per report of this process on each side (the database server's is not counted), the load."""
    import contextlib
    import shutil

    from deniable.collector import migrate
    from deniable.collector.storage import open_database
    from deniable.collector.storage.archive import Archive
    from deniable.collector.storage.queries import register_spec

    spec = _specs()["oue"]
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if backend == "postgresql":
            url = stack.enter_context(fresh_database("bench_archive_ratio"))
        else:
            url = f"sqlite:///{scratch}/archive.db"
        migrate(url)
        database = open_database(url)
        stack.callback(database.dispose)
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        began = time.perf_counter()
        _fill_reports(database, reports)
        print(
            f"\narchive vs plain export, {backend}, {reports:,} reports over {len(PERIODS)}"
            f" periods (filled in {time.perf_counter() - began:,.0f} s)"
        )
        print(
            f"{'pair':>4} {'export/s':>10} {'archive/s':>10} {'ratio':>6}"
            f" {'CPU us/report export':>21} {'archive':>8} {'load':>6}"
        )

        def export_run(folder: Path) -> int:
            return plain_export(url, spec.name, folder)

        def archive_run(folder: Path) -> int:
            target = Archive(str(folder))
            return sum(target.store(database, spec, period).rows for period in PERIODS)

        ratios, cpu_ratios = [], []
        for pair in range(pairs):
            found = {}
            for name, run in (("export", export_run), ("archive", archive_run)):
                folder = scratch / name
                folder.mkdir()
                cpu, wall = time.process_time(), time.perf_counter()
                rows = run(folder)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                shutil.rmtree(folder)
                found[name] = (rows / wall, 1e6 * cpu / rows)
            ratios.append(found["archive"][0] / found["export"][0])
            cpu_ratios.append(found["export"][1] / found["archive"][1])
            print(
                f"{pair + 1:>4} {found['export'][0]:>10,.0f} {found['archive'][0]:>10,.0f}"
                f" {ratios[-1]:>6.2f} {found['export'][1]:>21.2f} {found['archive'][1]:>8.2f}"
                f" {os.getloadavg()[0]:>6.2f}"
            )
        print(
            f"median archive/export {float(np.median(ratios)):.2f}x by rate,"
            f" {float(np.median(cpu_ratios)):.2f}x by this process's CPU per report"
        )


def _write(root: Path, spec: Any, period: str, payloads: Any, cells: Any | None) -> None:
    """One archive file of ``payloads`` (an Arrow string array of payload JSON text) and its
    manifest, as the archiver writes them (so re-analysis pays for checking it)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from deniable.client.spec import canonical_json
    from deniable.sources.archivefiles import (
        ARCHIVE_VERSION,
        COMPRESSION,
        FILE_NAME,
        MANIFEST_NAME,
        arrow_schema,
        check_file,
        counted_by_groups,
        open_archive,
        partition_dir,
    )

    n = len(payloads)
    schema = arrow_schema(cells is not None, canonical_json(spec.to_dict()))
    ids = np.sort(np.frombuffer(os.urandom(16 * n), dtype="S16")).tobytes()
    arrays = [
        pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), n, [None, pa.py_buffer(ids)]),
        payloads,
        pa.array(np.full(n, np.datetime64("2026-06-11", "D")), pa.date32()),
    ]
    if cells is not None:
        arrays.append(cells)
    directory = Path(partition_dir(str(root), spec.name, period))
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.Table.from_arrays(arrays, schema=schema),
        directory / FILE_NAME,
        compression=COMPRESSION,
        row_group_size=50_000,
    )
    fs, _ = open_archive(str(root))
    found = check_file(fs, str(directory / FILE_NAME), counted_by_groups(spec))
    manifest = {"metric": spec.name, "period": period, "rows": found.rows}
    manifest |= {"sha256": found.sha256, **found.checksums}
    manifest["version"] = ARCHIVE_VERSION
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest, sort_keys=True))


DRAWN_TEXT_REPORTS = 200_000
"""Text reports drawn through the real randomizer (about 20,000 a second); a larger archive
repeats them, which costs the re-analysis the same work per report."""


def synthesize(root: Path, reports: int, oue_reports: int, text_reports: int) -> None:
    """Write the synthetic archive (seeded numpy draws; payloads shaped as the product's)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from deniable.client import SeededRandomness

    specs = _specs()
    rng = np.random.default_rng(1)
    per = reports // len(PERIODS)
    for period in PERIODS:
        index = pa.array(rng.integers(0, 20, per))
        cells = pa.DictionaryArray.from_arrays(
            pa.array(rng.integers(0, len(CELLS), per), pa.int32()), pa.array(CELLS)
        ).cast(pa.string())
        _write(root, specs["krr"], period, pc.cast(index, pa.string()), cells)
    per = oue_reports // len(PERIODS)
    for period in PERIODS:
        raw = rng.integers(0, 256, (per, 3), dtype=np.uint8)
        raw[:, 2] &= 0x0F
        encoded = base64.b64encode(raw.tobytes())
        texts = [f'"{encoded[4 * i : 4 * i + 4].decode()}"' for i in range(per)]
        _write(root, specs["oue"], period, pa.array(texts, pa.string()), None)
    if not text_reports:
        return
    sketch = specs["text"].text_randomizer
    seeded = SeededRandomness(3)
    words = [f"w{i}" for i in range(300)]
    from deniable.client.wire import payload_text

    drawn = min(text_reports, DRAWN_TEXT_REPORTS)
    texts = pa.array(
        [
            payload_text(
                sketch.randomize(
                    sketch.encode(words[int(rng.zipf(1.3)) % 300]), 1 + i % sketch.levels, seeded
                )
            )
            for i in range(drawn)
        ],
        pa.string(),
    )
    whole, part = divmod(text_reports, drawn)
    repeated = pa.concat_arrays([texts] * whole + [texts.slice(0, part)])
    _write(root, specs["text"], PERIODS[-1], repeated, None)


def reanalysis(root: Path, engine: str, scheduler: str | None) -> list[dict[str, Any]]:
    """Seconds per re-analysis on ``engine``."""
    from deniable.estimators.heavyhitters import text_document
    from deniable.sources.archivecounts import archive_counts
    from deniable.sources.archivedask import dask_counts

    specs = _specs()

    def counts(spec: Any, periods: list[str], by_cell: bool = False) -> Any:
        if engine == "dask":
            return dask_counts(str(root), spec, periods, by_cell, scheduler)
        return archive_counts(str(root), spec, periods, by_cell)

    rows = []
    for what, spec, periods, by_cell in (
        ("krr counts", specs["krr"], PERIODS, False),
        ("krr breakdown (40 cells)", specs["krr"], PERIODS, True),
        ("oue counts", specs["oue"], PERIODS, False),
    ):
        began = time.perf_counter()
        files = counts(spec, periods, by_cell)
        seconds = time.perf_counter() - began
        n = sum(f.whole.n for f in files)
        rows.append(
            {
                "engine": engine,
                "what": what,
                "reports": n,
                "seconds": seconds,
                "reports/s": n / seconds,
            }
        )
    began = time.perf_counter()
    [found] = counts(specs["text"], PERIODS[-1:])
    candidates = [f"w{i}" for i in range(1000)]
    text_document(
        "bench_text",
        PERIODS[-1],
        specs["text"].text_randomizer,
        found.whole.support,
        candidates=candidates,
    )
    seconds = time.perf_counter() - began
    rows.append(
        {
            "engine": engine,
            "what": "text: 1,000 candidates",
            "reports": found.whole.n,
            "seconds": seconds,
            "reports/s": found.whole.n / seconds,
        }
    )
    return rows


def query_counts(connection: Any, root: Path, spec: Any) -> dict[str, tuple[int, list[int]]]:
    """One hand-written DuckDB query over every period's file of ``spec``'s metric (no
    manifest, no payload check): (n, support per category) by period."""
    files = f"{root}/metric={spec.name}/period=*/reports.parquet"
    source = f"read_parquet('{files}', hive_partitioning = true)"
    k = spec.count_width
    if spec.mechanism == "krr":
        rows = connection.execute(
            f"SELECT period, CAST(payload AS INTEGER), count(*) FROM {source} GROUP BY ALL"
        ).fetchall()
        found: dict[str, tuple[int, list[int]]] = {}
        for period, value, count in rows:
            n, support = found.setdefault(str(period), (0, [0] * k))
            support[value] += count
            found[str(period)] = (n + count, support)
        return found
    # bit v of an oue payload is bit v % 8 of byte v // 8, least significant first; DuckDB's
    # get_bit counts from each byte's most significant bit
    sums = ", ".join(f"sum(get_bit(bits, {8 * (v // 8) + 7 - v % 8}))" for v in range(k))
    rows = connection.execute(
        f"SELECT period, count(*), {sums} FROM (SELECT period,"
        f" CAST(from_base64(json_extract_string(payload, '$')) AS BIT) AS bits FROM {source})"
        " GROUP BY period"
    ).fetchall()
    return {str(row[0]): (int(row[1]), [int(c) for c in row[2:]]) for row in rows}


def query_ratio(root: Path, pairs: int) -> None:
    """``--from-archive``'s reduction on DuckDB (:func:`archive_counts`: each file's manifest
    checked, its payloads checked, then counted) against :func:`query_counts` over the same
    files, alternated ``pairs`` times per metric (krr, oue): every pair, the median ratio of
    times, the CPU per report of this process (DuckDB's threads included) on each side, the
    load. Both sides' counts must agree."""
    import duckdb

    from deniable.sources.archivecounts import archive_counts

    specs = _specs()
    print(
        f"{'metric':>6} {'pair':>4} {'query s':>8} {'product s':>9} {'ratio':>6}"
        f" {'CPU us/report query':>20} {'product':>8} {'load':>6}"
    )
    for label in ("krr", "oue"):
        spec = specs[label]
        ratios = []
        for pair in range(pairs):
            timed = {}
            for side in ("query", "product"):
                cpu, wall = time.process_time(), time.perf_counter()
                if side == "query":
                    connection = duckdb.connect()
                    found = query_counts(connection, root, spec)
                    connection.close()
                else:
                    files = archive_counts(str(root), spec, PERIODS)
                    found = {
                        f.period: (f.whole.n, [int(c) for c in f.whole.support]) for f in files
                    }
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                timed[side] = (wall, cpu, found)
            assert timed["query"][2] == timed["product"][2], "the two sides' counts differ"
            n = sum(n for n, _ in timed["query"][2].values())
            ratios.append(timed["product"][0] / timed["query"][0])
            print(
                f"{label:>6} {pair + 1:>4} {timed['query'][0]:>8.3f} {timed['product'][0]:>9.3f}"
                f" {ratios[-1]:>6.2f} {1e6 * timed['query'][1] / n:>20.3f}"
                f" {1e6 * timed['product'][1] / n:>8.3f} {os.getloadavg()[0]:>6.2f}"
            )
        print(f"{label}: {n:,} reports, median product/query time {float(np.median(ratios)):.2f}x")


def _print(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    header = list(rows[0])
    cells = [header] + [
        [
            f"{v:,.3f}"
            if isinstance(v, float) and v < 1000
            else f"{v:,.0f}"
            if isinstance(v, float)
            else f"{v:,}"
            if isinstance(v, int)
            else str(v)
            for v in row.values()
        ]
        for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for j, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        if j == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db-reports", type=int, default=1_000_000)
    parser.add_argument("--reports", type=int, default=10_000_000)
    parser.add_argument("--oue-reports", type=int, default=2_000_000)
    parser.add_argument("--text-reports", type=int, default=100_000)
    parser.add_argument(
        "--ratio",
        choices=["sqlite", "postgresql"],
        action="append",
        help="only the archive against a plain export of the same rows, alternated, on this"
        " engine (repeatable)",
    )
    parser.add_argument(
        "--query",
        action="store_true",
        help="only --from-archive's DuckDB reduction against one hand-written DuckDB query over"
        " the same synthetic files (--reports krr, --oue-reports oue), alternated",
    )
    parser.add_argument("--pairs", type=int, default=3, help="alternated runs (--ratio, --query)")
    args = parser.parse_args()
    if args.query:
        with tempfile.TemporaryDirectory() as folder:
            began = time.perf_counter()
            synthesize(Path(folder), args.reports, args.oue_reports, 0)
            print(
                f"synthetic archive: {args.reports:,} krr (with cells) + {args.oue_reports:,}"
                f" oue reports over {len(PERIODS)} periods, written in"
                f" {time.perf_counter() - began:,.1f} s"
            )
            query_ratio(Path(folder), args.pairs)
        return
    if args.ratio:
        for backend in args.ratio:
            archive_ratio(backend, args.db_reports, args.pairs)
        return
    if args.db_reports:
        problem = postgres_problem()
        if problem:
            raise SystemExit(f"PostgreSQL is needed for the archive run: {problem}")
        _print("archive (PostgreSQL -> Parquet, verified, dropped)", [archive_run(args.db_reports)])
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        began = time.perf_counter()
        synthesize(root, args.reports, args.oue_reports, args.text_reports)
        size = sum(p.stat().st_size for p in root.rglob("*.parquet"))
        print(
            f"\nsynthetic archive: {args.reports:,} krr (with cells) + {args.oue_reports:,} oue +"
            f" {args.text_reports:,} text reports, {size / 2**20:,.1f} MiB,"
            f" written in {time.perf_counter() - began:,.1f} s"
        )
        rows = reanalysis(root, "duckdb", None)
        from dask.distributed import LocalCluster

        began = time.perf_counter()
        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=True
        )
        print(f"Dask LocalCluster (2 workers) started in {time.perf_counter() - began:,.1f} s")
        try:
            rows += reanalysis(root, "dask", cluster.scheduler_address)
        finally:
            cluster.close()
        _print("re-analysis over the archive", rows)


if __name__ == "__main__":
    main()
