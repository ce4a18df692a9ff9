"""The collector's tables: metric registry, raw reports, and the counts estimates read.

Raw reports hold no IP address and no header: only the report's own fields and the day it
arrived. ``period_counts``, ``support_counts`` (``cell_counts`` instead for a metric with
dimensions) and (numeric metrics) ``numeric_sums`` are kept up to date in the same transaction
as the report inserts, so an estimate reads at most k counts, or one row of sums, per period
(a metric with dimensions: one packed row per cell and period; a text metric: one packed row
per cell, period and sketch row, ``text_cell_counts``).

A report id is stored as its 16 bytes (SQLite) or a native ``uuid`` (PostgreSQL), not as 36
characters of text: the two indexes every insert updates at a random place are then much
narrower, and that is most of what an insert costs SQLite.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np
from sqlalchemy import (
    BigInteger,
    Column,
    Date,
    DateTime,
    Dialect,
    Double,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import GenericFunction
from sqlalchemy.types import TypeEngine

from ..schemas import DESCRIPTION_MAX, OWNER_MAX, UNIT_MAX

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = MetaData(naming_convention=NAMING)


def id_bytes(report_id: str) -> bytes:
    """The 16 bytes of a report id given in canonical UUID text (validated at the API)."""
    return bytes.fromhex(report_id.replace("-", ""))


def id_text(raw: bytes) -> str:
    """The canonical UUID text (lowercase, hyphenated) of a report id's 16 bytes."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class ReportId(TypeDecorator[str]):
    """A report id: canonical UUID text in Python; 16 bytes on SQLite, ``uuid`` on PostgreSQL."""

    impl = LargeBinary(16)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.UUID(as_uuid=False))
        return dialect.type_descriptor(LargeBinary(16))

    def process_bind_param(self, value: str | None, dialect: Dialect) -> Any:
        if value is None or dialect.name == "postgresql":
            return value
        return id_bytes(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        if value is None or dialect.name == "postgresql":
            return value
        return id_text(value)


COUNT_BYTES = np.dtype("<i8")
"""How packed counts are laid out: little-endian signed 64-bit integers, one per category."""


def pack_counts(counts: np.ndarray) -> bytes:
    """``counts`` (int64 per category) as the bytes SQLite stores."""
    return np.ascontiguousarray(counts, dtype=COUNT_BYTES).tobytes()


def unpack_counts(raw: bytes | None) -> np.ndarray:
    """The int64 counts of packed bytes (empty for None or no bytes)."""
    return np.frombuffer(raw or b"", dtype=COUNT_BYTES).astype(np.int64)


def add_packed(first: bytes | None, second: bytes | None) -> bytes:
    """Two packed count vectors added category by category, the shorter one read as zeros
    past its end (ingestion adds a group's counts to the stored ones, :mod:`.packedsums`;
    also SQL's ``deniable_add_counts`` on SQLite connections)."""
    if first and second and len(first) == len(second):
        added = np.frombuffer(first, dtype=COUNT_BYTES) + np.frombuffer(second, dtype=COUNT_BYTES)
        return added.tobytes()
    a, b = unpack_counts(first), unpack_counts(second)
    if len(a) < len(b):
        a, b = b, a
    total = a.copy()
    total[: len(b)] += b
    return pack_counts(total)


ADD_PACKED_SQL = "deniable_add_counts"
"""The SQL name of :func:`add_packed`, registered on every SQLite connection (engine)."""


COUNT_DIGITS = 13
"""PostgreSQL packs a vector of counts into one ``numeric``: count v in the decimal digits
13 v to 13 v + 12 counted from the right, so adding two packed vectors is one numeric
addition, done in C (the cell upsert adds a batch's counts in place), and categories past
the end read as 0. No count carries into its neighbour: a count is at most its row's n,
which a CHECK keeps below 10^13 (migration 0013); 13 digits x 10,000 categories
(MAX_CATEGORIES) fit numeric's 131,072."""

COUNT_LIMIT = 10**COUNT_DIGITS
"""The most reports one ``cell_counts`` row may count (exclusive): see :data:`COUNT_DIGITS`."""

_DIGIT_WEIGHTS = 10 ** np.arange(COUNT_DIGITS - 1, -1, -1, dtype=np.int64)
_FOUR_DIGITS = np.frombuffer("".join(f"{i:04d}" for i in range(10_000)).encode(), np.uint8)
_FOUR_DIGITS = _FOUR_DIGITS.reshape(10_000, 4)


def decimal_counts(vectors: Sequence[np.ndarray]) -> list[str]:
    """Each vector of counts (non-negative, below :data:`COUNT_LIMIT`) as the decimal text
    of its packed ``numeric`` (:data:`COUNT_DIGITS`); vectors of one length are written
    together, digit by digit over the whole stack."""
    texts: list[str] = [""] * len(vectors)
    by_width: dict[int, list[int]] = {}
    for i, vector in enumerate(vectors):
        by_width.setdefault(len(vector), []).append(i)
    for width, where in by_width.items():
        if width == 0:
            for i in where:
                texts[i] = "0"
            continue
        counts = np.stack([vectors[i] for i in where]).astype(np.int64)[:, ::-1]
        digits = np.empty((len(where), width, COUNT_DIGITS), dtype=np.uint8)
        if counts.max() < 10_000:  # a group's increments, mostly: no division at all
            digits[:, :, : COUNT_DIGITS - 4] = 48
            digits[:, :, COUNT_DIGITS - 4 :] = _FOUR_DIGITS[counts]
        else:
            digits[:, :, 0] = counts // 10 ** (COUNT_DIGITS - 1) + 48
            for place in (1, 5, 9):  # the other twelve digits, four at a time
                group = counts // 10 ** (COUNT_DIGITS - 4 - place) % 10_000
                digits[:, :, place : place + 4] = _FOUR_DIGITS[group]
        rows = digits.reshape(len(where), width * COUNT_DIGITS)
        for i, row in zip(where, rows, strict=True):
            texts[i] = row.tobytes().decode("ascii")
    return texts


_NUMERIC_HEADER = struct.Struct(">hhHh")
"""A binary ``numeric``'s header: its base-10,000 digits, the first one's weight, sign, scale."""


def binary_counts(vectors: Sequence[np.ndarray]) -> list[bytes]:
    """Each vector of counts (non-negative, below :data:`COUNT_LIMIT`) as its packed
    ``numeric`` (the value :func:`decimal_counts` writes) in PostgreSQL's binary format:
    base-10,000 digits, most significant first, after their header. The server then parses
    no text, and the writer joins none (:mod:`.pgnumeric` sends them).

    Four counts take 52 decimal digits, exactly 13 base-10,000 ones, so each block of four is
    made alone: count i of a block times 10^i has at most four such digits, starting at the
    block's digit 3i, and the sums carry within the block. Vectors of one length are made
    together, digit by digit over the stack. Counts below 10,000 (a group's or a fold's
    increments, mostly) need no carry: count i times 10^i is below 10^8, two digits that
    no other count of the block shares (:func:`_small_block_digits`).
    """
    packed = [_NUMERIC_HEADER.pack(0, 0, 0, 0)] * len(vectors)
    by_width: dict[int, list[int]] = {}
    for i, vector in enumerate(vectors):
        by_width.setdefault(len(vector), []).append(i)
    for width, where in by_width.items():
        if not width:
            continue
        stacked = np.stack([vectors[i] for i in where])
        small = int(stacked.max(initial=0)) < 10_000
        rows, blocks = len(where), -(-width // 4)
        counts = np.zeros((rows, blocks * 4), dtype=np.int32 if small else np.int64)
        counts[:, :width] = stacked
        # digits[:, b, j]: block b's digit j, both counted from the most significant
        digits = np.zeros((rows, blocks, 13), dtype=">i2")
        (_small_block_digits if small else _block_digits)(counts, digits[:, ::-1, ::-1])
        header = _NUMERIC_HEADER.pack(blocks * 13, blocks * 13 - 1, 0, 0)
        for i, row in zip(where, digits.reshape(rows, blocks * 13), strict=True):
            packed[i] = header + row.tobytes()
    return packed


def _small_block_digits(counts: np.ndarray, digits: np.ndarray) -> None:
    """Write into ``digits`` (rows, blocks, 13: each block's base-10,000 digits, least
    significant first) those of ``counts`` (rows, blocks × 4), each below 10,000, as
    :func:`binary_counts` packs them: count i of a block times 10^i, below 10^8, is the
    block's digits 3i and 3i + 1, which no other count of the block shares."""
    for i in range(4):
        high, low = np.divmod(counts[:, i::4] * np.int32(10**i), np.int32(10_000))
        digits[:, :, 3 * i] = low
        digits[:, :, 3 * i + 1] = high


def _block_digits(counts: np.ndarray, digits: np.ndarray) -> None:
    """:func:`_small_block_digits` for counts below :data:`COUNT_LIMIT`: each count's four
    digits added at its place, then carried within its block."""
    summed = np.zeros((14, *digits.shape[:2]), dtype=np.int64)
    for i in range(4):
        shifted = counts[:, i::4] * 10**i
        for d in range(4):
            part = shifted // 10 ** (4 * d) if d else shifted
            summed[3 * i + d] += part % 10_000 if d < 3 else part
    for d in range(13):
        carry = summed[d] // 10_000
        summed[d + 1] += carry
        summed[d] -= carry * 10_000
    digits[...] = summed[:13].transpose(1, 2, 0)


def counts_of_decimal(text: str) -> np.ndarray:
    """The int64 counts of a packed ``numeric``'s decimal text (:func:`decimal_counts`; a
    fraction, all zeros, is left out)."""
    text = text.partition(".")[0]
    width = -(-len(text) // COUNT_DIGITS)
    digits = np.frombuffer(text.zfill(width * COUNT_DIGITS).encode("ascii"), dtype=np.uint8)
    counts = (digits.reshape(width, COUNT_DIGITS).astype(np.int64) - 48) @ _DIGIT_WEIGHTS
    return counts[::-1].copy()


class packed_text(GenericFunction[Any]):
    """A packed counts column as the driver should read it: its decimal text on PostgreSQL
    (no ``Decimal`` of a 1,300-digit number is made only to be printed again), the column
    itself elsewhere."""

    inherit_cache = True
    name = "deniable_packed_text"


@compiles(packed_text)
def _packed_as_stored(element: packed_text, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


@compiles(packed_text, "postgresql")
def _packed_as_text(element: packed_text, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS TEXT)"


class PackedCounts(TypeDecorator[np.ndarray]):
    """A vector of counts per category: an int64 numpy array in Python; packed little-endian
    bytes on SQLite (:func:`pack_counts`), one ``numeric`` on PostgreSQL
    (:data:`COUNT_DIGITS`)."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Numeric(asdecimal=True))
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return Decimal(decimal_counts([np.asarray(value, dtype=np.int64)])[0])
        return pack_counts(np.asarray(value))

    def column_expression(self, column: Any) -> Any:
        return packed_text(column, type_=_PackedRead())

    def process_result_value(self, value: Any, dialect: Dialect) -> np.ndarray | None:
        return _unpacked(value, dialect)


class _PackedRead(TypeDecorator[np.ndarray]):
    """How :class:`PackedCounts` is read (through :class:`packed_text`): packed bytes on
    SQLite, the decimal text of the ``numeric`` on PostgreSQL."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Text())
        return dialect.type_descriptor(LargeBinary())

    def process_result_value(self, value: Any, dialect: Dialect) -> np.ndarray | None:
        return _unpacked(value, dialect)


def _unpacked(value: Any, dialect: Dialect) -> np.ndarray | None:
    """The counts of a packed value as the driver returned it (None stays None)."""
    if value is None:
        return None
    if dialect.name == "postgresql":
        return counts_of_decimal(value if isinstance(value, str) else format(value, "f"))
    return unpack_counts(value)


def per_period_table(name: str, *columns: Column[Any]) -> Table:
    """A per-period counts table: keyed by (metric, period), then its own ``columns``."""
    return Table(
        name,
        metadata,
        Column("metric", String(64), primary_key=True),
        Column("period", String(10), primary_key=True),
        *columns,
    )


def numeric_sums_columns() -> tuple[Column[Any], Column[Any], Column[Any]]:
    """The columns ``numeric_sums`` and ``cell_counts`` share: n reports and the sums of their
    payloads y and of y^2 (a numeric metric's mean and its interval), made anew for each table."""
    return (
        Column("n", BigInteger, nullable=False),
        Column("total", Double, nullable=False),
        Column("total_squares", Double, nullable=False),
    )


metrics = Table(
    "metrics",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("spec", Text, nullable=False),
    Column("fingerprint", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("archived_at", DateTime(timezone=True), nullable=True),
    Column("unit", String(UNIT_MAX), nullable=True),
    Column("description", String(DESCRIPTION_MAX), nullable=True),
    Column("owner", String(OWNER_MAX), nullable=True),
)
"""One row per registered metric; ``spec`` is the canonical JSON of the resolved spec.

``archived_at`` is set when an admin archives the metric: it then takes no more reports and
leaves the served list, but its reports stay (until retention) and its estimates readable.
``unit``, ``description`` and ``owner`` say what the metric is to people (each null if not
given); they are beside the spec, not in it nor in its fingerprint, so they can change."""

reports = Table(
    "reports",
    metadata,
    Column("id", ReportId, nullable=False),
    Column("metric", String(64), nullable=False),
    Column("period", String(10), nullable=False),
    Column("payload", Text, nullable=False),
    Column("received", Date, nullable=False),
    Column("cell", String(300), nullable=False, server_default=""),
    PrimaryKeyConstraint("metric", "period", "id"),
    sqlite_with_rowid=False,
    postgresql_partition_by="LIST (period)",
)
"""Raw randomized reports, append-only, unique by (metric, period, id) (the idempotency key).

The key is the one index: a new report lands in its own period's part of it, so a day's
ingestion touches that day's pages, not pages all over an index of every stored id (on
SQLite the table is the key's B-tree, ``WITHOUT ROWID``). Export pages walk a period in id
order through it: a seek per page, never a sort, and an order that says nothing about when
or with what a report arrived. ``cell`` is the report's dimension values as its metric's
``cell_counts`` key them (``""``: a metric without dimensions, or a report stored before
migration 0008), so an export can still break the reports down.

On PostgreSQL the table is partitioned by period label, one partition per label
(:mod:`.partitions`, migration 0010): the key includes the partition key, retention drops
whole partitions, and a statement bounded to some periods reads only their partitions.
"""

period_counts = per_period_table("period_counts", Column("n", BigInteger, nullable=False))
"""How many distinct reports each (metric, period) has received."""

support_counts = per_period_table(
    "support_counts",
    Column("category", Integer, primary_key=True, autoincrement=False),
    Column("support", BigInteger, nullable=False),
)
"""C_v: how many reports of (metric, period) support category v (absent rows are 0)."""

numeric_sums = per_period_table("numeric_sums", *numeric_sums_columns())
"""A numeric metric's sufficient statistics per period: n reports, the sum of their payloads y
and the sum of y^2 (on the mechanism's [-1, 1] axis), so a mean and its interval read one row
per period. Numeric reports also count in ``period_counts``, like every report."""

cell_counts = per_period_table(
    "cell_counts",
    Column("cell", String(300), primary_key=True),
    *numeric_sums_columns(),
    Column("support", PackedCounts, nullable=False),
)
"""A metric with dimensions: how many reports each cell (its dimension values in name order,
joined by commas: ``ios,2.1``) received per period, its support per category packed in one
value (``support[v]`` = C_v; categories past the end count 0; empty for a numeric metric;
on PostgreSQL one ``numeric``, :data:`COUNT_DIGITS`, with n kept below :data:`COUNT_LIMIT`)
and for a numeric metric their sums of y and y^2 (0 for the others). One row per (metric,
period, cell), its counts added in place, so a batch writes one row per cell it touches,
not one per cell and category. Any breakdown is a sum of cells, and so are the metric's
support totals: it has no ``support_counts`` rows (its reports still count in
``period_counts`` and ``numeric_sums``). A metric without dimensions has no rows here: its one
cell is the whole of ``period_counts``, ``support_counts`` and ``numeric_sums``."""

text_cell_counts = per_period_table(
    "text_cell_counts",
    Column("cell", String(300), primary_key=True),
    Column("chunk", Integer, primary_key=True, autoincrement=False),
    Column("counts", PackedCounts, nullable=False),
)
"""A text metric's sketch counts per (period, cell), one row per sketch row
(``chunk`` = (level - 1) × 16 + row) its reports touched, packed like ``cell_counts.support``:
the row's 1,024 cell sums, then its report tally (1,025 counts, 8 KB). A report adds to
exactly one such row, whatever its eps (its set bits all lie in its (level, row)), so a group
rewrites 8 KB per (cell, level, row) it touches, not a whole sketch per cell (1 MB at 8 bytes)
nor a row per set bit (277 at eps 1). A cell's n is the sum of its tallies. A metric without
dimensions has the one cell ``""`` (migration 0017; before, it kept a ``support_counts`` row
per nonzero count). A text metric keeps no ``support_counts`` and no ``cell_counts`` rows
(its totals are the sum of its cells); its reports still count in ``period_counts``.
Migration 0011."""

text_pending = Table(
    "text_pending",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("metric", String(64), nullable=False),
    Column("period", String(10), nullable=False),
    Column("cell", String(300), nullable=False),
    Column("reports", Integer, nullable=False),
    Column("chunks", LargeBinary, nullable=False),
    Column("payloads", LargeBinary, nullable=False),
    Index("ix_text_pending_metric_period_cell", "metric", "period", "cell"),
)
"""A text metric's reports not yet added to ``text_cell_counts`` (migration 0019): one row per
(metric, period, cell) a committed group stored new reports in, holding their ``reports``
count, each one's sketch row (``chunks``: little-endian 16-bit, one per report) and its bits
as received (``payloads``: each report's base64 ``"b"`` text, all of one width, joined).
Ingestion appends these rows instead of rewriting each touched 8 KB sketch row per group; a
fold (:mod:`.textbacklog`) adds a (metric, period, cell)'s rows into its counts and deletes
them in one transaction, and every read adds the rows still here, so an estimate is the same
before and after a fold. A collector folds a (metric, period, cell) soon after its own appends
there reach :data:`.textbacklog.FOLD_FACTOR` reports per sketch row, every backlog when it starts,
and retention folds the periods it drops: the rows here stay a fraction of the counts'."""

shuffled_batches = Table(
    "shuffled_batches",
    metadata,
    Column("batch", String(32), primary_key=True),
    Column("metric", String(64), nullable=False),
    Column("mechanism", String(16), nullable=False),
    Column("epsilon", Double, nullable=False),
    Column("fingerprint", String(16), nullable=False),
    Column("n", BigInteger, nullable=False),
    Column("released_at", DateTime(timezone=True), nullable=False),
    Column("parts", Integer, nullable=True),
)
"""One row per batch the shuffler released (``POST /v1/shuffled``), written once by its first
part: its key, the size ``n`` and number of ``parts`` its shuffler stated, and when the
collector first saw it. The stated ``n`` is shown, never believed: the accountant counts the
batch at its parts' ``counted`` (``shuffled_parts``), complete once every part has a row.
``parts`` is null for a batch recorded before migration 0015, which counted nothing: such a
batch is incomplete and counts no device. The batch's reports carry its day as ``received``."""

shuffled_parts = Table(
    "shuffled_parts",
    metadata,
    Column("batch", String(32), primary_key=True),
    Column("part", Integer, primary_key=True),
    Column("refused", BigInteger, nullable=False),
    Column("counted", BigInteger, nullable=False, server_default="0"),
)
"""One row per part of a released batch the collector ingested, written once (a part sent
again changes nothing): how many of its sealed reports it refused (not opened, of another
batch, invalid) and how many distinct reports it ``counted``: those it opened and stored
anew, so a report repeated in the part, in another part or batch, or uploaded before, counts
once, where it first arrived. The accountant counts a batch at the sum of its parts'
``counted``. Rows from before migration 0015 (parts with refusals only) count 0."""

read_versions = Table(
    "read_versions",
    metadata,
    Column("metric", String(64), primary_key=True),
    Column("version", BigInteger, nullable=False),
)
"""How often what a read of each metric sees has changed: every write transaction adds one to
the rows of the metrics it writes (ingestion, registration, archiving, a shuffled batch), or
to the ``""`` row when it does not say which (retention, a shuffled part), in the same
transaction. The read cache (collector/readcache.py) keys a document by its metric's and the
``""`` row's versions, read from the database, so no process serves an answer made before a
commit it can see. The ``""`` row starts at a random number (migration 0014), so a database
dropped and made again never repeats an earlier one's versions."""

ARRIVAL_SLOTS = 60
"""Minutes ``arrivals`` keeps per metric: one row per minute of the last hour, reused."""

arrivals = Table(
    "arrivals",
    metadata,
    Column("metric", String(64), primary_key=True),
    Column("slot", Integer, primary_key=True, autoincrement=False),
    Column("minute", BigInteger, nullable=False),
    Column("n", BigInteger, nullable=False),
    Column("last_at", Double, nullable=False),
)
"""When each metric's reports arrived, for the dashboard's "did my event arrive?": per metric
at most :data:`ARRIVAL_SLOTS` rows, one per minute of the hour (``slot`` = ``minute`` modulo
60), each holding the epoch ``minute`` it counts, the new reports stored in it (``n``) and the
time of its last one (``last_at``, epoch seconds, the collector's clock). A write into a slot
whose ``minute`` is older starts it again, so the table stays bounded with no clean-up: the
reports of the last hour are the slots whose minute is within it, the last report received
the largest ``last_at``. Counts only distinct new reports, as ``period_counts`` does."""
