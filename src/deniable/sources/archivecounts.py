"""Counts from the Parquet archive of raw reports, the same counts the collector keeps online.

Re-analysis aggregates first: each (metric, period) file is reduced to the counts an estimate
reads (n and the support count per category; a numeric metric's n, sum of y and sum of y^2; a
text metric's sketch counts per (level, row, cell) and its (level, row) tallies), per cell too
when the file carries cells, and the estimators then run on those counts exactly as on the
collector's (so the answers are the same). A file is read by DuckDB (embedded, no server):
brr/krr and numeric files are aggregated in SQL; olh and text payloads are decoded by DuckDB's
JSON functions, oue payload texts are read as stored, and they are counted by the product's own
numpy kernels (:mod:`.support`), never by evaluating a hash per candidate string. Every payload
is checked against its mechanism before a count is returned: a krr file's distinct payloads,
an oue file's by its kernel, the others by a scan of their own. The file is checked against
its manifest: a brr/krr file's row count and groups checksum (of its payloads, or of its
(cell, payload) pairs for a breakdown) on the groups its scan counted, any other's counted
columns (or, for a manifest older than those checksums, every column) read in a thread beside
the count.

:func:`archive_counts` runs the files one after the other in this process (DuckDB uses every
core on each); :mod:`.archivedask` maps :func:`file_counts` over the files on a Dask cluster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.kinds import NumericSpec, TextSpec
from deniable.client.mechanisms import (
    KRR,
    NUMERIC_MECHANISMS,
    OLH,
    OLH_PRIME,
    OUE,
    Duchi,
    Hybrid,
    Mechanism,
    NumericMechanism,
    PrefixSketch,
)
from deniable.client.spec import MetricSpec
from deniable.estimators.support import olh_support, oue_bits

from .archivefiles import (
    CELL_GROUPS_KEY,
    FILE_NAME,
    GROUPS_KEY,
    SPEC_KEY,
    ArchiveCorrupt,
    check_manifest,
    counted_by_groups,
    file_batches,
    groups_checksum,
    open_archive,
    parquet_file,
    partition_dir,
    read_manifest,
    verify_manifest,
)

ENGINES = ("duckdb", "dask")
"""The engines re-analysis runs on: DuckDB embedded (default), Dask on a cluster."""


@dataclass
class CellCounts:
    """One cell's (or a whole period's) counts: n, support per category (or sketch cell),
    and a numeric metric's sums of y and y^2."""

    n: int = 0
    support: np.ndarray | None = None
    total: float = 0.0
    total_squares: float = 0.0

    def add(self, other: CellCounts) -> None:
        """Add ``other``'s counts to these."""
        self.n += other.n
        if other.support is not None:
            self.support = (
                other.support.copy() if self.support is None else self.support + other.support
            )
        self.total += other.total
        self.total_squares += other.total_squares


@dataclass
class FileCounts:
    """One file's counts: its period, the whole period's, and each cell's (if it has cells)."""

    period: str
    whole: CellCounts
    cells: dict[str, CellCounts] = field(default_factory=dict)
    verified: bool = True
    """False if the file had no manifest, so its rows were not checked against the
    archiver's checksum (the CLI says so)."""


@dataclass(frozen=True)
class Scanned:
    """A brr/krr file's groups as one scan of every file found them (:func:`_scan_groups`):
    whether they are per cell (a breakdown of a file with cells), and its (cell, payload,
    rows), cell ``""`` when they are not."""

    cells: bool
    groups: list[tuple[str, str, int]]


def archive_files(url: str, metric: str, periods: Sequence[str]) -> list[tuple[str, str]]:
    """(period, path) of each archived file of ``metric`` among ``periods``, by period."""
    fs, root = open_archive(url)
    found = []
    for period in periods:
        path = f"{partition_dir(root, metric, period)}/{FILE_NAME}"
        if fs.exists(path):
            found.append((period, path))
    return found


def archived_periods(url: str, metric: str) -> list[str]:
    """Every period of ``metric`` the archive at ``url`` holds, sorted."""
    fs, root = open_archive(url)
    prefix = f"{root}/metric={metric}/period="
    return sorted(
        path.removeprefix(prefix).split("/")[0] for path in fs.glob(f"{prefix}*/{FILE_NAME}")
    )


def archived_spec(url: str, metric: str) -> dict[str, Any]:
    """The spec (JSON) the newest archived file of ``metric`` carries; InvalidInput if none."""
    import pyarrow.parquet as pq

    periods = archived_periods(url, metric)
    if not periods:
        raise InvalidInput(f"the archive at {url} holds no reports of metric {metric!r}")
    fs, root = open_archive(url)
    path = f"{partition_dir(root, metric, periods[-1])}/{FILE_NAME}"
    with fs.open(path, "rb") as handle:
        metadata = pq.ParquetFile(handle).schema_arrow.metadata or {}
    raw = metadata.get(SPEC_KEY.encode())
    if raw is None:
        raise InvalidInput(f"{path} carries no metric spec")
    return json.loads(raw)


def _connect(url: str) -> tuple[Any, Callable[[str], str]]:
    """A DuckDB connection that can read the archive's files, and how to name a path to it."""
    import duckdb

    fs, _ = open_archive(url)
    connection = duckdb.connect()
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        return connection, lambda path: path
    connection.register_filesystem(fs)
    return connection, lambda path: f"{protocol}://{path}"


def _text_column(array: Any) -> np.ndarray:
    """The (m, length) ASCII codes of an Arrow string array of equal-length strings."""
    import pyarrow as pa

    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    if len(array) == 0:
        return np.zeros((0, 0), dtype=np.uint8)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[
        array.offset : array.offset + len(array) + 1
    ]
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    widths = np.diff(offsets)
    if (widths != widths[0]).any():
        raise InvalidInput("archived payloads of one metric differ in length")
    return data.reshape(len(array), int(widths[0]))


INTEGER = "(0|[1-9][0-9]{0,9})"
"""A JSON integer as the collector stores it (no sign, no leading zero, no exponent)."""
NUMBER = "-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?"
"""A JSON number."""


def _base64(n_bytes: int) -> str:
    """A standard base64 text of exactly ``n_bytes`` bytes (padded), as a regex."""
    length = -(-n_bytes // 3) * 4
    pad = length // 4 * 3 - n_bytes
    return f"[A-Za-z0-9+/]{{{length - pad}}}={{{pad}}}"


def payload_mechanism(spec: MetricSpec) -> Mechanism | NumericMechanism | PrefixSketch:
    """The mechanism whose ``parse_payload`` judges ``spec``'s payloads: the frequency oracle
    of a kind with one (a set's over its k + L items), else the kind's randomizer."""
    return spec.frequency_oracle or spec.report_randomizer


def valid_payload_sql(spec: MetricSpec) -> str:
    """A DuckDB condition true exactly for the stored payloads ``spec``'s mechanism accepts
    (in the canonical form the collector stores), bar an OUE payload's bits past k, which
    the kernel checks: every value in range, so no payload is counted as another (a krr
    ``-1`` would otherwise index the last category)."""
    mechanism = payload_mechanism(spec)

    def within(key: str, low: int, high: int) -> str:
        value = f"TRY_CAST(json_extract(payload, '$.{key}') AS BIGINT)"
        return f"{value} BETWEEN {low} AND {high}"

    if isinstance(mechanism, PrefixSketch):
        shape = f'[{{]"b":"{_base64(mechanism.n_bytes)}","l":{INTEGER},"r":{INTEGER}[}}]'
        ranges = [within("l", 1, mechanism.levels), within("r", 0, mechanism.rows - 1)]
    elif isinstance(mechanism, NumericMechanism):
        value, bound = "abs(TRY_CAST(payload AS DOUBLE))", float(mechanism.bound)
        exact = isinstance(mechanism, Duchi) or (
            isinstance(mechanism, Hybrid) and mechanism.pm_probability == 0.0
        )
        check = f"abs({value} - {bound!r})" if exact else value
        limit = 1e-9 * bound if exact else bound * (1 + 1e-9)
        shape, ranges = NUMBER, [f"isfinite({value}) AND {check} <= {limit!r}"]
    elif isinstance(mechanism, OLH):
        shape = f'[{{]"a":{INTEGER},"b":{INTEGER},"y":{INTEGER}[}}]'
        ranges = [
            within("a", 1, OLH_PRIME - 1),
            within("b", 0, OLH_PRIME - 1),
            within("y", 0, mechanism.g - 1),
        ]
    elif isinstance(mechanism, OUE):
        shape, ranges = f'"{_base64(mechanism.n_bytes)}"', []
    elif isinstance(mechanism, KRR):
        shape, ranges = INTEGER, [f"TRY_CAST(payload AS BIGINT) < {mechanism.k}"]
    else:
        raise InvalidInput(f"no archive counts for mechanism {spec.mechanism}")
    condition = " AND ".join([f"regexp_full_match(payload, {_quote(shape)})", *ranges])
    return f"coalesce({condition}, false)"


class _BitsPastK(Exception):
    """An OUE payload sets bits past k (found by the kernel; the file is then scanned in
    Python to name the row)."""


def _invalid(mechanism: Any, text: str) -> str | None:
    """Why the stored payload ``text`` is not one ``mechanism`` accepts (None if it is)."""
    try:
        mechanism.parse_payload(json.loads(text))
    except (ValueError, TypeError, RecursionError) as exc:
        return str(exc) if isinstance(exc, ValueError) else "not a JSON text"
    return None


def _refuse(path: str, row: int, text: str, reason: str | None) -> ArchiveCorrupt:
    shown = text if len(text) <= 60 else text[:57] + "..."
    because = reason or "not in the form the collector stores"
    return ArchiveCorrupt(
        f"{path}: row {row + 1:,} holds a payload no device sends ({shown!r}: {because});"
        " the archive was altered or is not this metric's"
    )


def check_payloads(connection: Any, source: str, spec: MetricSpec, path: str) -> None:
    """Raise :class:`ArchiveCorrupt` naming the file and the first row whose payload
    ``spec``'s mechanism refuses (one DuckDB scan; nothing is counted before it passes)."""
    found = connection.execute(
        f"SELECT file_row_number, payload FROM {source}"
        f" WHERE NOT {valid_payload_sql(spec)} ORDER BY 1 LIMIT 1"
    ).fetchone()
    if found is not None:
        row, text = found
        text = "null" if text is None else text
        raise _refuse(path, int(row), text, _invalid(payload_mechanism(spec), text))


def _first_invalid(fs: Any, spec: MetricSpec, path: str) -> ArchiveCorrupt:
    """The refusal naming the first row of ``path`` its mechanism's ``parse_payload`` refuses
    (a Python scan, run only once a kernel found such a row)."""
    mechanism = payload_mechanism(spec)
    row = 0
    for batch in file_batches(fs, path, ["payload"]):
        for text in batch.column("payload").to_pylist():
            reason = _invalid(mechanism, text)
            if reason is not None:
                return _refuse(path, row, text, reason)
            row += 1
    return ArchiveCorrupt(f"{path} holds a payload no device sends")


_INTEGER = re.compile(INTEGER)
QUOTE = ord('"')


def _krr_payload(text: str | None, k: int) -> bool:
    """Whether a stored krr payload is one the collector stores (:func:`valid_payload_sql`'s
    condition, checked once per distinct payload of a file)."""
    return text is not None and _INTEGER.fullmatch(text) is not None and int(text) < k


def _quoted_text(array: Any) -> np.ndarray:
    """The (m, length) ASCII codes inside the quotes of an Arrow string array of JSON strings
    written without escapes (an oue payload as stored); InvalidInput if one is not."""
    if array.null_count:
        raise InvalidInput("an archived payload is null")
    text = _text_column(array)
    if len(text) == 0:
        return text
    if text.shape[1] < 2 or (text[:, 0] != QUOTE).any() or (text[:, -1] != QUOTE).any():
        raise InvalidInput("an archived oue payload is not a JSON string")
    return text[:, 1:-1]


def _named_refusal(url: str, fs: Any, spec: MetricSpec, path: str) -> ArchiveCorrupt:
    """The refusal naming the first row of ``path`` whose payload ``spec``'s mechanism
    refuses, once the counting scan found there is one (:func:`check_payloads` on a
    connection of its own, then the Python scan for an oue payload's bits past k)."""
    connection, name = _connect(url)
    try:
        numbered = f"read_parquet({_quote(name(path))}, file_row_number=true)"
        check_payloads(connection, numbered, spec, path)
    except ArchiveCorrupt as exc:
        return exc
    finally:
        connection.close()
    return _first_invalid(fs, spec, path)


SUPPORT_CELLS = 1 << 22
"""Reports times categories decoded at once (the support matrix of a batch stays ~4 MB)."""


def _batch_counts(spec: MetricSpec, batch: Any) -> dict[str, tuple[int, np.ndarray]]:
    """An Arrow batch's reports and counts, by its ``cell_key`` column's values (a text
    metric's: its sketch counts per cell, each cell a whole sketch; the spec bounds cells ×
    sketch counts)."""
    names, codes = _cell_codes(batch.column("cell_key"))
    if isinstance(spec, TextSpec):
        sketch = spec.text_randomizer
        width = spec.count_width
        bits = oue_bits(_text_column(batch.column("bits")), sketch.cells)
        levels = batch.column("l").to_numpy().astype(np.int64)
        rows = batch.column("r").to_numpy().astype(np.int64)
        base = ((levels - 1) * sketch.rows + rows) * sketch.cells
        tally = sketch.levels * sketch.rows * sketch.cells + (levels - 1) * sketch.rows + rows
        code = codes * width
        report, cell = np.nonzero(bits)
        size = len(names) * width
        counts = np.bincount(code[report] + base[report] + cell, minlength=size)
        counts += np.bincount(code + tally, minlength=size)
        shaped = counts.astype(np.int64).reshape(len(names), width)
        reports = np.bincount(code // width, minlength=len(names))
        return {name: (int(reports[j]), shaped[j]) for j, name in enumerate(names)}
    mechanism = spec.randomizer
    if isinstance(mechanism, OUE):
        support = oue_bits(_quoted_text(batch.column("payload")), 8 * mechanism.n_bytes)
        if support[:, mechanism.k :].any():
            raise _BitsPastK
        support = support[:, : mechanism.k]
    elif isinstance(mechanism, OLH):
        columns = [batch.column(c).to_numpy().astype(np.int64) for c in ("a", "b", "y")]
        support = olh_support(mechanism, *columns)
    else:
        raise TypeError(f"no kernel for {spec.mechanism}")
    if len(names) == 1:
        return {names[0]: (len(codes), support.sum(axis=0, dtype=np.int64))}
    return {
        name: (int((codes == j).sum()), support[codes == j].sum(axis=0, dtype=np.int64))
        for j, name in enumerate(names)
    }


def _cell_codes(column: Any) -> tuple[list[str], np.ndarray]:
    """A batch's cells: the distinct values of its ``cell_key`` column and each row's index
    into them (Arrow's dictionary encoding: no Python string per row)."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column)
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy().astype(np.int64)


def _projection(spec: MetricSpec) -> str:
    """The DuckDB select list decoding a file's payloads for the kernels."""
    if isinstance(spec, TextSpec):
        return (
            "json_extract_string(payload, '$.b') AS bits,"
            " CAST(json_extract(payload, '$.l') AS BIGINT) AS l,"
            " CAST(json_extract(payload, '$.r') AS BIGINT) AS r"
        )
    if spec.mechanism == "oue":
        return "payload"
    return ", ".join(f"CAST(json_extract(payload, '$.{c}') AS BIGINT) AS {c}" for c in "aby")


def _has_cell(fs: Any, path: str) -> bool:
    """Whether the archive file ``path`` has a ``cell`` column (its Parquet footer alone)."""
    with parquet_file(fs, path) as file:
        return "cell" in file.schema_arrow.names


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def file_counts(
    url: str,
    spec: MetricSpec,
    period: str,
    path: str,
    by_cell: bool = False,
    connected: tuple[Any, Callable[[str], str]] | None = None,
    scanned: Scanned | None = None,
) -> FileCounts:
    """The counts of one archived file (one metric and period), per cell too if asked and the
    file has cells, on ``connected`` (:func:`_connect`'s connection and path namer), else on a
    DuckDB connection of its own (so Dask workers can call it). ``scanned``: a brr/krr file's
    groups as :func:`_scan_groups` found them, used instead of a scan of its own.

    The file is checked against its manifest (rows and checksum, when it has one): a brr/krr
    file's groups checksum on the groups counted, else in a thread beside the count; and its
    payloads
    against the metric's mechanism: :class:`.archivefiles.ArchiveCorrupt`, naming the file
    and the row, rather than a count altered by a crafted row."""
    fs, _ = open_archive(url)
    connection, name = connected or _connect(url)
    try:
        manifest = read_manifest(fs, path, spec.name, period)
        if manifest is not None and counted_by_groups(spec):
            cells = by_cell and (scanned.cells if scanned is not None else _has_cell(fs, path))
            key = CELL_GROUPS_KEY if cells else GROUPS_KEY
            if key in manifest.checksums:
                try:
                    counted = _reduce(
                        url, fs, (connection, name), spec, period, path, cells, scanned
                    )
                except BaseException:
                    verify_manifest(fs, path, manifest)  # a file not its manifest's first
                    raise
                groups = scanned.groups if scanned is not None else _groups(counted)
                check_manifest(path, manifest, key, counted.whole.n, groups_checksum(groups))
                return counted
        with ThreadPoolExecutor(1) as checker:
            verified = checker.submit(verify_manifest, fs, path, manifest) if manifest else None
            try:
                counted = _reduce(url, fs, (connection, name), spec, period, path, by_cell, scanned)
            except BaseException:
                if verified is not None:
                    verified.result()  # a file that is not its manifest's is named first
                raise
            if verified is not None:
                verified.result()
        counted.verified = manifest is not None
        return counted
    finally:
        if connected is None:
            connection.close()


def _groups(counted: FileCounts) -> list[tuple[str, str, int]]:
    """A brr/krr file's (cell, payload, rows) groups from its counts: its payloads are the
    category indices its scan checked, written as the collector stores them."""
    parts = counted.cells.items() if counted.cells else [("", counted.whole)]
    return [
        (cell, str(index), int(counts.support[index]))
        for cell, counts in parts
        if counts.support is not None
        for index in np.flatnonzero(counts.support).tolist()
    ]


def _checked_while_counted(spec: MetricSpec) -> bool:
    """Whether ``spec``'s payloads are checked by the scan that counts them (krr: each
    distinct payload; oue: by the kernel), not by a scan of their own first."""
    return isinstance(spec.frequency_oracle, KRR) or (
        not isinstance(spec, TextSpec) and spec.mechanism == "oue"
    )


def _reduce(
    url: str,
    fs: Any,
    connected: tuple[Any, Callable[[str], str]],
    spec: MetricSpec,
    period: str,
    path: str,
    by_cell: bool,
    scanned: Scanned | None = None,
) -> FileCounts:
    """The counts of one file (:func:`file_counts`, its manifest checked beside it)."""
    connection, name = connected
    source = f"read_parquet({_quote(name(path))})"
    if not _checked_while_counted(spec):
        numbered = f"read_parquet({_quote(name(path))}, file_row_number=true)"
        check_payloads(connection, numbered, spec, path)
    cells = by_cell and (scanned.cells if scanned is not None else _has_cell(fs, path))
    key = "cell" if cells else "''"
    result = FileCounts(period, CellCounts())
    groups: dict[str, CellCounts] = {}
    if isinstance(spec, NumericSpec):
        rows = connection.execute(
            f"SELECT {key}, count(*), sum(CAST(payload AS DOUBLE)),"
            f" sum(CAST(payload AS DOUBLE) * CAST(payload AS DOUBLE))"
            f" FROM {source} GROUP BY 1"
        ).fetchall()
        for cell, n, total, squares in rows:
            groups[cell] = CellCounts(int(n), None, float(total), float(squares))
    elif isinstance(spec.frequency_oracle, KRR):
        if scanned is None:
            rows = connection.execute(
                f"SELECT {key}, payload, count(*) FROM {source} GROUP BY 1, 2"
            ).fetchall()
        else:
            rows = [(cell if cells else "", text, n) for cell, text, n in scanned.groups]
        k = spec.frequency_oracle.k
        if not all(_krr_payload(text, k) for text in {row[1] for row in rows}):
            raise _named_refusal(url, fs, spec, path)
        supports: dict[str, list[int]] = {}
        for cell, text, n in rows:
            support = supports.get(cell)
            if support is None:
                support = supports[cell] = [0] * spec.count_width
            support[int(text)] += n
        for cell, support in supports.items():
            counts = np.array(support, dtype=np.int64)
            groups[cell] = CellCounts(int(counts.sum()), counts)
    else:
        width = spec.count_width
        batch_rows = max(1024, SUPPORT_CELLS // width)
        relation = connection.sql(f"SELECT {key} AS cell_key, {_projection(spec)} FROM {source}")
        reader = (
            relation.to_arrow_reader(batch_rows)
            if hasattr(relation, "to_arrow_reader")
            else relation.record_batch(batch_rows)
        )
        try:
            for batch in reader:
                for cell, (n, counts_of) in _batch_counts(spec, batch).items():
                    counts = groups.setdefault(cell, CellCounts(0, np.zeros(width, dtype=np.int64)))
                    counts.n += n
                    counts.support += counts_of
        except (_BitsPastK, InvalidInput):
            raise _named_refusal(url, fs, spec, path) from None
    for cell, counts in sorted(groups.items()):
        result.whole.add(counts)
        if cells:
            result.cells[cell] = counts
    if result.whole.support is None and not isinstance(spec, NumericSpec):
        result.whole.support = np.zeros(spec.count_width, dtype=np.int64)
    return result


def archive_counts(
    url: str, spec: MetricSpec, periods: Sequence[str], by_cell: bool = False
) -> list[FileCounts]:
    """The counts of each archived file of ``spec``'s metric among ``periods`` (DuckDB, one
    file after the other, on one connection); periods without a file are absent."""
    if spec.mechanism not in (*NUMERIC_MECHANISMS, "brr", "krr", "oue", "olh", "pem"):
        raise InvalidInput(f"no archive counts for mechanism {spec.mechanism}")
    connected = _connect(url)
    try:
        files = archive_files(url, spec.name, periods)
        scans = _scan_groups(url, connected, [path for _, path in files], spec, by_cell)
        return [
            file_counts(url, spec, period, path, by_cell, connected, scans.get(path))
            for period, path in files
        ]
    finally:
        connected[0].close()


def _scan_groups(
    url: str,
    connected: tuple[Any, Callable[[str], str]],
    paths: Sequence[str],
    spec: MetricSpec,
    by_cell: bool,
) -> dict[str, Scanned]:
    """Each brr/krr file's groups from one DuckDB scan of all ``paths`` (one query in
    parallel over every file, where a query per file paid its set-up each time): per
    (cell, payload) for a breakdown, else per payload (the cells not read). Empty for other
    metrics, and when the scan fails or a file has a null cell: each file is then scanned on
    its own, which names it."""
    import duckdb

    if not counted_by_groups(spec) or not paths:
        return {}
    fs, _ = open_archive(url)
    connection, name = connected
    named = {name(path): path for path in paths}
    with_cells = {path for path in paths if by_cell and _has_cell(fs, path)}
    listed = ", ".join(_quote(file) for file in named)
    cell = "cell" if with_cells else "NULL"
    mixed = ", union_by_name = true" if with_cells and len(with_cells) < len(paths) else ""
    try:
        rows = connection.execute(
            f"SELECT filename, {cell}, payload, count(*) FROM read_parquet([{listed}],"
            f" filename = true{mixed}) GROUP BY ALL"
        ).fetchall()
    except duckdb.Error:
        return {}
    found = {path: Scanned(path in with_cells, []) for path in paths}
    for file, cell_text, payload, n in rows:
        path = named[file]
        if (cell_text is None) == (path in with_cells):
            return {}
        found[path].groups.append((cell_text or "", payload, int(n)))
    return found
