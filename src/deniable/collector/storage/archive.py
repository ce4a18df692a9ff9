"""Archive raw reports of one (metric, period) to Parquet, verified before retention drops them.

The layout, schema and checksum are :mod:`deniable.sources.archivefiles`'. Writing streams
the period's reports in id order (keyset pages, so memory stays one page) into
``reports.parquet.partial``, computing the database's checksum on the way; the file is then
moved to ``reports.parquet``, read back, and its rows and checksum must equal the
database's, or nothing is dropped (:class:`ArchiveMismatch`). Only then is ``manifest.json``
written and the caller free to drop the rows.

Resumable: a run interrupted anywhere is simply run again. A (metric, period) whose rows
are still in the database is archived again unless its file already holds exactly those
rows (same count and checksum), in which case the file is kept; one whose rows are gone
was verified before they were dropped, and is not visited. Rows are dropped all at once per
(metric, period) (a partition, or one DELETE on SQLite), so the database never holds part of
an archived period.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from deniable.client.errors import DeniableError
from deniable.client.spec import MetricSpec, canonical_json
from deniable.sources.archivefiles import (
    ARCHIVE_VERSION,
    COMPRESSION,
    FILE_NAME,
    MANIFEST_NAME,
    FileCheck,
    arrow_schema,
    batch_rows,
    check_durable,
    check_file,
    counted_by_groups,
    open_archive,
    open_for_writing,
    partition_dir,
    refuse_links,
)

from .engine import Database

PAGE = 50_000
"""Reports read per query and written per row group."""


class ArchiveMismatch(DeniableError):
    """An archive file read back does not hold exactly the database's reports: nothing is
    dropped. The message names the metric, the period and the counts, never a report."""


@dataclass(frozen=True)
class ArchivedPeriod:
    """One (metric, period) archived and verified: its rows, checksum and whether a file of
    an earlier, interrupted run was found whole and kept."""

    metric: str
    period: str
    rows: int
    sha256: str
    kept: bool


_PAGE_SQL = {
    "sqlite": "SELECT id, payload, received, cell FROM reports"
    " WHERE metric = ? AND period = ?{after} ORDER BY id LIMIT ?",
    "postgresql": "SELECT uuid_send(id), payload, to_char(received, 'YYYY-MM-DD'), cell"
    " FROM reports WHERE metric = %s AND period = %s{after} ORDER BY id LIMIT %s",
}
"""A page of a (metric, period)'s reports in id order, each as the archive stores it: the id's
16 bytes (SQLite keeps them so; PostgreSQL's ``uuid_send``), the payload text, the received
date as ISO text, the cell. Selected as bytes and text on the driver's own cursor (plain
tuples), no id goes through a UUID object or its text and back (38% of the archive's time
did)."""

_AFTER = {
    "sqlite": " AND id > ?",
    "postgresql": " AND id > CAST(encode(%s, 'hex') AS uuid)",
}
"""The keyset condition of the pages after the first: ids past the last one read (bytes)."""


def _pages(database: Database, metric: str, period: str) -> Iterator[Any]:
    """The reports of (metric, period) in id order, a page at a time, as Arrow tables of the
    archive's schema (with cells): one index range seek per page (one partition on
    PostgreSQL)."""
    import pyarrow as pa

    schema = arrow_schema(True)
    sql = _PAGE_SQL[database.dialect]
    after: bytes | None = None
    while True:
        if after is None:
            statement, arguments = sql.format(after=""), (metric, period, PAGE)
        else:
            statement = sql.format(after=_AFTER[database.dialect])
            arguments = (metric, period, after, PAGE)
        with database.reader.connect() as connection:
            cursor = connection.connection.cursor()
            try:
                cursor.execute(statement, arguments)
                rows = cursor.fetchall()
            finally:
                cursor.close()
            connection.rollback()
        if not rows:
            return
        ids, payloads, received, cells = zip(*rows, strict=True)
        arrays = [
            pa.array(ids, pa.binary(16)),
            pa.array(payloads, pa.string()),
            pa.array(received, pa.string()).cast(pa.date32()),
            pa.array(cells, pa.string()),
        ]
        yield pa.Table.from_arrays(arrays, schema=schema)
        after = bytes(ids[-1])


def _digest(digest: Any, table: Any) -> None:
    """Feed ``table``'s rows to ``digest`` (a SHA-256), joined by Arrow in C as the read-back
    check joins them (:func:`~deniable.sources.archivefiles.batch_rows`): the same bytes
    :class:`~deniable.sources.archivefiles.Digest` hashes, so the pinned checksum is
    unchanged."""
    for batch in table.to_batches():
        digest.update(batch_rows(batch))


def database_check(database: Database, metric: str, period: str) -> tuple[int, str]:
    """The rows and checksum of (metric, period) as the database holds them."""
    digest, rows = hashlib.sha256(), 0
    for table in _pages(database, metric, period):
        _digest(digest, table)
        rows += table.num_rows
    return rows, digest.hexdigest()


class Archive:
    """An archive target (a directory or an object store URL) that periods are written to:
    never one that does not outlive the process (:class:`.archivefiles.EphemeralArchive`),
    never through a symbolic link (:class:`.archivefiles.ArchiveLink`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fs, self.root = open_archive(url)
        check_durable(self.fs, url)

    def _paths(self, metric: str, period: str) -> tuple[str, str, str]:
        directory = partition_dir(self.root, metric, period)
        final = f"{directory}/{FILE_NAME}"
        return directory, final, f"{directory}/{MANIFEST_NAME}"

    def _write(
        self, database: Database, spec: MetricSpec, period: str, path: str
    ) -> tuple[int, str]:
        """Write (metric, period) to ``path`` (``.partial`` first, then moved); the database
        rows' count and checksum."""
        import pyarrow.parquet as pq

        schema = arrow_schema(True, canonical_json(spec.to_dict()))
        partial = path + ".partial"
        digest, rows = hashlib.sha256(), 0
        with (
            open_for_writing(self.fs, partial) as handle,
            pq.ParquetWriter(handle, schema, compression=COMPRESSION) as writer,
        ):
            for table in _pages(database, spec.name, period):
                _digest(digest, table)
                rows += table.num_rows
                writer.write_table(table.replace_schema_metadata(schema.metadata))
        self.fs.mv(partial, path)
        return rows, digest.hexdigest()

    def _file_check(self, spec: MetricSpec, path: str, rows: int, sha256: str) -> FileCheck | None:
        """The file of ``spec``'s metric at ``path`` read back, if it holds exactly ``rows``
        rows with checksum ``sha256``; None if it does not, or cannot be read."""
        if not self.fs.exists(path):
            return None
        try:
            found = check_file(self.fs, path, counted_by_groups(spec))
        except Exception:  # a torn or foreign file: written again
            return None
        return found if (found.rows, found.sha256) == (rows, sha256) else None

    def store(self, database: Database, spec: MetricSpec, period: str) -> ArchivedPeriod:
        """Archive and verify the reports of (``spec``'s metric, ``period``); raise
        :class:`ArchiveMismatch` if the file read back differs from the database."""
        directory, path, manifest = self._paths(spec.name, period)
        refuse_links(self.fs, self.root, directory)
        self.fs.makedirs(directory, exist_ok=True)
        for name in (path, path + ".partial", manifest):
            refuse_links(self.fs, self.root, name)
        found = None
        if self.fs.exists(path):
            rows, sha256 = database_check(database, spec.name, period)
            found = self._file_check(spec, path, rows, sha256)
        kept = found is not None
        if found is None:
            rows, sha256 = self._write(database, spec, period, path)
            found = self._file_check(spec, path, rows, sha256)
            if found is None:
                raise ArchiveMismatch(
                    f"archive of {spec.name} {period} at {self.url} does not read back as the"
                    f" {rows:,} report(s) the database holds; nothing was dropped"
                )
        document = {
            "metric": spec.name,
            "period": period,
            "rows": rows,
            "sha256": sha256,
            **found.checksums,
            "version": ARCHIVE_VERSION,
        }
        with open_for_writing(self.fs, manifest, "w") as handle:
            handle.write(json.dumps(document, sort_keys=True))
        return ArchivedPeriod(spec.name, period, rows, sha256, kept)
