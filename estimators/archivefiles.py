"""The archive of raw reports: its layout, its Parquet schema and its checksum (one contract
for the collector that writes it and the re-analysis that reads it; docs/DESIGN.md pins it).

An archive is a directory, local or on an object store (any fsspec URL: a path,
``file://``, ``s3://`` with the ``s3fs`` package), holding one Parquet file per (metric,
period), Hive-partitioned: ``{root}/metric={name}/period={label}/reports.parquet``, zstd,
with ``manifest.json`` beside it (rows and checksum, written once the file was verified).
Columns: ``id`` (16 bytes), ``payload`` (the stored payload JSON text, exactly), ``received``
(date), and ``cell`` (text) when the collector stores raw reports' dimension cells. The
file's key-value metadata holds the metric's spec (``deniable.spec``) and the archive
format version (``deniable.archive``).

The checksum is SHA-256 over the rows in id order, each row its 16 id bytes, its payload
text (UTF-8), ``\\x1f``, its received date (ISO), then ``\\x1f`` and its cell if the file has
cells, and ``\\n``: independent of how the rows are split into pages or row groups, and
changed by any row lost, doubled or altered.

pyarrow and fsspec are imported by the functions that need them (the ``archive`` extra).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

ARCHIVE_VERSION = "1"
"""The archive format version, in each file's metadata."""
FILE_NAME = "reports.parquet"
"""The Parquet file of one (metric, period)."""
MANIFEST_NAME = "manifest.json"
"""The manifest beside it: metric, period, rows, sha256, version."""
SPEC_KEY = "deniable.spec"
"""Parquet metadata key holding the metric's spec (JSON)."""
VERSION_KEY = "deniable.archive"
"""Parquet metadata key holding :data:`ARCHIVE_VERSION`."""
COMPRESSION = "zstd"
"""The Parquet compression codec."""
READ_BATCH = 65_536
"""Rows per batch when a file is read back."""


def arrow_schema(with_cell: bool, spec_json: str | None = None) -> Any:
    """The pinned Arrow schema of an archive file (with the ``cell`` column if asked)."""
    import pyarrow as pa

    fields = [
        pa.field("id", pa.binary(16), nullable=False),
        pa.field("payload", pa.string(), nullable=False),
        pa.field("received", pa.date32(), nullable=False),
    ]
    if with_cell:
        fields.append(pa.field("cell", pa.string(), nullable=False))
    metadata = {VERSION_KEY: ARCHIVE_VERSION}
    if spec_json is not None:
        metadata[SPEC_KEY] = spec_json
    return pa.schema(fields, metadata=metadata)


def open_archive(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and root path of the archive at ``url`` (a path or a URL)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    return fs, root.rstrip("/")


def partition_dir(root: str, metric: str, period: str) -> str:
    """The directory of (metric, period) under ``root``."""
    return f"{root}/metric={metric}/period={period}"


class Digest:
    """The running checksum of rows fed in id order (see the module's docstring)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def update(
        self,
        ids: Sequence[bytes],
        payloads: Sequence[str],
        received: Sequence[str],
        cells: Sequence[str] | None = None,
    ) -> None:
        """Feed rows (ids as 16 bytes, received as ISO dates)."""
        if cells is None:
            parts: Iterable[bytes] = (
                i + f"{p}\x1f{r}\n".encode()
                for i, p, r in zip(ids, payloads, received, strict=True)
            )
        else:
            parts = (
                i + f"{p}\x1f{r}\x1f{c}\n".encode()
                for i, p, r, c in zip(ids, payloads, received, cells, strict=True)
            )
        self._hash.update(b"".join(parts))
        self.rows += len(ids)

    def hexdigest(self) -> str:
        """The SHA-256 so far, in hex."""
        return self._hash.hexdigest()


@dataclass(frozen=True)
class FileCheck:
    """What reading an archive file back found: its rows and checksum."""

    rows: int
    sha256: str


def file_batches(fs: Any, path: str, columns: Sequence[str] | None = None) -> Iterator[Any]:
    """The Arrow record batches of the archive file ``path``."""
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as handle:
        yield from pq.ParquetFile(handle).iter_batches(batch_size=READ_BATCH, columns=columns)


def check_file(fs: Any, path: str) -> FileCheck:
    """Read the archive file ``path`` back: its row count and checksum (ValueError, from
    pyarrow, if it is not a whole Parquet file)."""
    digest = Digest()
    for batch in file_batches(fs, path):
        names = batch.schema.names
        cells = batch.column("cell").to_pylist() if "cell" in names else None
        received = [day.isoformat() for day in batch.column("received").to_pylist()]
        digest.update(
            batch.column("id").to_pylist(), batch.column("payload").to_pylist(), received, cells
        )
    return FileCheck(digest.rows, digest.hexdigest())
