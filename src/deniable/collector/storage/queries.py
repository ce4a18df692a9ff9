"""Reads and writes of the metric registry, the count reads estimates are made from, and pages
of raw reports for export.

An estimate reads ``period_counts`` and ``support_counts`` only: at most k rows per period,
so its cost does not grow with the number of stored reports; a numeric metric's estimate
reads ``numeric_sums``, one row per period; a metric with dimensions reads ``cell_counts``,
one row per cell and period (its support packed in it); a text metric ``text_cell_counts``,
one row per cell, period and sketch row.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import (
    ColumnElement,
    Connection,
    LargeBinary,
    Select,
    Table,
    bindparam,
    cast,
    func,
    literal,
    null,
    select,
    union_all,
    update,
)

from deniable.client.kinds import NumericSpec, TextSpec
from deniable.client.mechanisms import PrefixSketch
from deniable.client.spec import MetricSpec, canonical_json, registered_specs
from deniable.estimators import PeriodSums
from deniable.estimators.documents import MetricAbout
from deniable.estimators.engine import CellStats

from .driverread import driver_rows
from .engine import Database
from .tables import (
    cell_counts,
    metrics,
    numeric_sums,
    period_counts,
    reports,
    text_cell_counts,
    text_pending,
)
from .textcells import pending_increments


class SpecConflict(Exception):
    """The metric name is registered with a different spec."""

    def __init__(self, existing: MetricSpec) -> None:
        super().__init__(f"metric {existing.name} already exists with another spec")
        self.existing = existing


class MetricArchived(Exception):
    """The metric name belongs to an archived metric: it can never be registered again."""

    def __init__(self, name: str) -> None:
        super().__init__(f"metric {name} is archived")
        self.name = name


UNDESCRIBED = MetricAbout()
"""A metric without unit, description or owner."""


@dataclass(frozen=True)
class Registration:
    """A registered metric's spec, its stored fingerprint, and whether it is archived (then it
    takes no reports). Its unit, description and owner are not here: they may change while
    the spec does not, so they are read fresh (:func:`load_about`), never cached with it."""

    spec: MetricSpec
    fingerprint: str
    archived: bool


_ABOUT = (metrics.c.unit, metrics.c.description, metrics.c.owner)
"""The columns of a metric's :class:`MetricAbout`, in its fields' order."""


def _about_of(row: Any) -> MetricAbout:
    """The :class:`MetricAbout` of a row that selected :data:`_ABOUT`."""
    return MetricAbout(unit=row.unit, description=row.description, owner=row.owner)


class SpecChanged(Exception):
    """The database no longer holds the spec a request was served under: the metrics are not
    registered any more, or registered again with another spec (the database was dropped and
    migrated again underneath a running collector). The names are metric names, never data."""

    def __init__(self, metrics: Sequence[str]) -> None:
        super().__init__(f"the registered spec of {', '.join(metrics)} changed")
        self.metrics = list(metrics)


def spec_from_json(spec_json: str) -> MetricSpec:
    """A stored spec (one registered before a newer cap still reads: :func:`registered_specs`)."""
    with registered_specs():
        return MetricSpec.from_dict(json.loads(spec_json))


def load_registration(database: Database, name: str) -> Registration | None:
    """The metric named ``name``: its spec and whether it is archived; None if unregistered."""
    columns = (metrics.c.spec, metrics.c.fingerprint, metrics.c.archived_at)
    with database.reader.connect() as connection:
        row = connection.execute(select(*columns).where(metrics.c.name == name)).first()
    if row is None:
        return None
    return Registration(spec_from_json(row.spec), row.fingerprint, row.archived_at is not None)


def load_about(database: Database, name: str) -> MetricAbout:
    """The unit, description and owner of the metric ``name`` now (all null if it has none or
    is not registered): one primary-key read, never cached, since they may change while the
    spec does not."""
    with database.reader.connect() as connection:
        row = connection.execute(select(*_ABOUT).where(metrics.c.name == name)).first()
    return UNDESCRIBED if row is None else _about_of(row)


def load_spec(database: Database, name: str) -> MetricSpec | None:
    """The registered spec named ``name`` (archived or not), or None."""
    registration = load_registration(database, name)
    return None if registration is None else registration.spec


def archive_metric(
    database: Database, name: str, now: dt.datetime
) -> tuple[dt.datetime, bool] | None:
    """Archive the metric ``name`` at ``now`` unless it already is: when it was archived and
    whether this call did it; None if no such metric is registered.

    On PostgreSQL the update waits for the ingestion transactions that share-lock the row
    (:func:`check_fingerprints`), so no report is stored after the archive commits.
    """
    archive = (
        update(metrics)
        .where(metrics.c.name == name, metrics.c.archived_at.is_(None))
        .values(archived_at=now)
    )
    with database.writing(changes=[name]) as connection:
        newly = connection.execute(archive).rowcount == 1
        query = select(metrics.c.archived_at).where(metrics.c.name == name)
        archived_at: dt.datetime | None = connection.execute(query).scalar_one_or_none()
    if archived_at is None:
        return None
    if archived_at.tzinfo is None:  # SQLite keeps no time zone; the collector writes UTC
        archived_at = archived_at.replace(tzinfo=dt.UTC)
    return archived_at, newly


def spec_fingerprint(database: Database, name: str) -> str | None:
    """The fingerprint the metric ``name`` is registered with, or None: a cheap check that a
    spec read earlier is still the registered one."""
    with database.reader.connect() as connection:
        query = select(metrics.c.fingerprint).where(metrics.c.name == name)
        return connection.execute(query).scalar_one_or_none()


_REGISTERED_FOR_WRITE = (
    select(metrics.c.name, metrics.c.fingerprint)
    .where(metrics.c.name.in_(bindparam("names", expanding=True)), metrics.c.archived_at.is_(None))
    .order_by(metrics.c.name)
    .with_for_update(read=True)
)
"""The named metrics' fingerprints (archived ones count as unregistered), share-locked on
PostgreSQL (``FOR SHARE``) until the transaction ends; SQLite has no row locks and needs none (see :func:`check_fingerprints`)."""


def check_fingerprints(connection: Connection, expected: Mapping[str, Collection[str]]) -> None:
    """Raise :class:`SpecChanged` unless each metric is registered, not archived, with every
    fingerprint ``expected`` lists for it (more than one means one is stale). One primary-key
    query.

    Run inside the write transaction that stores reports of these metrics: on PostgreSQL the
    metrics' rows then stay share-locked until it commits, so no concurrent re-registration
    (deleting a row, changing it) slips in between this check and the commit; on SQLite the
    transaction holds the database's only write lock (``BEGIN IMMEDIATE``) already.
    """
    if not expected:
        return
    rows = connection.execute(_REGISTERED_FOR_WRITE, {"names": sorted(expected)}).all()
    current = {name: fingerprint for name, fingerprint in rows}
    stale = sorted(
        name
        for name, fingerprints in expected.items()
        if any(fingerprint != current.get(name) for fingerprint in fingerprints)
    )
    if stale:
        raise SpecChanged(stale)


def list_specs(database: Database, *, archived: bool = True) -> list[MetricSpec]:
    """Every registered spec, by name; without the archived ones if ``archived`` is False."""
    query = select(metrics.c.spec).order_by(metrics.c.name)
    if not archived:
        query = query.where(metrics.c.archived_at.is_(None))
    with database.reader.connect() as connection:
        rows = connection.execute(query).all()
    return [spec_from_json(row[0]) for row in rows]


def list_described(
    database: Database, *, archived: bool = True
) -> list[tuple[MetricSpec, MetricAbout]]:
    """Every registered spec with its unit, description and owner, by name; without the
    archived ones if ``archived`` is False."""
    query = select(metrics.c.spec, *_ABOUT).order_by(metrics.c.name)
    if not archived:
        query = query.where(metrics.c.archived_at.is_(None))
    with database.reader.connect() as connection:
        rows = connection.execute(query).all()
    return [(spec_from_json(row.spec), _about_of(row)) for row in rows]


def register_spec(
    database: Database, spec: MetricSpec, now: dt.datetime, about: MetricAbout = UNDESCRIBED
) -> bool:
    """Register ``spec`` described by ``about``; True if it was created, False if the same
    spec already was (its unit, description and owner are then replaced by ``about``'s:
    they are not part of the spec, so describing a metric again changes no fingerprint).

    Raises :class:`MetricArchived` if the name is an archived metric's (whatever its spec),
    else :class:`SpecConflict` if it is taken by a different spec; either way nothing changes.
    """
    described = {key: value for key, value in about.as_dict().items() if value is not None}
    stmt = (
        database.insert(metrics)
        .values(
            name=spec.name,
            spec=canonical_json(spec.fingerprint_fields()),
            fingerprint=spec.fingerprint,
            created_at=now,
            **described,
        )
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(metrics.c.name)
    )
    with database.writing(changes=[spec.name]) as connection:
        if connection.execute(stmt).first() is not None:
            return True
        query = select(metrics.c.spec, metrics.c.archived_at, *_ABOUT)
        row = connection.execute(query.where(metrics.c.name == spec.name)).one()
        if row.archived_at is not None:
            raise MetricArchived(spec.name)
        existing = spec_from_json(row.spec)
        if existing.fingerprint != spec.fingerprint:
            raise SpecConflict(existing)
        if _about_of(row) != about:
            connection.execute(
                update(metrics).where(metrics.c.name == spec.name).values(**about.as_dict())
            )
    return False


def read_counts(
    database: Database, spec: MetricSpec, periods: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """n per period and the (len(periods), k) support counts of ``spec``'s metric (k: its
    :attr:`~deniable.client.spec.MetricSpec.count_width`), for labels
    ``periods`` (sorted).

    Periods without reports get n = 0 and zero counts. Raises :class:`SpecChanged` if the
    metric is no longer registered with ``spec``: counts made under another spec never meet
    this spec's estimator. A metric with dimensions keeps its support in its cells only, so
    its totals are the sum of its cells (one row per cell and period, its k counts packed); a
    text metric its sketch counts by sketch row (:func:`_text_totals`).
    """
    if isinstance(spec, TextSpec):
        return _text_totals(database, spec, periods)
    k = spec.count_width
    n = np.zeros(len(periods), dtype=np.int64)
    counts = np.zeros((len(periods), k), dtype=np.int64)
    if spec.dimensions and not isinstance(spec, NumericSpec):
        for stats in read_cells(database, spec, periods).values():
            n += stats.n
            counts += stats.counts
        return n, counts
    if not periods:
        return n, counts
    n, counts, _ = _supports(database, spec, periods)
    return n, counts


_SUPPORTS = """SELECT m.fingerprint, m.unit, m.description, m.owner, p.period, p.n,
 (SELECT {aggregate}(s.category || ' ' || s.support, ' ') FROM support_counts s
  WHERE s.metric = p.metric AND s.period = p.period) AS supports
FROM metrics m LEFT JOIN period_counts p
 ON p.metric = m.name AND p.period >= :first AND p.period <= :last
WHERE m.name = :name"""
"""A range's counts as one row per period: its n and its supports as one text of
``category support`` pairs, aggregated by the engine (``group_concat`` on SQLite,
``string_agg`` on PostgreSQL), beside the metric's fingerprint and description. One
statement, so one snapshot: two selects under READ COMMITTED could see a commit land between
them and pair an old n with newer support counts, or check the fingerprint before a
re-registration and read the counts after it. Read as one row per (period, category), 9,000
rows of Python tuples made 90 periods cost twice the database's own read."""


@functools.cache
def _supports_statement(dialect: str) -> str:
    """:data:`_SUPPORTS` in ``dialect``'s aggregate (built once per dialect)."""
    aggregate = "string_agg" if dialect == "postgresql" else "group_concat"
    return _SUPPORTS.format(aggregate=aggregate)


def _supports(
    database: Database, spec: MetricSpec, periods: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, MetricAbout]:
    """:func:`read_counts` of a metric without dimensions (``periods`` not empty), and its
    unit, description and owner from the same snapshot."""
    k = spec.count_width
    n = np.zeros(len(periods), dtype=np.int64)
    counts = np.zeros((len(periods), k), dtype=np.int64)
    position = {label: i for i, label in enumerate(periods)}
    statement = _supports_statement(database.dialect)
    arguments = {"first": periods[0], "last": periods[-1], "name": spec.name}
    rows = driver_rows(database.reader, statement, arguments)  # SQLAlchemy's errors as ever
    if not rows or rows[0][0] != spec.fingerprint:
        raise SpecChanged([spec.name])
    places: list[int] = []
    texts: list[str] = []
    for _, _, _, _, period, value, supports in rows:
        i = position.get(period)
        if i is None:
            continue
        n[i] = value
        if supports:
            places.append(i)
            texts.append(supports)
    if texts:  # every period's pairs parsed at once, each placed by its period's position
        pairs = np.fromstring(" ".join(texts), dtype=np.int64, sep=" ").reshape(-1, 2)
        lengths = [(supports.count(" ") + 1) // 2 for supports in texts]
        where = np.repeat(np.asarray(places, dtype=np.intp), lengths)
        kept = (pairs[:, 0] >= 0) & (pairs[:, 0] < k)
        counts[where[kept], pairs[kept, 0]] = pairs[kept, 1]
    first = rows[0]
    return n, counts, MetricAbout(unit=first[1], description=first[2], owner=first[3])


def read_counts_about(
    database: Database, spec: MetricSpec, periods: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, MetricAbout | None]:
    """:func:`read_counts`, and the metric's unit, description and owner when the same
    statement read them (a metric without dimensions; None otherwise): an estimate then makes
    one database round trip for its counts and its description."""
    if spec.dimensions or isinstance(spec, TextSpec) or not periods:
        n, counts = read_counts(database, spec, periods)
        return n, counts, None
    return _supports(database, spec, periods)


READ_CHUNK_ROWS = 64
"""Packed sketch rows a text read holds at once (each 8 KB of counts, 13 KB of decimal text
on PostgreSQL: about 1 MB): the counts it returns are bounded (periods x the sketch, the
estimate cells limit), but a full sketch is 1,024 such rows per period and cell, and a read
holding all its rows at once took several times the counts' own memory (issue 38)."""


def _chunks_of_current_spec(
    database: Database, spec: MetricSpec, query: Any
) -> Iterator[Sequence[Any]]:
    """The rows of ``query`` (as :func:`_rows_of_current_spec`'s), streamed in chunks of
    :data:`READ_CHUNK_ROWS`: :class:`SpecChanged` before the first if the metric is no longer
    registered with ``spec``."""
    with database.reader.connect() as connection:
        streamed = connection.execution_options(stream_results=True, yield_per=READ_CHUNK_ROWS)
        checked = False
        for rows in streamed.execute(query).partitions():
            if not checked:
                if rows[0].fingerprint != spec.fingerprint:
                    raise SpecChanged([spec.name])
                checked = True
            yield rows
        if not checked:
            raise SpecChanged([spec.name])


def read_cells(
    database: Database, spec: MetricSpec, periods: Sequence[str]
) -> dict[str, CellStats]:
    """Each cell's statistics of ``spec`` (a metric with dimensions) over ``periods`` (sorted
    labels), by cell text; a cell without reports is absent.

    One statement (the fingerprint and the cell rows from one snapshot, like
    :func:`read_counts`); :class:`SpecChanged` if the metric is no longer registered with
    ``spec``. It reads one row per cell and period (its support packed in it), at most
    cells × periods rows, bounded by the caller.
    """
    k = spec.count_width
    found: dict[str, CellStats] = {}
    if not periods:
        return found
    position = {label: i for i, label in enumerate(periods)}
    c = cell_counts.c
    query = _beside_fingerprint(
        spec, cell_counts, periods, c.period, c.cell, c.n, c.total, c.total_squares, c.support
    )
    size = len(periods)
    for _, period, cell, n, total, squares, support in _rows_of_current_spec(database, spec, query):
        i = position.get(period)
        if i is None:
            continue
        stats = found.get(cell)
        if stats is None:
            stats = found[cell] = CellStats.empty(size, k)
        stats.n[i], stats.total[i], stats.total_squares[i] = n, total, squares
        width = min(k, len(support))
        stats.counts[i, :width] = support[:width]
    return found


def _chunk_rows(
    database: Database, spec: MetricSpec, periods: Sequence[str]
) -> Iterator[tuple[int, str, int, np.ndarray]]:
    """(period position, cell, chunk, packed counts) of every ``text_cell_counts`` row of
    ``spec`` in ``periods`` (sorted labels), and the same of its reports still in
    ``text_pending`` (:mod:`.textbacklog`), read in one statement beside the fingerprint
    (:class:`SpecChanged` if it is not ``spec``'s), so a fold between two reads changes
    nothing: at most cells × sketch rows per period, and the pending rows a fold would take,
    streamed :data:`READ_CHUNK_ROWS` at a time, so memory stays the caller's counts."""
    c = text_cell_counts.c
    no_bytes = cast(null(), LargeBinary)
    query: Any = _beside_fingerprint(
        spec, text_cell_counts, periods, c.period, c.cell, c.chunk, c.counts, no_bytes, no_bytes
    )
    if database.keeps_table(text_pending.name):
        t = text_pending.c
        query = union_all(
            query,
            select(
                metrics.c.fingerprint,
                t.period,
                t.cell,
                literal(-1),
                cast(null(), c.counts.type),
                t.chunks,
                t.payloads,
            )
            .select_from(metrics.join(text_pending, t.metric == metrics.c.name))
            .where(metrics.c.name == spec.name, t.period >= periods[0], t.period <= periods[-1]),
        )
    position = {label: i for i, label in enumerate(periods)}
    sketch = spec.text_randomizer
    for rows in _chunks_of_current_spec(database, spec, query):
        unfolded = []
        for _, label, cell, chunk, counts, chunks, payloads in rows:
            if label not in position:
                continue
            if chunks is not None:
                unfolded.append((label, cell, bytes(chunks), bytes(payloads)))
            elif counts is not None:
                yield position[label], cell, chunk, counts
        for (_, label, cell, chunk), counts in pending_increments("", sketch, unfolded).items():
            yield position[label], cell, chunk, counts


def _place(sketch: PrefixSketch, into: np.ndarray, chunk: int, counts: np.ndarray) -> None:
    """Add one sketch row's packed counts (its cells, then its tally) into a period's flat
    count vector (:class:`~deniable.client.mechanisms.PrefixSketch`'s indexes)."""
    chunks = sketch.levels * sketch.rows
    if not 0 <= chunk < chunks or len(counts) > sketch.cells + 1:
        return
    full = np.zeros(sketch.cells + 1, dtype=np.int64)
    full[: len(counts)] = counts  # counts past a packed vector's end are 0
    into[chunk * sketch.cells : (chunk + 1) * sketch.cells] += full[:-1]
    into[chunks * sketch.cells + chunk] += full[-1]


def _text_totals(
    database: Database, spec: MetricSpec, periods: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`read_counts` of a text metric: the sum of its cells' sketch counts per period
    (a metric without dimensions has the one cell ``""``), n from its tallies."""
    sketch = spec.text_randomizer
    counts = np.zeros((len(periods), sketch.cell_count), dtype=np.int64)
    if not periods:
        return np.zeros(0, dtype=np.int64), counts
    for i, _, chunk, found in _chunk_rows(database, spec, periods):
        _place(sketch, counts[i], chunk, found)
    tallies = sketch.levels * sketch.rows * sketch.cells
    return counts[:, tallies:].sum(axis=1), counts


def read_text_cells(
    database: Database, spec: MetricSpec, periods: Sequence[str]
) -> dict[str, CellStats]:
    """Each cell's sketch counts of ``spec`` (a text metric with dimensions) over ``periods``
    (sorted labels), by cell text, as :class:`CellStats` whose ``counts`` are the sketch's
    (periods × its count width) and ``n`` the sum of its tallies; a cell without reports is
    absent. One statement (fingerprint and rows from one snapshot), one row per cell, period
    and sketch row: at most cells × periods × the sketch's counts, bounded by the caller."""
    sketch = spec.text_randomizer
    width, size = sketch.cell_count, len(periods)
    found: dict[str, CellStats] = {}
    if not periods:
        return found
    for i, cell, chunk, counts in _chunk_rows(database, spec, periods):
        stats = found.get(cell)
        if stats is None:
            stats = found[cell] = CellStats.empty(size, width)
        _place(sketch, stats.counts[i], chunk, counts)
    tallies = sketch.levels * sketch.rows * sketch.cells
    for stats in found.values():
        stats.n[:] = stats.counts[:, tallies:].sum(axis=1)
    return found


def read_period_reports(database: Database, metric: str, periods: Sequence[str]) -> list[int]:
    """How many reports ``metric`` holds in each of ``periods`` (sorted labels; 0 where none),
    from the per-period totals alone: what an overview of a large metric needs."""
    if not periods:
        return []
    query = select(period_counts.c.period, period_counts.c.n).where(
        (period_counts.c.metric == metric)
        & (period_counts.c.period >= periods[0])
        & (period_counts.c.period <= periods[-1])
    )
    with database.reader.connect() as connection:
        found = {period: n for period, n in connection.execute(query)}
    return [int(found.get(label, 0)) for label in periods]


def _beside_fingerprint(
    spec: MetricSpec, table: Table, periods: Sequence[str], *columns: ColumnElement[Any]
) -> Select[Any]:
    """A select of ``spec``'s registered fingerprint beside ``columns`` of its ``table`` rows
    in ``periods`` (sorted labels, at least one): an outer join, so a metric without such rows
    still gives its fingerprint, and one statement, so both come from one snapshot (for
    :func:`_rows_of_current_spec` to check)."""
    joined = metrics.outerjoin(
        table,
        (table.c.metric == metrics.c.name)
        & (table.c.period >= periods[0])
        & (table.c.period <= periods[-1]),
    )
    return (
        select(metrics.c.fingerprint, *columns)
        .select_from(joined)
        .where(metrics.c.name == spec.name)
    )


def _rows_of_current_spec(database: Database, spec: MetricSpec, query: Any) -> Sequence[Any]:
    """The rows of ``query``, which selects the metric's fingerprint first beside its
    statistics in one statement; :class:`SpecChanged` if the metric is no longer registered
    with ``spec``."""
    with database.reader.connect() as connection:
        rows = connection.execute(query).all()
    if not rows or rows[0].fingerprint != spec.fingerprint:
        raise SpecChanged([spec.name])
    return rows


def read_sums(database: Database, spec: MetricSpec, periods: Sequence[str]) -> list[PeriodSums]:
    """The sums (n, sum of y, sum of y^2) of ``spec``'s numeric metric, one per label of
    ``periods`` (sorted), in that order.

    Like :func:`read_counts`: a period without reports is there with n = 0 and zero sums, and
    :class:`SpecChanged` is raised if the metric is no longer registered with ``spec``. One
    statement, so the fingerprint and the sums come from one snapshot.
    """
    if not periods:
        return []
    c = numeric_sums.c
    query = _beside_fingerprint(
        spec, numeric_sums, periods, c.period, c.n, c.total, c.total_squares
    )
    rows = _rows_of_current_spec(database, spec, query)
    found = {
        row.period: PeriodSums(row.period, int(row.n), float(row.total), float(row.total_squares))
        for row in rows
        if row.period is not None
    }
    return [found.get(label) or PeriodSums(label, 0, 0.0, 0.0) for label in periods]


def read_reports(
    database: Database,
    metric: str,
    *,
    start: str | None,
    end: str | None,
    after: tuple[str, str] | None,
    limit: int,
) -> list[tuple[str, str, str, str]]:
    """Up to ``limit`` raw reports (id, period, payload JSON, cell) of ``metric``, in (period,
    id) order; ``cell`` is the report's stored cell text (``""``: none).

    ``start``/``end`` bound the period labels (None: unbounded); ``after`` is the (period, id)
    of the last report already read. The rest of that period and the later periods are two
    seeks into the (metric, period, id) index, so a page costs the same however deep it is.
    """
    query = select(reports.c.id, reports.c.period, reports.c.payload, reports.c.cell).where(
        reports.c.metric == metric
    )
    if start is not None:
        query = query.where(reports.c.period >= start)
    if end is not None:
        query = query.where(reports.c.period <= end)
    rows: list[tuple[str, str, str, str]] = []
    with database.reader.connect() as connection:
        if after is not None:
            period, report_id = after
            same = query.where(reports.c.period == period, reports.c.id > report_id)
            same = same.order_by(reports.c.id).limit(limit)
            rows += [tuple(row) for row in connection.execute(same)]
            query = query.where(reports.c.period > period)
        if len(rows) < limit:
            query = query.order_by(reports.c.period, reports.c.id).limit(limit - len(rows))
            rows += [tuple(row) for row in connection.execute(query)]
    return rows


def count_reports(database: Database, metric: str, *, start: str | None, end: str | None) -> int:
    """How many raw reports of ``metric`` are stored for periods ``start``..``end`` (None:
    unbounded); one index range count, for an export's progress."""
    query = select(func.count()).select_from(reports).where(reports.c.metric == metric)
    if start is not None:
        query = query.where(reports.c.period >= start)
    if end is not None:
        query = query.where(reports.c.period <= end)
    with database.reader.connect() as connection:
        return int(connection.execute(query).scalar_one())


def report_pages(
    database: Database, metric: str, *, start: str | None, end: str | None, size: int
) -> Iterator[list[tuple[str, str, str, str]]]:
    """Every raw report (id, period, payload JSON, cell) of ``metric`` in ``start``..``end``, in
    (period, id) order, ``size`` at a time (:func:`read_reports` pages, so memory stays one
    page however many reports there are)."""
    after: tuple[str, str] | None = None
    while rows := read_reports(database, metric, start=start, end=end, after=after, limit=size):
        yield rows
        after = (rows[-1][1], rows[-1][0])


def registry_fingerprints(database: Database) -> list[tuple[str, str, MetricAbout]]:
    """(name, fingerprint, unit/description/owner) of every metric that is not archived, by
    name: the served registry's state, cheaply.

    A fingerprint covers every field of its spec, so these rows change exactly when the list
    of specs or a metric's description does; ``GET /v1/metrics`` derives its ETag from them
    without parsing any spec.
    """
    query = (
        select(metrics.c.name, metrics.c.fingerprint, *_ABOUT)
        .where(metrics.c.archived_at.is_(None))
        .order_by(metrics.c.name)
    )
    with database.reader.connect() as connection:
        rows = connection.execute(query).all()
    return [(row.name, row.fingerprint, _about_of(row)) for row in rows]


def check_ready(database: Database) -> None:
    """Raise the driver's error unless the database answers and holds the migrated registry
    (StorageUnavailable if the SQLite file was deleted or replaced)."""
    database.check_file()
    with database.reader.connect() as connection:
        connection.execute(select(metrics.c.name).limit(1)).all()
