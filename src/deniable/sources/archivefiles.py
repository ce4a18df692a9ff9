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

The manifest also holds ``counted_sha256``, a checksum of the columns an estimate reads
(``payload``, and ``cell`` when the file has cells): per column, the SHA-256 of its values'
lengths (4 bytes each, little-endian) and the SHA-256 of its values' bytes, in row order,
combined by :class:`CountedDigest`. Re-analysis checks a file against it reading those columns
alone, which costs a fifth of reading and hashing every column (a manifest without it is
checked against ``sha256``, as before).

pyarrow and fsspec are imported by the functions that need them (the ``archive`` extra).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deniable.client.errors import InvalidInput

ARCHIVE_VERSION = "1"
"""The archive format version, in each file's metadata."""
FILE_NAME = "reports.parquet"
"""The Parquet file of one (metric, period)."""
MANIFEST_NAME = "manifest.json"
"""The manifest beside it: metric, period, rows, sha256, counted_sha256, version."""
SPEC_KEY = "deniable.spec"
"""Parquet metadata key holding the metric's spec (JSON)."""
VERSION_KEY = "deniable.archive"
"""Parquet metadata key holding :data:`ARCHIVE_VERSION`."""
COMPRESSION = "zstd"
"""The Parquet compression codec."""
READ_BATCH = 65_536
"""Rows per batch when a file is read back."""
COUNTED_COLUMNS = ("payload", "cell")
"""The columns an estimate from the archive reads, which ``counted_sha256`` covers."""


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


class EphemeralArchive(InvalidInput):
    """An archive target on a filesystem that does not outlive the process (fsspec's
    ``memory``, or a caching wrapper such as ``simplecache::``): reports archived there would
    be verified, dropped from the database, and gone when the command exits."""


class ArchiveLink(InvalidInput):
    """A symbolic link where the archiver writes (a planted ``reports.parquet.partial``,
    ``manifest.json``, or partition directory): writing through it would overwrite its target,
    so nothing is written and nothing is dropped."""


class ArchiveCorrupt(InvalidInput):
    """An archived file that does not hold what its manifest says, or a row no honest device
    sends (a payload out of range for its mechanism): re-analysis stops, naming the file (and
    the row), rather than counting it."""


EPHEMERAL_PROTOCOLS = frozenset({"memory", "simplecache", "filecache", "blockcache", "cached"})
"""fsspec protocols whose files live in this process (memory) or in a local cache that is
written back, if at all, on close (the caching wrappers): never an archive target."""


def _layers(fs: Any) -> Iterator[Any]:
    """``fs`` and every filesystem it wraps (``dir::``, caching wrappers: their ``fs``)."""
    seen = 0
    while fs is not None and seen < 16:
        yield fs
        fs, seen = getattr(fs, "fs", None), seen + 1


def check_durable(fs: Any, url: str) -> None:
    """Raise :class:`EphemeralArchive` unless ``fs`` (and everything it wraps) keeps its files
    beyond this process."""
    from fsspec.implementations.cached import CachingFileSystem
    from fsspec.implementations.memory import MemoryFileSystem

    for layer in _layers(fs):
        protocols = {layer.protocol} if isinstance(layer.protocol, str) else set(layer.protocol)
        if isinstance(layer, MemoryFileSystem | CachingFileSystem) or (
            protocols & EPHEMERAL_PROTOCOLS
        ):
            raise EphemeralArchive(
                f"--archive-to {url}: {sorted(protocols)[0]}:// is not a durable store (memory, or a"
                " cache in front of a store), so archived reports would be lost once they are"
                " dropped; archive to a directory or an object store (s3://...)"
            )


def local_path(fs: Any, path: str) -> str | None:
    """The local path that ``path`` on ``fs`` names, through every ``dir::`` layer over the
    local filesystem (where links can be planted and refused), or None if ``fs`` is not local
    underneath (an object store has no links)."""
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    for _ in range(16):
        if isinstance(fs, LocalFileSystem):
            return os.path.normpath(fs._strip_protocol(path))
        if not isinstance(fs, DirFileSystem):
            return None
        path, fs = fs._join(path), fs.fs
    return None


def refuse_links(fs: Any, root: str, path: str) -> None:
    """Raise :class:`ArchiveLink` if ``path`` or a directory between ``root`` and it is a
    symbolic link (on the local filesystem, under any ``dir::`` layers). ``root`` itself may
    be a link: an operator's choice, not a planted file."""
    local_root, local = local_path(fs, root), local_path(fs, path)
    if local_root is None or local is None:
        return
    relative = os.path.relpath(local, local_root)
    current = local_root
    for part in relative.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise ArchiveLink(
                f"{current} is a symbolic link: the archiver does not write through links;"
                " remove it and run again (nothing was written or dropped)"
            )


def open_for_writing(fs: Any, path: str, mode: str = "wb") -> Any:
    """``path`` opened for writing, truncated; on a local filesystem with ``O_NOFOLLOW``, so
    a link planted after :func:`refuse_links` looked is refused, never written through."""
    local = local_path(fs, path)
    if local is None:
        return fs.open(path, mode)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(local, flags, 0o644)
    except OSError:
        if os.path.islink(local):
            raise ArchiveLink(
                f"{local} is a symbolic link: the archiver does not write through links"
            ) from None
        raise
    return os.fdopen(descriptor, mode)


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


class CountedDigest:
    """The running ``counted_sha256`` of an archive file's batches (module docstring): for
    each counted column, one hash of its values' lengths and one of their bytes, so the
    value is the same however the rows are split into batches."""

    def __init__(self) -> None:
        self._parts: dict[str, tuple[Any, Any]] = {}
        self.rows = 0

    def update(self, batch: Any) -> None:
        """Feed a batch (of every column, or of the counted ones alone)."""
        import pyarrow as pa

        for name in COUNTED_COLUMNS:
            if name not in batch.schema.names:
                continue
            array = batch.column(name)
            if array.null_count:
                raise ValueError("an archive file has empty (null) values")
            if not pa.types.is_string(array.type):
                array = array.cast(pa.string())
            lengths, values = self._parts.setdefault(name, (hashlib.sha256(), hashlib.sha256()))
            offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
            offsets = offsets[array.offset : array.offset + len(array) + 1]
            lengths.update(np.diff(offsets).astype("<u4").tobytes())
            if len(array) and offsets[-1] > offsets[0]:
                values.update(memoryview(array.buffers()[2])[offsets[0] : offsets[-1]])
        self.rows += batch.num_rows

    def hexdigest(self) -> str:
        """The combined SHA-256, in hex: the columns by name, each its two hashes."""
        combined = hashlib.sha256(b"deniable.archive counted columns\n")
        for name in sorted(self._parts):
            lengths, values = self._parts[name]
            combined.update(name.encode() + b"\n" + lengths.digest() + values.digest())
        return combined.hexdigest()


@dataclass(frozen=True)
class FileCheck:
    """What reading an archive file back found: its rows and checksums (``sha256`` over
    every column, ``counted_sha256`` over the counted ones; empty when not read)."""

    rows: int
    sha256: str
    counted_sha256: str


def file_batches(fs: Any, path: str, columns: Sequence[str] | None = None) -> Iterator[Any]:
    """The Arrow record batches of the archive file ``path``: read by Arrow's own I/O where
    the file is local (through any ``dir::`` layers), else through ``fs``'s file object (a
    Python object Arrow reads through under the GIL; it made the archive's read-back check
    a sixth of its time)."""
    import pyarrow.parquet as pq

    local = local_path(fs, path)
    if local is not None:
        with pq.ParquetFile(local) as file:
            yield from file.iter_batches(batch_size=READ_BATCH, columns=columns)
        return
    with fs.open(path, "rb") as handle:
        yield from pq.ParquetFile(handle).iter_batches(batch_size=READ_BATCH, columns=columns)


def batch_rows(batch: Any) -> memoryview:
    """The bytes :class:`Digest` hashes for an Arrow batch of an archive file, joined by
    Arrow in C (no Python object per row): the same bytes as ``Digest.update`` of its
    columns, a test holds them equal."""
    import pyarrow as pa
    import pyarrow.compute as pc

    separator, newline = pa.scalar(b"\x1f", pa.binary()), pa.scalar(b"\n", pa.binary())
    parts = [
        batch.column("id").cast(pa.binary()),
        batch.column("payload").cast(pa.binary()),
        separator,
        batch.column("received").cast(pa.string()).cast(pa.binary()),
    ]
    if "cell" in batch.schema.names:
        parts += [separator, batch.column("cell").cast(pa.binary())]
    joined = pc.binary_join_element_wise(*parts, newline, pa.scalar(b"", pa.binary()))
    if joined.null_count:
        raise ValueError("an archive file has empty (null) values")
    if len(joined) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)
    start, end = offsets[joined.offset], offsets[joined.offset + len(joined)]
    return memoryview(joined.buffers()[2])[start:end]


def check_file(fs: Any, path: str) -> FileCheck:
    """Read the archive file ``path`` back: its row count and both checksums (ValueError,
    from pyarrow, if it is not a whole Parquet file)."""
    digest, counted = hashlib.sha256(), CountedDigest()
    for batch in file_batches(fs, path):
        digest.update(batch_rows(batch))
        counted.update(batch)
    return FileCheck(counted.rows, digest.hexdigest(), counted.hexdigest())


def check_counted(fs: Any, path: str) -> FileCheck:
    """Read the counted columns of the archive file ``path`` (those it has; Arrow skips a
    column a file lacks): its row count and ``counted_sha256`` (``sha256`` left empty)."""
    counted = CountedDigest()
    for batch in file_batches(fs, path, COUNTED_COLUMNS):
        counted.update(batch)
    return FileCheck(counted.rows, "", counted.hexdigest())


def verify_manifest(fs: Any, path: str, metric: str, period: str) -> bool:
    """Check the archive file ``path`` against the ``manifest.json`` beside it: the metric,
    the period, the row count and the checksum must all agree (:class:`ArchiveCorrupt`
    otherwise, naming the file); the counted columns' checksum when the manifest has one,
    else the whole file's. False if the file has no manifest (the caller says so)."""
    manifest = f"{path.rsplit('/', 1)[0]}/{MANIFEST_NAME}"
    if not fs.exists(manifest):
        return False
    try:
        with fs.open(manifest, "rb") as handle:
            document = json.loads(handle.read(1 << 16))
        key = "counted_sha256" if "counted_sha256" in document else "sha256"
        expected = (document["metric"], document["period"], document["rows"], document[key])
        if not isinstance(expected[2], int) or not isinstance(expected[3], str):
            raise TypeError("rows and checksum")
    except (ValueError, KeyError, TypeError):
        raise ArchiveCorrupt(f"{manifest} is not an archive manifest") from None
    if expected[:2] != (metric, period):
        raise ArchiveCorrupt(
            f"{manifest} describes {expected[0]} {expected[1]}, not {metric} {period}"
        )
    try:
        found = check_counted(fs, path) if key == "counted_sha256" else check_file(fs, path)
    except (ValueError, KeyError, OSError) as exc:
        raise ArchiveCorrupt(f"{path} cannot be read back: {exc}") from None
    checksum = found.counted_sha256 if key == "counted_sha256" else found.sha256
    if (found.rows, checksum) != expected[2:]:
        raise ArchiveCorrupt(
            f"{path} does not match its manifest: {found.rows:,} row(s) with checksum"
            f" {checksum[:12]}..., the manifest says {expected[2]:,} with"
            f" {str(expected[3])[:12]}...: the file was altered after it was archived"
        )
    return True
